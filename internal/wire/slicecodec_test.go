package wire

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/kubetree/kubetree/internal/object"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)

// sliceAsAPIServer encodes obj as the API server sends a discovery/v1 object with protobuf.
func sliceAsAPIServer(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var info runtime.SerializerInfo
	for _, i := range scheme.Codecs.SupportedMediaTypes() {
		if i.MediaType == runtime.ContentTypeProtobuf {
			info = i
		}
	}
	var b bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, discovery.SchemeGroupVersion).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// codecSlices are slices with every field the codec reads, in every form that changes the model,
// and much that it skips.
func codecSlices() []*discovery.EndpointSlice {
	yes, no := true, false
	str := func(s string) *string { return &s }
	num := func(n int32) *int32 { return &n }
	proto := func(p api.Protocol) *api.Protocol { return &p }

	full := &discovery.EndpointSlice{
		ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "web-abc12", ResourceVersion: "4711", UID: "0b3f", Generation: 2,
			Labels: map[string]string{discovery.LabelServiceName: "web", discovery.LabelManagedBy: "endpointslice-controller.k8s.io"},
			Annotations: map[string]string{api.EndpointsLastChangeTriggerTime: "2026-11-30T12:00:00.123456Z",
				"kubectl.kubernetes.io/last-applied-configuration": "{}"},
			OwnerReferences: []meta.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "1a2b"}},
			ManagedFields: []meta.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: meta.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: meta.NewFieldsV1(`{"f:endpoints":{}}`)}}},
		AddressType: discovery.AddressTypeIPv4,
		Ports: []discovery.EndpointPort{
			{Name: str("http"), Protocol: proto(api.ProtocolTCP), Port: num(8080), AppProtocol: str("http")},
			{Name: str("dns"), Protocol: proto(api.ProtocolUDP), Port: num(53)},
			{Name: str("metrics"), Port: num(9153)}, // no protocol: TCP
			{Name: str("nonum")},                    // no port number: no SRV
			{Port: num(443)},                        // unnamed
			{Name: str("zero"), Port: num(0)},       // a problem
			{Name: str("Upper"), Port: num(1)},      // a problem
			{Name: str("neg"), Port: num(-5)},       // a problem
		},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Conditions: discovery.EndpointConditions{Ready: &yes, Serving: &yes},
				Hostname: str("Web-0"), NodeName: str("node-1"), Zone: str("a"),
				TargetRef: &api.ObjectReference{Kind: "Pod", Namespace: "prod", Name: "web-0", UID: "9"},
				Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "a"}, {Name: "b"}},
					ForNodes: []discovery.ForNode{{Name: "node-1"}}}},
			{Addresses: []string{"10.244.1.6", "10.244.1.7"}, TargetRef: &api.ObjectReference{Kind: "Pod", Name: "Web-1"}},
			{Addresses: []string{"10.244.1.8"}, Conditions: discovery.EndpointConditions{Ready: &no}, Hostname: str("down")},
			{Addresses: []string{"10.244.1.12"}, Conditions: discovery.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes}, Hostname: str("leaving")},
			{Addresses: []string{"10.244.1.13"}, Conditions: discovery.EndpointConditions{Ready: &no, Serving: &no, Terminating: &yes}},
			{Addresses: []string{"10.244.1.14"}, Conditions: discovery.EndpointConditions{Ready: &no, Terminating: &yes}}, // serving unset: serving
			{Addresses: []string{"10.244.1.9"}, TargetRef: &api.ObjectReference{Kind: "Node", Name: "node-1"}},
			{Addresses: []string{"not-an-address", "fd00::1", "::ffff:10.0.0.1"}, Hostname: str("bad_name")},
			{Addresses: []string{"10.244.1.10"}, Hostname: str(""), TargetRef: &api.ObjectReference{Kind: "Pod", Name: "bad.name"}},
			{Addresses: []string{"10.244.1.11"}, DeprecatedTopology: map[string]string{"zone": "a"}},
		},
	}
	v6 := &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "web-v6", ResourceVersion: "12",
		Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv6,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"fd00::5"}}, {Addresses: []string{"10.0.0.1"}}},
		Ports:       []discovery.EndpointPort{{Name: str("http"), Port: num(80)}}}
	fqdn := &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "ext", ResourceVersion: "13"},
		AddressType: discovery.AddressTypeFQDN, Endpoints: []discovery.Endpoint{{Addresses: []string{"example.com"}}}}
	orphan := &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "orphan", ResourceVersion: "14",
		Annotations: map[string]string{api.EndpointsLastChangeTriggerTime: "not a time"}},
		AddressType: discovery.AddressTypeIPv4}
	// A slice of a ServiceImport, from another cluster, with zones.
	imported := &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "web-east", ResourceVersion: "15",
		Labels: map[string]string{mcs.LabelServiceName: "web", mcs.LabelSourceCluster: "East", discovery.LabelServiceName: "web-import"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{{Addresses: []string{"10.9.0.1"}, Hostname: str("web-0"), Zone: str("Zone-B")},
			{Addresses: []string{"10.9.0.2"}, Zone: str("zone-c")}, {Addresses: []string{"10.9.0.3"}}},
		Ports: []discovery.EndpointPort{{Name: str("http"), Port: num(80)}}}
	return []*discovery.EndpointSlice{full, v6, fqdn, orphan, imported}
}

// TestSliceCodecAsSliceTransform: a slice read from protobuf by sliceCodec is what object.SliceTransform
// makes of the same slice decoded in full, with and without endpoint_pod_names, zonal and
// multicluster: the two ways in end in one model.
func TestSliceCodecAsSliceTransform(t *testing.T) {
	for _, o := range []object.SliceOptions{{}, {PodNames: true}, {Zonal: true}, {Multicluster: true}, {ServingTerminating: true},
		{PodNames: true, Zonal: true, Multicluster: true, ServingTerminating: true}, {Topology: true},
		{PodNames: true, Zonal: true, Topology: true, ServingTerminating: true}} {
		list := &discovery.EndpointSliceList{ListMeta: meta.ListMeta{ResourceVersion: "99", Continue: "next"}}
		for _, s := range codecSlices() {
			list.Items = append(list.Items, *s)
		}
		transform := object.SliceTransform(o)
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			codecAsTransform[*discovery.EndpointSlice, object.StoredSlice](t, NewSliceCodec(o, scheme.Codecs.UniversalDeserializer()), sliceAsAPIServer,
				"EndpointSlice", codecSlices(), list, func(s *discovery.EndpointSlice) any { stored, _ := transform(s.DeepCopy()); return stored })
		})
	}
	// The full slice has a model with Problems: the comparison above compared something.
	terminating := func(st *object.StoredSlice) []*object.EndpointSlice {
		return (&object.Service{Slices: []*object.EndpointSlice{st.Model}}).ServingTerminating()
	}
	s, _ := object.SliceTransform(object.SliceOptions{})(codecSlices()[0])
	if st := s.(*object.StoredSlice); st.Model == nil || st.Model.Len() == 0 || len(st.Problems()) == 0 || st.Triggered == 0 || terminating(st) != nil {
		t.Fatalf("the full slice's stored form is missing parts (or has terminating endpoints without the option): %+v", st)
	}
	// With serving_terminating, its endpoints that are terminating and serving (or unset) are kept.
	s, _ = object.SliceTransform(object.SliceOptions{ServingTerminating: true})(codecSlices()[0])
	var kept []string
	for _, t := range terminating(s.(*object.StoredSlice)) {
		for _, e := range t.Endpoints() {
			kept = append(kept, e.Addr.String()+"/"+e.Hostname)
		}
	}
	if want := []string{"10.244.1.12/leaving", "10.244.1.14/"}; !reflect.DeepEqual(kept, want) {
		t.Errorf("serving-but-terminating endpoints kept: %q, want %q", kept, want)
	}
}

// TestSliceCodecBookmarksAndErrors: a bookmark keeps the version the reflector watches from, and a
// watch error's Status goes to the usual decoder, so that the reflector sees a 410 Gone as one.
func TestSliceCodecBookmarksAndErrors(t *testing.T) {
	codec := NewSliceCodec(object.SliceOptions{}, scheme.Codecs.UniversalDeserializer())
	bookmark := &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{ResourceVersion: "12345"}}
	got, _, err := codec.Decode(sliceAsAPIServer(t, bookmark), nil, nil)
	if err != nil || got.(*object.StoredSlice).ResourceVersion != "12345" {
		t.Fatalf("bookmark: %+v, %v", got, err)
	}
	gone := apierrors.NewResourceExpired("too old resource version")
	got, _, err = codec.Decode(asAPIServer(t, &gone.ErrStatus), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := got.(*meta.Status); !ok || !apierrors.IsResourceExpired(apierrors.FromObject(s)) {
		t.Fatalf("a watch error's Status: %#v", got)
	}
}

// FuzzSliceCodec: whatever bytes arrive, the codec returns an error or a slice, never panics, and
// what it keeps is as the model promises: valid addresses of the slice's family, DNS-label names.
func FuzzSliceCodec(f *testing.F) {
	for _, s := range codecSlices() {
		f.Add(sliceAsAPIServer(f, s))
	}
	f.Add([]byte("k8s\x00"))
	f.Add([]byte{})
	codec := NewSliceCodec(object.SliceOptions{PodNames: true, Zonal: true}, scheme.Codecs.UniversalDeserializer())
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := codec.Decode(data, nil, nil)
		if err != nil {
			return
		}
		stored := decodedItems[object.StoredSlice](t, obj)
		for _, s := range stored {
			if s.Model == nil {
				continue
			}
			for _, e := range s.Model.Endpoints() {
				if !e.Addr.IsValid() || e.Addr.Is4In6() || (e.Hostname != "" && !isDNSLabel(e.Hostname)) {
					t.Fatalf("a bad endpoint kept: %+v", e)
				}
			}
			for _, p := range s.Model.Ports {
				if !isDNSLabel(p.Name) || p.Port == 0 {
					t.Fatalf("a bad port kept: %+v", p)
				}
			}
		}
	})
}

// BenchmarkSliceDecode decodes one slice of 100 endpoints from protobuf in full, as client-go
// does, and slim.
func BenchmarkSliceDecode(b *testing.B) {
	data := sliceAsAPIServer(b, hundredEndpoints())
	codec := NewSliceCodec(object.SliceOptions{}, scheme.Codecs.UniversalDeserializer())
	full := scheme.Codecs.UniversalDeserializer()
	transform := object.SliceTransform(object.SliceOptions{})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj, _, _ := full.Decode(data, nil, nil)
			transform(obj)
		}
	})
	b.Run("slim", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			codec.Decode(data, nil, nil)
		}
	})
}
