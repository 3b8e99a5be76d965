package object

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"

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

func addrs(texts ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(texts))
	for _, s := range texts {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestAssemble(t *testing.T) {
	ports := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	v4 := func(eps ...k8stest.Endpoint) *discovery.EndpointSlice {
		s := k8stest.Slice("prod", "web", "web-4", discovery.AddressTypeIPv4, ports, eps...)
		s.ResourceVersion = "11"
		return s
	}
	v6 := func(eps ...k8stest.Endpoint) *discovery.EndpointSlice {
		s := k8stest.Slice("prod", "web", "web-6", discovery.AddressTypeIPv6, nil, eps...)
		s.ResourceVersion = "12"
		return s
	}
	svc := func(s *api.Service) *api.Service { s.ResourceVersion = "10"; return s }
	httpPort := []Port{{Name: "http", Protocol: "tcp", Port: 80}}

	for _, tc := range []struct {
		name     string
		svc      *api.Service
		slices   []*discovery.EndpointSlice
		podNames bool
		want     *Service
		problems []string // "object@version", one per problem
	}{
		{
			name: "dual stack cluster IP",
			svc:  svc(k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1", "fd00::1"}, k8stest.TCP("http", 80), api.ServicePort{Port: 81})),
			want: &Service{Namespace: "prod", Name: "web", Kind: ClusterIP, ClusterIPs: addrs("10.0.0.1", "fd00::1"), Ports: httpPort},
		},
		{
			name: "external IPs, then load balancer ingress IPs and hostnames",
			svc: svc(func() *api.Service {
				s := k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}, k8stest.TCP("http", 80))
				s.Spec.ExternalIPs = []string{"192.0.2.1", "2001:db8::1", "not-an-ip", "192.0.2.1"}
				s.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{IP: "198.51.100.1"}, {Hostname: "LB.Example.com."},
					{IP: "2001:db8::2", Hostname: "ignored.example.com"}, {}, {Hostname: "bad_host!"}, {IP: "::ffff:1.2.3.4"}}
				return s
			}()),
			want: &Service{Namespace: "prod", Name: "web", Kind: ClusterIP, ClusterIPs: addrs("10.0.0.1"), Ports: httpPort,
				Outside: &Outside{External: []ExternalAddr{{Addr: netip.MustParseAddr("192.0.2.1")}, {Addr: netip.MustParseAddr("2001:db8::1")},
					{Addr: netip.MustParseAddr("192.0.2.1")}, {Addr: netip.MustParseAddr("198.51.100.1")}, {Host: "lb.example.com."},
					{Addr: netip.MustParseAddr("2001:db8::2")}}}},
			problems: slices.Repeat([]string{"service prod/web@10"}, 3),
		},
		{
			name: "cluster IP only in the singular field",
			svc: svc(&api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "web"},
				Spec: api.ServiceSpec{ClusterIP: "10.0.0.1"}}),
			want: &Service{Namespace: "prod", Name: "web", Kind: ClusterIP, ClusterIPs: addrs("10.0.0.1")},
		},
		{
			name:     "bad cluster IPs",
			svc:      svc(k8stest.ClusterIPService("prod", "web", []string{"10.0.0.300", "::ffff:10.0.0.1", "0.0.0.0", "fd00::1"})),
			want:     &Service{Namespace: "prod", Name: "web", Kind: ClusterIP, ClusterIPs: addrs("fd00::1")},
			problems: []string{"service prod/web@10", "service prod/web@10", "service prod/web@10"},
		},
		{
			name: "bad ports",
			svc: svc(k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}, k8stest.TCP("http", 80), k8stest.TCP("HTTP", 81), k8stest.TCP("8080", 8080),
				k8stest.TCP("-x", 82), k8stest.TCP(strings.Repeat("p", 63), 83), k8stest.TCP("zero", 0), api.ServicePort{Name: "quic", Protocol: "QUIC", Port: 84},
				api.ServicePort{Name: "s", Protocol: api.ProtocolSCTP, Port: 85}, k8stest.UDP("a1", 86))),
			want: &Service{Namespace: "prod", Name: "web", Kind: ClusterIP, ClusterIPs: addrs("10.0.0.1"),
				Ports: []Port{{"http", "tcp", 80}, {"8080", "tcp", 8080}, {"s", "sctp", 85}, {"a1", "udp", 86}}},
			problems: slices.Repeat([]string{"service prod/web@10"}, 5),
		},
		{
			name: "headless with endpoints",
			svc:  svc(k8stest.HeadlessService("prod", "web")),
			slices: []*discovery.EndpointSlice{
				v4(k8stest.Endpoint{Addrs: []string{"10.0.1.1"}, Hostname: "Db-0"}, k8stest.Endpoint{Addrs: []string{"10.0.1.2"}, NotReady: true},
					k8stest.Endpoint{Addrs: []string{"10.0.1.3"}, Unknown: true}, k8stest.Endpoint{Addrs: []string{"10.0.1.4"}, Pod: "p"}),
				v6(k8stest.Endpoint{Addrs: []string{"fd00::2"}, Hostname: "db-0"}),
				{ObjectMeta: meta.ObjectMeta{Name: "fqdn"}, AddressType: discovery.AddressTypeFQDN,
					Endpoints: []discovery.Endpoint{{Addresses: []string{"example.com"}}}},
			},
			want: &Service{Namespace: "prod", Name: "web", Kind: Headless, Slices: []*EndpointSlice{
				NewEndpointSlice(httpPort, []Endpoint{{Addr: netip.MustParseAddr("10.0.1.1"), Hostname: "db-0"},
					{Addr: netip.MustParseAddr("10.0.1.3")}, {Addr: netip.MustParseAddr("10.0.1.4")}}),
				NewEndpointSlice(nil, []Endpoint{{Addr: netip.MustParseAddr("fd00::2"), Hostname: "db-0"}}),
			}},
		},
		{
			name:     "endpoint pod names",
			svc:      svc(k8stest.HeadlessService("prod", "web")),
			slices:   []*discovery.EndpointSlice{v4(k8stest.Endpoint{Addrs: []string{"10.0.1.1"}, Pod: "web-0"}, k8stest.Endpoint{Addrs: []string{"10.0.1.2"}, Pod: "web.1"}, k8stest.Endpoint{Addrs: []string{"10.0.1.3"}, Pod: "web-2", Hostname: "h"})},
			podNames: true,
			want: &Service{Namespace: "prod", Name: "web", Kind: Headless, Slices: []*EndpointSlice{
				NewEndpointSlice(httpPort, []Endpoint{{Addr: netip.MustParseAddr("10.0.1.1"), Hostname: "web-0"}, {Addr: netip.MustParseAddr("10.0.1.2")},
					{Addr: netip.MustParseAddr("10.0.1.3"), Hostname: "h"}}),
			}},
		},
		{
			name: "bad endpoints",
			svc:  svc(k8stest.HeadlessService("prod", "web")),
			slices: []*discovery.EndpointSlice{
				v4(k8stest.Endpoint{Addrs: []string{"10.0.1.1"}, Hostname: "bad_name"}, k8stest.Endpoint{Addrs: []string{"10.0.1.2"}, Hostname: strings.Repeat("h", 64)},
					k8stest.Endpoint{Addrs: []string{"fd00::1", "10.0.1.3"}, Hostname: "mixed"}, k8stest.Endpoint{Addrs: []string{"nope"}}),
				v6(k8stest.Endpoint{Addrs: []string{"::ffff:10.0.1.4"}}, k8stest.Endpoint{Addrs: []string{"fe80::1%eth0"}}, k8stest.Endpoint{Addrs: []string{"::"}}, k8stest.Endpoint{Addrs: []string{"fd00::5"}}),
			},
			want: &Service{Namespace: "prod", Name: "web", Kind: Headless, Slices: []*EndpointSlice{
				NewEndpointSlice(httpPort, []Endpoint{{Addr: netip.MustParseAddr("10.0.1.1")}, {Addr: netip.MustParseAddr("10.0.1.2")},
					{Addr: netip.MustParseAddr("10.0.1.3"), Hostname: "mixed"}}),
				NewEndpointSlice(nil, []Endpoint{{Addr: netip.MustParseAddr("fd00::5")}}),
			}},
			problems: append(slices.Repeat([]string{"endpointslice prod/web-4@11"}, 4), slices.Repeat([]string{"endpointslice prod/web-6@12"}, 3)...),
		},
		{
			name:   "bad slice port",
			svc:    svc(k8stest.HeadlessService("prod", "web")),
			slices: []*discovery.EndpointSlice{withPorts(v4(k8stest.Endpoint{Addrs: []string{"10.0.1.1"}}), k8stest.SlicePort("Web", api.ProtocolTCP, 80), k8stest.SlicePort("ok", api.ProtocolUDP, 53), discovery.EndpointPort{})},
			want: &Service{Namespace: "prod", Name: "web", Kind: Headless, Slices: []*EndpointSlice{
				NewEndpointSlice([]Port{{"ok", "udp", 53}}, []Endpoint{{Addr: netip.MustParseAddr("10.0.1.1")}}),
			}},
			problems: []string{"endpointslice prod/web-4@11"},
		},
		{
			name:   "ExternalName ignores slices",
			svc:    svc(k8stest.ExternalNameService("prod", "web", "Example.COM.")),
			slices: []*discovery.EndpointSlice{v4(k8stest.Endpoint{Addrs: []string{"10.0.1.1"}})},
			want:   &Service{Namespace: "prod", Name: "web", Kind: ExternalName, Outside: &Outside{ExternalName: "example.com."}},
		},
		{
			name: "ExternalName with underscore",
			svc:  svc(k8stest.ExternalNameService("prod", "web", "_sip._tcp.example.com")),
			want: &Service{Namespace: "prod", Name: "web", Kind: ExternalName, Outside: &Outside{ExternalName: "_sip._tcp.example.com."}},
		},
		{name: "ExternalName IPv4", svc: svc(k8stest.ExternalNameService("prod", "web", "10.0.0.1")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName IPv6", svc: svc(k8stest.ExternalNameService("prod", "web", "fd00::1")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName empty", svc: svc(k8stest.ExternalNameService("prod", "web", "")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName root", svc: svc(k8stest.ExternalNameService("prod", "web", ".")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName two dots", svc: svc(k8stest.ExternalNameService("prod", "web", "example.com..")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName too long", svc: svc(k8stest.ExternalNameService("prod", "web", strings.Repeat("a.", 127)+"com")), problems: []string{"service prod/web@10"}},
		{name: "service name not a label", svc: svc(k8stest.ClusterIPService("prod", "web_1", []string{"10.0.0.1"})), problems: []string{"service prod/web_1@10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := modelOf(t, tc.svc, tc.slices, tc.podNames)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("model:\n got %+v\nwant %+v", got, tc.want)
			}
			var objs []string
			for _, p := range problems {
				objs = append(objs, p.Object+"@"+p.Version)
				if p.Text == "" {
					t.Errorf("problem without text: %+v", p)
				}
			}
			if !slices.Equal(objs, tc.problems) {
				t.Errorf("problems: got %q, want %q\n%+v", objs, tc.problems, problems)
			}
		})
	}
}

func withPorts(s *discovery.EndpointSlice, ports ...discovery.EndpointPort) *discovery.EndpointSlice {
	s.Ports = ports
	return s
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
