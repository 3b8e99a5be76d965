package object

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestZonalModel: the zone of each endpoint is kept only with zonal; without it a slice of zoned
// endpoints is as small as one without zones.
func TestZonalModel(t *testing.T) {
	zoned := func(zones ...string) *discovery.EndpointSlice {
		return k8stest.Slice("testns", "hdls", "hdls-1", discovery.AddressTypeIPv4, nil,
			k8stest.Endpoint{Addrs: []string{"172.0.0.1"}, Zone: zones[0]}, k8stest.Endpoint{Addrs: []string{"172.0.0.2"}, Zone: zones[1]},
			k8stest.Endpoint{Addrs: []string{"172.0.0.3"}, Zone: zones[2]})
	}
	sl := zoned("a", "b", "A")
	without, _ := SliceTransform(SliceOptions{})(sl)
	if m := without.(*StoredSlice).Model; m.names != nil {
		t.Errorf("without zonal the slice keeps names %+v", m.names)
	}
	with, _ := SliceTransform(SliceOptions{Zonal: true})(sl)
	m := with.(*StoredSlice).Model
	var zones []string
	for _, e := range m.Endpoints() {
		zones = append(zones, e.Zone)
	}
	if fmt.Sprint(zones) != "[a b a]" || m.names.zones.Value() != "a/b" {
		t.Errorf("with zonal: zones %v (distinct %q), want [a b a], lower case, two distinct", zones, m.names.zones.Value())
	}
	// Slices of the same zones share them.
	other, _ := SliceTransform(SliceOptions{Zonal: true})(zoned("b", "a", "a"))
	if same, _ := SliceTransform(SliceOptions{Zonal: true})(sl.DeepCopy()); same.(*StoredSlice).Model.names.zones != m.names.zones ||
		other.(*StoredSlice).Model.names.zones == m.names.zones {
		t.Errorf("zones interned: same zones share a handle, others not")
	}
}

// TestSliceEqual: Equal says what reflect.DeepEqual says of two slices' models, over slices that
// differ in each thing a model keeps (addresses, family, hostnames, ports, zones, topology,
// terminating endpoints), with every option on and with none.
func TestSliceEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pick := func(choices ...string) string { return choices[r.IntN(len(choices))] }
	random := func() *discovery.EndpointSlice {
		family, prefix := discovery.AddressTypeIPv4, "10.0.0."
		if r.IntN(4) == 0 {
			family, prefix = discovery.AddressTypeIPv6, "fd00::"
		}
		var ports []discovery.EndpointPort
		if r.IntN(2) == 0 {
			ports = k8stest.SlicePorts(k8stest.SlicePort(pick("http", "dns"), corev1.Protocol(pick("TCP", "UDP")), int32(r.IntN(2)+80)))
		}
		var eps []k8stest.Endpoint
		for range r.IntN(4) {
			e := k8stest.Endpoint{Addrs: []string{prefix + pick("1", "2", "3")}, Hostname: pick("", "", "h", "g"), Pod: pick("", "p"),
				Zone: pick("", "a", "b"), Node: pick("", "n1", "n2")}
			if r.IntN(3) == 0 {
				e.ForZones = []string{pick("a", "b")}
			}
			if r.IntN(4) == 0 {
				e.NotReady, e.Terminating = true, true
			}
			eps = append(eps, e)
		}
		return k8stest.Slice("ns", "svc", "s", family, ports, eps...)
	}
	all := SliceOptions{PodNames: true, Zonal: true, Topology: true, ServingTerminating: true}
	for _, o := range []SliceOptions{{}, all} {
		var models []*EndpointSlice
		for range 300 {
			stored, err := SliceTransform(o)(random())
			if err != nil {
				t.Fatal(err)
			}
			models = append(models, stored.(*StoredSlice).Model)
		}
		models = append(models, nil)
		equal := 0
		for _, a := range models {
			for _, b := range models {
				if got, want := a.Equal(b), reflect.DeepEqual(a, b); got != want {
					t.Fatalf("options %+v: Equal says %v, DeepEqual %v, of\n%+v\n%+v", o, got, want, a, b)
				} else if got && a != b {
					equal++
				}
			}
		}
		if equal == 0 {
			t.Errorf("options %+v: no two distinct models were equal; the test compares only differences", o)
		}
	}
}
