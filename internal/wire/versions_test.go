package wire

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kubetree/kubetree/internal/k8stest"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// readAll reads a metadata-only list into "namespace/name@version" lines.
func readAll(t *testing.T, b []byte) ([]string, error) {
	t.Helper()
	var got []string
	err := ReadVersions(iotest.OneByteReader(bytes.NewReader(b)), func(ns, name, version string) {
		got = append(got, ns+"/"+name+"@"+version)
	})
	return got, err
}

// TestReadVersions: the namespace, name and resourceVersion of every object of a metadata-only list
// as the API server encodes it, with everything else an object's metadata carries (labels,
// annotations, owners, managed fields) passed over; read one byte at a time, as a slow stream
// delivers it.
func TestReadVersions(t *testing.T) {
	yes := true
	slice := k8stest.Slice("prod", "db", "db-abcde", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.0.1"}})
	slice.ResourceVersion = "2001"
	slice.UID = "0b6ad5e4-60a3-4cf3-a8e2-9d1a4c0f6a51"
	slice.Annotations = map[string]string{api.EndpointsLastChangeTriggerTime: "2026-11-30T16:10:00Z"}
	slice.OwnerReferences = []meta.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "db", UID: "5c1e", Controller: &yes}}
	slice.ManagedFields = []meta.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: meta.ManagedFieldsOperationUpdate,
		APIVersion: "discovery.k8s.io/v1", FieldsType: "FieldsV1", FieldsV1: meta.NewFieldsV1(`{"f:endpoints":{}}`)}}
	svc := k8stest.ClusterIPService("prod", "db", []string{"10.96.0.10"})
	svc.ResourceVersion = "17"
	ns := k8stest.Namespace("prod")
	ns.ResourceVersion = "3"

	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want []string
	}{
		{"empty", nil, nil},
		{"namespaced objects of any kind, in key order", []runtime.Object{svc, slice},
			[]string{"prod/db@17", "prod/db-abcde@2001"}},
		{"cluster-scoped", []runtime.Object{ns}, []string{"/prod@3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := k8stest.MetadataList("2002", tc.objs...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, b)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

// TestReadVersionsLongList: 20,000 objects, the EndpointSlices and services of a cluster of
// 1,000,000 endpoints, each read in order.
func TestReadVersionsLongList(t *testing.T) {
	var objs []runtime.Object
	var want []string
	for i := range 20000 {
		s := k8stest.ClusterIPService(fmt.Sprintf("ns-%02d", i%20), fmt.Sprintf("svc-%05d", i), nil)
		s.ResourceVersion = fmt.Sprint(1000 + i)
		objs = append(objs, s)
		want = append(want, s.Namespace+"/"+s.Name+"@"+s.ResourceVersion)
	}
	slices.Sort(want)
	b, err := k8stest.MetadataList("1", objs...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = ReadVersions(bytes.NewReader(b), func(ns, name, version string) { got = append(got, ns+"/"+name+"@"+version) })
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("read %d objects (%v), want %d in key order", len(got), err, len(want))
	}
}

// TestReadVersionsRejects: what is not a whole metadata-only list is an error, never a shorter list.
func TestReadVersionsRejects(t *testing.T) {
	svc := k8stest.ClusterIPService("prod", "db", []string{"10.96.0.10"})
	svc.ResourceVersion = "17"
	list, err := k8stest.MetadataList("18", svc, k8stest.Namespace("prod"))
	if err != nil {
		t.Fatal(err)
	}
	// A full object where a metadata-only list was asked for.
	var full bytes.Buffer
	full.Write(protobufMagic)
	full.Write([]byte{0x0a, 0x09, 0x12, 0x07}) // TypeMeta{kind: "Service"}
	full.WriteString("Service")
	full.Write([]byte{0x12, 0x00}) // raw: empty
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"nothing", nil},
		{"JSON", []byte(`{"kind":"PartialObjectMetadataList","items":[]}`)},
		{"another kind", full.Bytes()},
		{"cut inside an object", list[:len(list)-10]},
		{"cut after the first object", list[:len(list)/2]},
		{"no list in the envelope", list[:len(protobufMagic)]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.data)
			if !errors.Is(err, errBadProtobuf) {
				t.Errorf("read %q, error %v; want an error", got, err)
			}
			if err != nil && !strings.Contains(err.Error(), "protobuf") {
				t.Errorf("error %q does not say what is wrong", err)
			}
		})
	}
}
