package wire

import (
	"fmt"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/object"
	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// codecServices are services with every field the codec reads, in every form that changes the
// model, and much that it skips.
func codecServices() []*api.Service {
	str := func(s string) *string { return &s }
	noise := meta.ObjectMeta{UID: "0b3f", Generation: 2, Labels: map[string]string{"app": "web"},
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"},
		ManagedFields: []meta.ManagedFieldsEntry{{Manager: "kubectl", Operation: meta.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: meta.NewFieldsV1(`{"f:spec":{}}`)}},
		CreationTimestamp: meta.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))}
	named := func(name string) meta.ObjectMeta {
		m := *noise.DeepCopy()
		m.Namespace, m.Name, m.ResourceVersion = "prod", name, "4711"
		return m
	}
	web := &api.Service{ObjectMeta: named("web"), Spec: api.ServiceSpec{Type: api.ServiceTypeLoadBalancer,
		ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10", "fd00::10"}, Selector: map[string]string{"app": "web"},
		Ports: []api.ServicePort{{Name: "http", Protocol: api.ProtocolTCP, Port: 80, NodePort: 30080}, {Name: "dns", Protocol: api.ProtocolUDP, Port: 53},
			{Port: 443}, {Name: "Upper", Port: 1}, {Name: "zero"}},
		ExternalIPs:         []string{"192.0.2.1", "not-an-ip"},
		SessionAffinity:     api.ServiceAffinityClientIP,
		TrafficDistribution: str(api.ServiceTrafficDistributionPreferClose)},
		Status: api.ServiceStatus{LoadBalancer: api.LoadBalancerStatus{Ingress: []api.LoadBalancerIngress{{IP: "198.51.100.1"}, {Hostname: "lb.example.com"}}}}}
	oneIP := &api.Service{ObjectMeta: named("one"), Spec: api.ServiceSpec{ClusterIP: "10.96.0.11", Ports: []api.ServicePort{{Name: "http", Port: 80}}}}
	headless := &api.Service{ObjectMeta: named("db"), Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone, Selector: map[string]string{"app": "db"},
		TrafficDistribution: str(api.ServiceTrafficDistributionPreferSameNode)}}
	headless.Annotations[api.AnnotationTopologyMode] = "Auto"
	near := &api.Service{ObjectMeta: named("near"), Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone,
		TrafficDistribution: str(api.ServiceTrafficDistributionPreferSameNode)}}
	bare := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "bare", ResourceVersion: "1"}, Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone}}
	hinted := &api.Service{ObjectMeta: named("hinted"), Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone,
		TrafficDistribution: str(api.ServiceTrafficDistributionPreferSameZone)}}
	hinted.Annotations[api.DeprecatedAnnotationTopologyAwareHints] = "auto"
	external := &api.Service{ObjectMeta: named("ext"), Spec: api.ServiceSpec{Type: api.ServiceTypeExternalName, ExternalName: "Example.COM."}}
	badExternal := &api.Service{ObjectMeta: named("badext"), Spec: api.ServiceSpec{Type: api.ServiceTypeExternalName, ExternalName: "10.0.0.1"}}
	badName := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "Bad_Name", ResourceVersion: "2"}, Spec: api.ServiceSpec{ClusterIP: "10.96.0.12"}}
	badIP := &api.Service{ObjectMeta: named("badip"), Spec: api.ServiceSpec{ClusterIP: "nope", ClusterIPs: []string{"nope", "10.96.0.13", "10.96.0.13"}}}
	return []*api.Service{web, oneIP, headless, near, bare, hinted, external, badExternal, badName, badIP}
}

// TestServiceCodecAsSlimService: a service read from protobuf by the service codec is what
// object.SlimService makes of the same service decoded in full, with and without topology: the two ways
// in end in one model.
func TestServiceCodecAsSlimService(t *testing.T) {
	for _, topology := range []bool{false, true} {
		transform := object.SlimService
		if topology {
			transform = object.SlimServiceWithTopology
		}
		list := &api.ServiceList{ListMeta: meta.ListMeta{ResourceVersion: "99", Continue: "next"}}
		for _, s := range codecServices() {
			list.Items = append(list.Items, *s)
		}
		t.Run(fmt.Sprintf("topology %v", topology), func(t *testing.T) {
			codecAsTransform[*api.Service, object.StoredService](t, NewServiceCodec(topology, scheme.Codecs.UniversalDeserializer()), asAPIServer,
				"Service", codecServices(), list, func(s *api.Service) any { stored, _ := transform(s.DeepCopy()); return stored })
		})
	}
	// The comparison compared something: the first service has every part of a model.
	s, _ := object.SlimServiceWithTopology(codecServices()[0])
	if st := s.(*object.StoredService); st.Model == nil || len(st.Model.ClusterIPs) != 2 || len(st.Model.Ports) != 2 || st.Model.Outside == nil ||
		len(st.Model.Outside.External) != 3 || !st.Model.Selector || st.Model.Created == 0 || len(st.Problems()) == 0 {
		t.Fatalf("the full service's stored form is missing parts: %+v, model %+v", st, st.Model)
	}
}

// TestServiceCodecBookmarks: a bookmark, a service with nothing but its version, keeps the version
// the reflector watches from (it is never stored).
func TestServiceCodecBookmarks(t *testing.T) {
	codec := NewServiceCodec(false, scheme.Codecs.UniversalDeserializer())
	bookmark := &api.Service{ObjectMeta: meta.ObjectMeta{ResourceVersion: "12345"}}
	got, _, err := codec.Decode(asAPIServer(t, bookmark), nil, nil)
	if err != nil || got.(*object.StoredService).ResourceVersion != "12345" {
		t.Fatalf("bookmark: %+v, %v", got, err)
	}
}

// FuzzServiceCodec: whatever bytes arrive, the codec returns an error or a service, never panics,
// and what it keeps is as the model promises: DNS-label names, valid cluster IPs, named ports.
func FuzzServiceCodec(f *testing.F) {
	for _, s := range codecServices() {
		f.Add(asAPIServer(f, s))
	}
	f.Add([]byte("k8s\x00"))
	f.Add([]byte{})
	codec := NewServiceCodec(true, scheme.Codecs.UniversalDeserializer())
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := codec.Decode(data, nil, nil)
		if err != nil {
			return
		}
		stored := decodedItems[object.StoredService](t, obj)
		for _, s := range stored {
			if s.Model == nil {
				continue
			}
			if !isDNSLabel(s.Model.Name) || !isDNSLabel(s.Model.Namespace) {
				t.Fatalf("a bad name kept: %q/%q", s.Model.Namespace, s.Model.Name)
			}
			for _, ip := range s.Model.ClusterIPs {
				if !ip.IsValid() || ip.Is4In6() {
					t.Fatalf("a bad cluster IP kept: %v", ip)
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

// BenchmarkServiceDecode decodes one ClusterIP service from protobuf in full, as client-go does,
// and slim.
func BenchmarkServiceDecode(b *testing.B) {
	data := asAPIServer(b, codecServices()[1]) // a ClusterIP service with one port, as most are
	codec := NewServiceCodec(false, scheme.Codecs.UniversalDeserializer())
	full := scheme.Codecs.UniversalDeserializer()
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj, _, _ := full.Decode(data, nil, nil)
			object.SlimService(obj)
		}
	})
	b.Run("slim", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			codec.Decode(data, nil, nil)
		}
	})
}
