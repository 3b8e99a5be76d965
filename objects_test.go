package kubetree

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
)

func TestSlimService(t *testing.T) {
	full := &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "web", ResourceVersion: "7", UID: "u",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"},
			ManagedFields: []meta.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: api.ServiceSpec{
			Type: api.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1", "fd00::1"},
			Selector: map[string]string{"app": "web"}, SessionAffinity: api.ServiceAffinityClientIP,
			Ports: []api.ServicePort{{Name: "http", Protocol: api.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}},
		},
		Status: api.ServiceStatus{LoadBalancer: api.LoadBalancerStatus{Ingress: []api.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
	want := &storedService{
		storedMeta: storedMeta{Namespace: "prod", Name: "web", ResourceVersion: "7"},
		model: &service{Namespace: "prod", Name: "web", Kind: clusterIP, ClusterIPs: addrs("10.0.0.1", "fd00::1"),
			Ports: []port{{Name: "http", Protocol: "tcp", Port: 80}}, Outside: &outside{External: []externalAddr{{Addr: netip.MustParseAddr("1.2.3.4")}}}},
	}
	got, err := slimService(full)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("slimService:\n got %+v, %v\nwant %+v", got, err, want)
	}
	if again, _ := slimService(got); again != got {
		t.Errorf("slimService is not idempotent: %+v", again)
	}
	if key := keyOf(got); key != "prod/web" {
		t.Errorf("store key of a stored service: %q", key)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "prod/web", Obj: full}
	if got, _ := slimService(tomb); !reflect.DeepEqual(got, tomb) {
		t.Errorf("slimService changed a tombstone: %+v", got)
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
	want := &storedSlice{
		storedMeta: storedMeta{Namespace: "prod", Name: "db-x", ResourceVersion: "9"},
		service:    "db",
		model: newEndpointSlice([]port{{Name: "pg", Protocol: "tcp", Port: 5432}}, []endpoint{
			{Addr: netip.MustParseAddr("10.0.0.1"), Hostname: "db-0"},
			{Addr: netip.MustParseAddr("10.0.0.2")},
		}),
	}
	got, err := sliceTransform(sliceOptions{})(full)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("slice transform:\n got %+v, %v\nwant %+v", got, err, want)
	}
	if key := serviceOf(got.(*storedSlice)); key != "prod/db" {
		t.Errorf("owner of a stored slice: %q", key)
	}
	delete(full.Labels, discovery.LabelServiceName)
	if got, _ := sliceTransform(sliceOptions{})(full); serviceOf(got.(*storedSlice)) != "" {
		t.Errorf("a slice without a service label has owner %q", serviceOf(got.(*storedSlice)))
	}
	full.AddressType = discovery.AddressTypeFQDN
	if got, _ := sliceTransform(sliceOptions{})(full); got.(*storedSlice).model != nil {
		t.Errorf("an FQDN slice is served: %+v", got.(*storedSlice).model)
	}
}

func TestSlimNamespace(t *testing.T) {
	full := &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: "prod", ResourceVersion: "3", Labels: map[string]string{"team": "a"}},
		Status: api.NamespaceStatus{Phase: api.NamespaceTerminating}}
	want := &storedNamespace{storedMeta{Name: "prod", ResourceVersion: "3"}}
	if got, err := slimNamespace(full); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("slimNamespace: got %+v, %v, want %+v", got, err, want)
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
	ports := slicePorts(slicePort("http", api.ProtocolTCP, 80))
	v4 := func(eps ...ep) *discovery.EndpointSlice {
		s := slice("prod", "web", "web-4", discovery.AddressTypeIPv4, ports, eps...)
		s.ResourceVersion = "11"
		return s
	}
	v6 := func(eps ...ep) *discovery.EndpointSlice {
		s := slice("prod", "web", "web-6", discovery.AddressTypeIPv6, nil, eps...)
		s.ResourceVersion = "12"
		return s
	}
	svc := func(s *api.Service) *api.Service { s.ResourceVersion = "10"; return s }
	httpPort := []port{{Name: "http", Protocol: "tcp", Port: 80}}

	for _, tc := range []struct {
		name     string
		svc      *api.Service
		slices   []*discovery.EndpointSlice
		podNames bool
		want     *service
		problems []string // "object@version", one per problem
	}{
		{
			name: "dual stack cluster IP",
			svc:  svc(clusterIPService("prod", "web", []string{"10.0.0.1", "fd00::1"}, tcp("http", 80), api.ServicePort{Port: 81})),
			want: &service{Namespace: "prod", Name: "web", Kind: clusterIP, ClusterIPs: addrs("10.0.0.1", "fd00::1"), Ports: httpPort},
		},
		{
			name: "external IPs, then load balancer ingress IPs and hostnames",
			svc: svc(func() *api.Service {
				s := clusterIPService("prod", "web", []string{"10.0.0.1"}, tcp("http", 80))
				s.Spec.ExternalIPs = []string{"192.0.2.1", "2001:db8::1", "not-an-ip", "192.0.2.1"}
				s.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{IP: "198.51.100.1"}, {Hostname: "LB.Example.com."},
					{IP: "2001:db8::2", Hostname: "ignored.example.com"}, {}, {Hostname: "bad_host!"}, {IP: "::ffff:1.2.3.4"}}
				return s
			}()),
			want: &service{Namespace: "prod", Name: "web", Kind: clusterIP, ClusterIPs: addrs("10.0.0.1"), Ports: httpPort,
				Outside: &outside{External: []externalAddr{{Addr: netip.MustParseAddr("192.0.2.1")}, {Addr: netip.MustParseAddr("2001:db8::1")},
					{Addr: netip.MustParseAddr("192.0.2.1")}, {Addr: netip.MustParseAddr("198.51.100.1")}, {Host: "lb.example.com."},
					{Addr: netip.MustParseAddr("2001:db8::2")}}}},
			problems: slices.Repeat([]string{"service prod/web@10"}, 3),
		},
		{
			name: "cluster IP only in the singular field",
			svc: svc(&api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "web"},
				Spec: api.ServiceSpec{ClusterIP: "10.0.0.1"}}),
			want: &service{Namespace: "prod", Name: "web", Kind: clusterIP, ClusterIPs: addrs("10.0.0.1")},
		},
		{
			name:     "bad cluster IPs",
			svc:      svc(clusterIPService("prod", "web", []string{"10.0.0.300", "::ffff:10.0.0.1", "0.0.0.0", "fd00::1"})),
			want:     &service{Namespace: "prod", Name: "web", Kind: clusterIP, ClusterIPs: addrs("fd00::1")},
			problems: []string{"service prod/web@10", "service prod/web@10", "service prod/web@10"},
		},
		{
			name: "bad ports",
			svc: svc(clusterIPService("prod", "web", []string{"10.0.0.1"}, tcp("http", 80), tcp("HTTP", 81), tcp("8080", 8080),
				tcp("-x", 82), tcp(strings.Repeat("p", 63), 83), tcp("zero", 0), api.ServicePort{Name: "quic", Protocol: "QUIC", Port: 84},
				api.ServicePort{Name: "s", Protocol: api.ProtocolSCTP, Port: 85}, udp("a1", 86))),
			want: &service{Namespace: "prod", Name: "web", Kind: clusterIP, ClusterIPs: addrs("10.0.0.1"),
				Ports: []port{{"http", "tcp", 80}, {"s", "sctp", 85}, {"a1", "udp", 86}}},
			problems: slices.Repeat([]string{"service prod/web@10"}, 6),
		},
		{
			name: "headless with endpoints",
			svc:  svc(headlessService("prod", "web")),
			slices: []*discovery.EndpointSlice{
				v4(ep{addrs: []string{"10.0.1.1"}, hostname: "Db-0"}, ep{addrs: []string{"10.0.1.2"}, notReady: true},
					ep{addrs: []string{"10.0.1.3"}, unknown: true}, ep{addrs: []string{"10.0.1.4"}, pod: "p"}),
				v6(ep{addrs: []string{"fd00::2"}, hostname: "db-0"}),
				{ObjectMeta: meta.ObjectMeta{Name: "fqdn"}, AddressType: discovery.AddressTypeFQDN,
					Endpoints: []discovery.Endpoint{{Addresses: []string{"example.com"}}}},
			},
			want: &service{Namespace: "prod", Name: "web", Kind: headless, Slices: []*endpointSlice{
				newEndpointSlice(httpPort, []endpoint{{Addr: netip.MustParseAddr("10.0.1.1"), Hostname: "db-0"},
					{Addr: netip.MustParseAddr("10.0.1.3")}, {Addr: netip.MustParseAddr("10.0.1.4")}}),
				newEndpointSlice(nil, []endpoint{{Addr: netip.MustParseAddr("fd00::2"), Hostname: "db-0"}}),
			}},
		},
		{
			name:     "endpoint pod names",
			svc:      svc(headlessService("prod", "web")),
			slices:   []*discovery.EndpointSlice{v4(ep{addrs: []string{"10.0.1.1"}, pod: "web-0"}, ep{addrs: []string{"10.0.1.2"}, pod: "web.1"}, ep{addrs: []string{"10.0.1.3"}, pod: "web-2", hostname: "h"})},
			podNames: true,
			want: &service{Namespace: "prod", Name: "web", Kind: headless, Slices: []*endpointSlice{
				newEndpointSlice(httpPort, []endpoint{{Addr: netip.MustParseAddr("10.0.1.1"), Hostname: "web-0"}, {Addr: netip.MustParseAddr("10.0.1.2")},
					{Addr: netip.MustParseAddr("10.0.1.3"), Hostname: "h"}}),
			}},
		},
		{
			name: "bad endpoints",
			svc:  svc(headlessService("prod", "web")),
			slices: []*discovery.EndpointSlice{
				v4(ep{addrs: []string{"10.0.1.1"}, hostname: "bad_name"}, ep{addrs: []string{"10.0.1.2"}, hostname: strings.Repeat("h", 64)},
					ep{addrs: []string{"fd00::1", "10.0.1.3"}, hostname: "mixed"}, ep{addrs: []string{"nope"}}),
				v6(ep{addrs: []string{"::ffff:10.0.1.4"}}, ep{addrs: []string{"fe80::1%eth0"}}, ep{addrs: []string{"::"}}, ep{addrs: []string{"fd00::5"}}),
			},
			want: &service{Namespace: "prod", Name: "web", Kind: headless, Slices: []*endpointSlice{
				newEndpointSlice(httpPort, []endpoint{{Addr: netip.MustParseAddr("10.0.1.1")}, {Addr: netip.MustParseAddr("10.0.1.2")},
					{Addr: netip.MustParseAddr("10.0.1.3"), Hostname: "mixed"}}),
				newEndpointSlice(nil, []endpoint{{Addr: netip.MustParseAddr("fd00::5")}}),
			}},
			problems: append(slices.Repeat([]string{"endpointslice prod/web-4@11"}, 4), slices.Repeat([]string{"endpointslice prod/web-6@12"}, 3)...),
		},
		{
			name:   "bad slice port",
			svc:    svc(headlessService("prod", "web")),
			slices: []*discovery.EndpointSlice{withPorts(v4(ep{addrs: []string{"10.0.1.1"}}), slicePort("Web", api.ProtocolTCP, 80), slicePort("ok", api.ProtocolUDP, 53), discovery.EndpointPort{})},
			want: &service{Namespace: "prod", Name: "web", Kind: headless, Slices: []*endpointSlice{
				newEndpointSlice([]port{{"ok", "udp", 53}}, []endpoint{{Addr: netip.MustParseAddr("10.0.1.1")}}),
			}},
			problems: []string{"endpointslice prod/web-4@11"},
		},
		{
			name:   "ExternalName ignores slices",
			svc:    svc(externalNameService("prod", "web", "Example.COM.")),
			slices: []*discovery.EndpointSlice{v4(ep{addrs: []string{"10.0.1.1"}})},
			want:   &service{Namespace: "prod", Name: "web", Kind: externalName, Outside: &outside{ExternalName: "example.com."}},
		},
		{
			name: "ExternalName with underscore",
			svc:  svc(externalNameService("prod", "web", "_sip._tcp.example.com")),
			want: &service{Namespace: "prod", Name: "web", Kind: externalName, Outside: &outside{ExternalName: "_sip._tcp.example.com."}},
		},
		{name: "ExternalName IPv4", svc: svc(externalNameService("prod", "web", "10.0.0.1")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName IPv6", svc: svc(externalNameService("prod", "web", "fd00::1")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName empty", svc: svc(externalNameService("prod", "web", "")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName root", svc: svc(externalNameService("prod", "web", ".")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName two dots", svc: svc(externalNameService("prod", "web", "example.com..")), problems: []string{"service prod/web@10"}},
		{name: "ExternalName too long", svc: svc(externalNameService("prod", "web", strings.Repeat("a.", 127)+"com")), problems: []string{"service prod/web@10"}},
		{name: "service name not a label", svc: svc(clusterIPService("prod", "web_1", []string{"10.0.0.1"})), problems: []string{"service prod/web_1@10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := modelOf(t, tc.svc, tc.slices, tc.podNames)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("model:\n got %+v\nwant %+v", got, tc.want)
			}
			var objs []string
			for _, p := range problems {
				objs = append(objs, p.object+"@"+p.version)
				if p.text == "" {
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

func TestChanged(t *testing.T) {
	slim := func(o any) any {
		var out any
		switch v := o.(type) {
		case *api.Service:
			out, _ = slimService(v)
		case *discovery.EndpointSlice:
			out, _ = sliceTransform(sliceOptions{})(v)
		}
		return out
	}
	base := func() *api.Service {
		s := clusterIPService("prod", "web", []string{"10.0.0.1"}, tcp("http", 80))
		s.ResourceVersion = "1"
		return s
	}
	for _, tc := range []struct {
		name   string
		change func(*api.Service)
		want   bool
	}{
		{"nothing but the version", func(*api.Service) {}, false},
		{"labels", func(s *api.Service) { s.Labels = map[string]string{"a": "b"} }, false},
		{"target port", func(s *api.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("web") }, false},
		{"status conditions", func(s *api.Service) { s.Status.Conditions = []meta.Condition{{Type: "Ready"}} }, false},
		// kubetree_external serves the load balancer's ingress and the external IPs.
		{"load balancer ingress", func(s *api.Service) { s.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{IP: "1.2.3.4"}} }, true},
		{"load balancer hostname", func(s *api.Service) {
			s.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{Hostname: "lb.example.com"}}
		}, true},
		{"external IPs", func(s *api.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} }, true},
		{"port", func(s *api.Service) { s.Spec.Ports[0].Port = 81 }, true},
		{"port name", func(s *api.Service) { s.Spec.Ports[0].Name = "web" }, true},
		{"protocol", func(s *api.Service) { s.Spec.Ports[0].Protocol = api.ProtocolUDP }, true},
		{"second cluster IP", func(s *api.Service) { s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::1") }, true},
		{"type", func(s *api.Service) { s.Spec.Type = api.ServiceTypeExternalName }, true},
		// Only an ExternalName service is answered from its external name.
		{"external name of a ClusterIP service", func(s *api.Service) { s.Spec.ExternalName = "example.com" }, false},
	} {
		t.Run("service "+tc.name, func(t *testing.T) {
			b := base()
			b.ResourceVersion = "2"
			tc.change(b)
			if got := serviceChanged(slim(base()), slim(b)); got != tc.want {
				t.Errorf("serviceChanged = %v, want %v", got, tc.want)
			}
		})
	}

	sliceBase := func() *discovery.EndpointSlice {
		s := slice("prod", "web", "web-1", discovery.AddressTypeIPv4, slicePorts(slicePort("http", api.ProtocolTCP, 80)),
			ep{addrs: []string{"10.0.0.1"}, hostname: "h", pod: "p"})
		s.ResourceVersion = "1"
		return s
	}
	for _, tc := range []struct {
		name   string
		change func(*discovery.EndpointSlice)
		want   bool
	}{
		{"nothing but the version", func(*discovery.EndpointSlice) {}, false},
		{"other labels", func(s *discovery.EndpointSlice) { s.Labels["x"] = "y" }, false},
		{"topology", func(s *discovery.EndpointSlice) { n := "node"; s.Endpoints[0].NodeName = &n }, false},
		{"serving", func(s *discovery.EndpointSlice) { y := true; s.Endpoints[0].Conditions.Serving = &y }, false},
		{"service", func(s *discovery.EndpointSlice) { s.Labels[discovery.LabelServiceName] = "other" }, true},
		{"address", func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses = []string{"10.0.0.2"} }, true},
		{"ready", func(s *discovery.EndpointSlice) { n := false; s.Endpoints[0].Conditions.Ready = &n }, true},
		{"hostname", func(s *discovery.EndpointSlice) { h := "g"; s.Endpoints[0].Hostname = &h }, true},
		// The endpoint has a hostname, which names it whatever its pod is called.
		{"pod of an endpoint with a hostname", func(s *discovery.EndpointSlice) { s.Endpoints[0].TargetRef.Name = "q" }, false},
		{"endpoint added", func(s *discovery.EndpointSlice) { s.Endpoints = append(s.Endpoints, s.Endpoints[0]) }, true},
		{"port", func(s *discovery.EndpointSlice) { p := int32(81); s.Ports[0].Port = &p }, true},
		{"address type", func(s *discovery.EndpointSlice) { s.AddressType = discovery.AddressTypeIPv6 }, true},
	} {
		t.Run("slice "+tc.name, func(t *testing.T) {
			b := sliceBase()
			b.ResourceVersion = "2"
			tc.change(b)
			if got := sliceChanged(slim(sliceBase()), slim(b)); got != tc.want {
				t.Errorf("sliceChanged = %v, want %v", got, tc.want)
			}
		})
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "prod/web"}
	if !serviceChanged(tomb, slim(base())) || !sliceChanged(tomb, slim(sliceBase())) {
		t.Error("an update involving something other than the object itself must count as a change")
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
		if _, got := parseIP(tc.s); got != tc.ip {
			t.Errorf("parseIP(%q) ok = %v, want %v", tc.s, got, tc.ip)
		}
	}
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"10.0.0.1", true}, {"fd00::1", true}, {"::ffff:10.0.0.1", false}, {"0.0.0.0", false}, {"::", false},
		{"fe80::1%eth0", false}, {"10.0.0.256", false}, {" 10.0.0.1", false}, {"", false},
	} {
		if _, ok := parseIP(tc.text); ok != tc.ok {
			t.Errorf("parseIP(%q) ok = %v, want %v", tc.text, ok, tc.ok)
		}
	}
}
