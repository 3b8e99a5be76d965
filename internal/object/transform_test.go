package object

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
)

func TestSlimService(t *testing.T) {
	created := time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC)
	full := &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "web", ResourceVersion: "7", UID: "u", CreationTimestamp: meta.NewTime(created),
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"},
			ManagedFields: []meta.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: api.ServiceSpec{
			Type: api.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1", "fd00::1"},
			Selector: map[string]string{"app": "web"}, SessionAffinity: api.ServiceAffinityClientIP,
			Ports: []api.ServicePort{{Name: "http", Protocol: api.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}},
		},
		Status: api.ServiceStatus{LoadBalancer: api.LoadBalancerStatus{Ingress: []api.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
	want := &StoredService{
		Meta: Meta{Namespace: "prod", Name: "web", ResourceVersion: "7"},
		Model: &Service{Namespace: "prod", Name: "web", Kind: ClusterIP, Selector: true, Created: created.UnixNano(), ClusterIPs: addrs("10.0.0.1", "fd00::1"),
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}, Outside: &Outside{External: []ExternalAddr{{Addr: netip.MustParseAddr("1.2.3.4")}}}},
	}
	got, err := SlimService(full)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("SlimService:\n got %+v, %v\nwant %+v", got, err, want)
	}
	if again, _ := SlimService(got); again != got {
		t.Errorf("SlimService is not idempotent: %+v", again)
	}
	if key := KeyOf(got); key != "prod/web" {
		t.Errorf("store key of a stored service: %q", key)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "prod/web", Obj: full}
	if got, _ := SlimService(tomb); !reflect.DeepEqual(got, tomb) {
		t.Errorf("SlimService changed a tombstone: %+v", got)
	}
}

func TestSlimSlice(t *testing.T) {
	yes, no := true, false
	host, node, zoneName := "db-0", "node-1", "a"
	name, number, proto := "pg", int32(5432), api.ProtocolTCP
	full := &discovery.EndpointSlice{
		ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "db-x", ResourceVersion: "9",
			Labels:      map[string]string{discovery.LabelServiceName: "db", discovery.LabelManagedBy: "endpointslice-controller.k8s.io"},
			Annotations: map[string]string{"a": "b"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Hostname: &host, NodeName: &node, Zone: &zoneName,
				Conditions: discovery.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
				TargetRef:  &api.ObjectReference{Kind: "Pod", Namespace: "prod", Name: "db-0", UID: "u"},
				Hints:      &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "a"}}}},
			{Addresses: []string{"10.0.0.2"}, TargetRef: &api.ObjectReference{Kind: "Node", Name: "n"}},
			{Addresses: []string{"10.0.0.3"}, Conditions: discovery.EndpointConditions{Ready: &no}},
		},
		Ports: []discovery.EndpointPort{{Name: &name, Port: &number, Protocol: &proto}},
	}
	want := &StoredSlice{
		Meta:    Meta{Namespace: "prod", Name: "db-x", ResourceVersion: "9"},
		Service: "db",
		Model: NewEndpointSlice([]Port{{Name: "pg", Protocol: "tcp", Port: 5432}}, []Endpoint{
			{Addr: netip.MustParseAddr("10.0.0.1"), Hostname: "db-0"},
			{Addr: netip.MustParseAddr("10.0.0.2")},
		}),
	}
	got, err := SliceTransform(SliceOptions{})(full)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("slice transform:\n got %+v, %v\nwant %+v", got, err, want)
	}
	if key := got.(*StoredSlice).ServiceKey(); key != "prod/db" {
		t.Errorf("owner of a stored slice: %q", key)
	}
	delete(full.Labels, discovery.LabelServiceName)
	if got, _ := SliceTransform(SliceOptions{})(full); got.(*StoredSlice).ServiceKey() != "" {
		t.Errorf("a slice without a service label has owner %q", got.(*StoredSlice).ServiceKey())
	}
	full.AddressType = discovery.AddressTypeFQDN
	if got, _ := SliceTransform(SliceOptions{})(full); got.(*StoredSlice).Model != nil {
		t.Errorf("an FQDN slice is served: %+v", got.(*StoredSlice).Model)
	}
}

func TestSlimNamespace(t *testing.T) {
	full := &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: "prod", ResourceVersion: "3", Labels: map[string]string{"team": "a"}},
		Status: api.NamespaceStatus{Phase: api.NamespaceTerminating}}
	want := &StoredNamespace{Meta{Name: "prod", ResourceVersion: "3"}}
	if got, err := SlimNamespace(full); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("SlimNamespace: got %+v, %v, want %+v", got, err, want)
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		s             string
		label, hostOK bool
		ip            bool
		description   string
	}{
		{s: "web", label: true, hostOK: true},
		{s: "web-1", label: true, hostOK: true},
		{s: "1", label: true, hostOK: true},
		{s: "-web", description: "leading hyphen"},
		{s: "web-", description: "trailing hyphen"},
		{s: "Web", description: "upper case (callers fold first)"},
		{s: "", description: "empty"},
		{s: strings.Repeat("a", 63), label: true, hostOK: true},
		{s: strings.Repeat("a", 64), description: "64 characters"},
		{s: "a.b", hostOK: true},
		{s: "_srv._tcp.example.com", hostOK: true},
		{s: "a..b", description: "empty label"},
		{s: strings.Repeat("a.", 125) + "abc", hostOK: true},
		{s: strings.Repeat("a.", 126) + "ab", description: "254 characters"},
		{s: "10.0.0.1", hostOK: true, ip: true},
	} {
		if got := isLabel(tc.s); got != tc.label {
			t.Errorf("isLabel(%q) = %v, want %v %s", tc.s, got, tc.label, tc.description)
		}
		if got := isHostname(tc.s); got != tc.hostOK {
			t.Errorf("isHostname(%q) = %v, want %v %s", tc.s, got, tc.hostOK, tc.description)
		}
		if _, got := ParseIP(tc.s); got != tc.ip {
			t.Errorf("ParseIP(%q) ok = %v, want %v", tc.s, got, tc.ip)
		}
	}
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"10.0.0.1", true}, {"fd00::1", true}, {"::ffff:10.0.0.1", false}, {"0.0.0.0", false}, {"::", false},
		{"fe80::1%eth0", false}, {"10.0.0.256", false}, {" 10.0.0.1", false}, {"", false},
	} {
		if _, ok := ParseIP(tc.text); ok != tc.ok {
			t.Errorf("ParseIP(%q) ok = %v, want %v", tc.text, ok, tc.ok)
		}
	}
}
