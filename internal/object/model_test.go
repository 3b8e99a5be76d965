package object

import (
	"fmt"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"

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
