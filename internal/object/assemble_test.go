package object

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
