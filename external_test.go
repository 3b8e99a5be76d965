package kubetree_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/plugin/transfer"

	"github.com/kubetree/kubetree/external"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// externalObjects is a cluster with every kind of external address k8s_external serves: load
// balancer ingress IPs of both families beside spec.externalIPs, a load balancer hostname, a
// ClusterIP service without any (whose endpoints are named with headless), and a headless
// service over two slices, one per family, with a hostname in both.
func externalObjects() []runtime.Object {
	lb := k8stest.ClusterIPService("prod", "lb", []string{"10.96.0.20"}, k8stest.TCP("http", 80), k8stest.UDP("dns", 53))
	lb.Spec.Type = api.ServiceTypeLoadBalancer
	lb.Spec.ExternalIPs = []string{"198.51.100.7"}
	lb.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{IP: "203.0.113.1"}, {IP: "2001:db8::1"}}
	elb := k8stest.ClusterIPService("prod", "elb", []string{"10.96.0.21"}, k8stest.TCP("http", 80))
	elb.Spec.Type = api.ServiceTypeLoadBalancer
	elb.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{Hostname: "lb.example.net"}}
	pg := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432))
	return []runtime.Object{
		k8stest.Namespace("prod"), k8stest.Namespace("empty"),
		lb, elb,
		k8stest.ClusterIPService("prod", "plain", []string{"10.96.0.22"}, k8stest.TCP("http", 80)),
		k8stest.Slice("prod", "plain", "plain-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
			k8stest.Endpoint{Addrs: []string{"10.244.1.1"}, Hostname: "p-0"}),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-v4", discovery.AddressTypeIPv4, pg,
			k8stest.Endpoint{Addrs: []string{"10.244.0.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.0.2"}}),
		k8stest.Slice("prod", "db", "db-v6", discovery.AddressTypeIPv6, pg, k8stest.Endpoint{Addrs: []string{"fd00::2"}, Hostname: "db-0"}),
	}
}

// external is a kubetree_external stanza's handler on c's kubetree, as its OnStartup wires it.
func externalFor(t *testing.T, c *plugintest.Cluster, stanza string) *external.External {
	t.Helper()
	e, err := external.Parse(caddy.NewTestController("dns", stanza))
	if err != nil {
		t.Fatalf("parse %q: %v", stanza, err)
	}
	e.Use(c.Kubetree, plugintest.StubUpstream{Answer: plugintest.UpstreamAnswer})
	return e
}

func runExternal(t *testing.T, e *external.External, cases []plugintest.Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Rule, func(t *testing.T) {
			plugintest.CheckHandler(t, e, func(next plugin.Handler) { e.Next = next }, tc)
		})
	}
}

// TestExternalUpstreamTruncated: a load balancer hostname's address, looked up through the rest
// of the chain, carries the upstream's TC bit to the client, as in k8s_external.
func TestExternalUpstreamTruncated(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local", externalObjects()...)
	e := externalFor(t, c, "kubetree_external example.org")
	const elb = "elb.prod.example.org."
	for _, truncated := range []bool{true, false} {
		e.Use(c.Kubetree, plugintest.StubUpstream{Answer: plugintest.UpstreamAnswer, Truncated: truncated})
		runExternal(t, e, []plugintest.Case{{Rule: fmt.Sprintf("upstream TC %v", truncated), Case: test.Case{Qname: elb, Qtype: dns.TypeA, Truncated: truncated,
			Answer: []dns.RR{test.CNAME(elb + " 5 IN CNAME lb.example.net."), test.A("lb.example.net. 30 IN A " + plugintest.UpstreamAnswer)}}}})
	}
}

func TestExternalNames(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local", externalObjects()...)
	c.Applier.PublishNameserver([]net.IP{net.ParseIP("192.0.2.53"), net.ParseIP("2001:db8::53")})
	e := externalFor(t, c, "kubetree_external example.org {\n ttl 7\n headless\n}")

	const (
		lb   = "lb.prod.example.org."
		elb  = "elb.prod.example.org."
		db   = "db.prod.example.org."
		db0  = "db-0.db.prod.example.org."
		db2  = "10-244-0-2.db.prod.example.org."
		zone = "example.org."
	)
	soa := test.SOA("example.org. 7 IN SOA ns1.dns.example.org. hostmaster.dns.example.org. 0 7200 1800 86400 7")
	lbAddrs := []dns.RR{test.A(lb + " 7 IN A 203.0.113.1"), test.A(lb + " 7 IN A 198.51.100.7"), test.AAAA(lb + " 7 IN AAAA 2001:db8::1")}
	cases := []plugintest.Case{
		{Rule: "load balancer ingress IPs and external IPs, A", Case: test.Case{Qname: lb, Qtype: dns.TypeA,
			Answer: lbAddrs[:2]}},
		{Rule: "dual stack: AAAA of the IPv6 ingress", Case: test.Case{Qname: lb, Qtype: dns.TypeAAAA, Answer: lbAddrs[2:]}},
		{Rule: "the query's case is kept", Case: test.Case{Qname: "LB.Prod.example.ORG.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("LB.Prod.example.ORG. 7 IN A 203.0.113.1"), test.A("LB.Prod.example.ORG. 7 IN A 198.51.100.7")}}},
		{Rule: "SRV at the service: every port, weight 100 over 3 addresses x 2 ports, kubetree's TTL", Case: test.Case{Qname: lb, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV(lb + " 5 IN SRV 0 16 80 " + lb), test.SRV(lb + " 5 IN SRV 0 16 53 " + lb)}, Extra: lbAddrs}},
		{Rule: "SRV of one named port", Case: test.Case{Qname: "_http._tcp." + lb, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_http._tcp." + lb + " 5 IN SRV 0 33 80 " + lb)}, Extra: lbAddrs}},
		{Rule: "A at a port's name", Case: test.Case{Qname: "_dns._udp." + lb, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("_dns._udp." + lb + " 7 IN A 203.0.113.1"), test.A("_dns._udp." + lb + " 7 IN A 198.51.100.7")}}},
		{Rule: "no such port", Case: test.Case{Qname: "_http._udp." + lb, Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, Ns: []dns.RR{soa}}},
		{Rule: "any label below a service with external addresses answers them, as in-tree", Case: test.Case{Qname: "www." + lb, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("www." + lb + " 7 IN A 203.0.113.1"), test.A("www." + lb + " 7 IN A 198.51.100.7")}}},
		{Rule: "NODATA for another type", Case: test.Case{Qname: lb, Qtype: dns.TypeTXT, Ns: []dns.RR{soa}}},
		{Rule: "load balancer hostname: CNAME, then its address through the chain", Case: test.Case{Qname: elb, Qtype: dns.TypeA,
			Answer: []dns.RR{test.CNAME(elb + " 5 IN CNAME lb.example.net."), test.A("lb.example.net. 30 IN A " + plugintest.UpstreamAnswer)}}},
		{Rule: "load balancer hostname, AAAA", Case: test.Case{Qname: elb, Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.CNAME(elb + " 5 IN CNAME lb.example.net.")}}},
		{Rule: "load balancer hostname, SRV targets it", Case: test.Case{Qname: elb, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV(elb + " 5 IN SRV 0 100 80 lb.example.net.")},
			Extra:  []dns.RR{test.A("lb.example.net. 30 IN A " + plugintest.UpstreamAnswer)}}},
		{Rule: "a ClusterIP service without external addresses has no name", Case: test.Case{Qname: "plain.prod.example.org.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{soa}}},
		{Rule: "headless: an endpoint of a ClusterIP service without external addresses", Case: test.Case{Qname: "p-0.plain.prod.example.org.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("p-0.plain.prod.example.org. 7 IN A 10.244.1.1")}}},
		{Rule: "headless service: every ready endpoint", Case: test.Case{Qname: db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A(db + " 7 IN A 10.244.0.1"), test.A(db + " 7 IN A 10.244.0.2")}}},
		{Rule: "headless service, AAAA", Case: test.Case{Qname: db, Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA(db + " 7 IN AAAA fd00::2")}}},
		{Rule: "headless SRV: one per endpoint name and port, weight over 3 endpoints", Case: test.Case{Qname: db, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV(db + " 5 IN SRV 0 33 5432 " + db0), test.SRV(db + " 5 IN SRV 0 33 5432 " + db2)},
			Extra:  []dns.RR{test.A(db0 + " 7 IN A 10.244.0.1"), test.AAAA(db0 + " 7 IN AAAA fd00::2"), test.A(db2 + " 7 IN A 10.244.0.2")}}},
		{Rule: "headless SRV of a named port", Case: test.Case{Qname: "_pg._tcp." + db, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_pg._tcp." + db + " 5 IN SRV 0 33 5432 " + db0), test.SRV("_pg._tcp." + db + " 5 IN SRV 0 33 5432 " + db2)},
			Extra:  []dns.RR{test.A(db0 + " 7 IN A 10.244.0.1"), test.AAAA(db0 + " 7 IN AAAA fd00::2"), test.A(db2 + " 7 IN A 10.244.0.2")}}},
		{Rule: "endpoint name, A", Case: test.Case{Qname: db0, Qtype: dns.TypeA, Answer: []dns.RR{test.A(db0 + " 7 IN A 10.244.0.1")}}},
		{Rule: "endpoint name, AAAA", Case: test.Case{Qname: db0, Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA(db0 + " 7 IN AAAA fd00::2")}}},
		{Rule: "dashed endpoint name", Case: test.Case{Qname: db2, Qtype: dns.TypeA, Answer: []dns.RR{test.A(db2 + " 7 IN A 10.244.0.2")}}},
		{Rule: "endpoint name, SRV", Case: test.Case{Qname: db0, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV(db0 + " 5 IN SRV 0 50 5432 " + db0)},
			Extra:  []dns.RR{test.A(db0 + " 7 IN A 10.244.0.1"), test.AAAA(db0 + " 7 IN AAAA fd00::2")}}},
		{Rule: "no such endpoint", Case: test.Case{Qname: "db-9." + db, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{soa}}},
		{Rule: "endpoint name, NODATA", Case: test.Case{Qname: db2, Qtype: dns.TypeAAAA, Ns: []dns.RR{soa}}},
		{Rule: "a namespace is NODATA", Case: test.Case{Qname: "empty.example.org.", Qtype: dns.TypeA, Ns: []dns.RR{soa}}},
		{Rule: "no such namespace", Case: test.Case{Qname: "lb.staging.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{soa}}},
		{Rule: "no such service", Case: test.Case{Qname: "nope.prod.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{soa}}},
		{Rule: "too deep", Case: test.Case{Qname: "a.b.c." + lb, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{soa}}},
		{Rule: "apex SOA", Case: test.Case{Qname: zone, Qtype: dns.TypeSOA, Answer: []dns.RR{soa}}},
		{Rule: "apex NS, with the nameserver's addresses as glue", Case: test.Case{Qname: zone, Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("example.org. 7 IN NS ns1.dns.example.org.")},
			Extra:  []dns.RR{test.A("ns1.dns.example.org. 7 IN A 192.0.2.53"), test.AAAA("ns1.dns.example.org. 7 IN AAAA 2001:db8::53")}}},
		{Rule: "apex, another type", Case: test.Case{Qname: zone, Qtype: dns.TypeA, Ns: []dns.RR{soa}}},
		{Rule: "the nameserver's name", Case: test.Case{Qname: "ns1.dns.example.org.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("ns1.dns.example.org. 7 IN A 192.0.2.53")}}},
		{Rule: "the nameserver's name, AAAA", Case: test.Case{Qname: "ns1.dns.example.org.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("ns1.dns.example.org. 7 IN AAAA 2001:db8::53")}}},
		{Rule: "dns is an empty non-terminal", Case: test.Case{Qname: "dns.example.org.", Qtype: dns.TypeA, Ns: []dns.RR{soa}}},
		{Rule: "nothing else below dns", Case: test.Case{Qname: "ns2.dns.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{soa}}},
		{Rule: "outside the zone", Case: test.Case{Qname: "lb.prod.svc.cluster.local.", Qtype: dns.TypeA}, Next: true},
	}
	runExternal(t, e, cases)

	// Without headless, endpoints have no external names.
	plain := externalFor(t, c, "kubetree_external example.org")
	runExternal(t, plain, []plugintest.Case{
		{Rule: "no headless: a headless service has no name", Case: test.Case{Qname: db, Qtype: dns.TypeA, Rcode: dns.RcodeNameError,
			Ns: []dns.RR{test.SOA("example.org. 5 IN SOA ns1.dns.example.org. hostmaster.dns.example.org. 0 7200 1800 86400 5")}}},
		{Rule: "no headless: nor an endpoint", Case: test.Case{Qname: "p-0.plain.prod.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError,
			Ns: []dns.RR{test.SOA("example.org. 5 IN SOA ns1.dns.example.org. hostmaster.dns.example.org. 0 7200 1800 86400 5")}}},
		{Rule: "default TTL 5", Case: test.Case{Qname: lb, Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA(lb + " 5 IN AAAA 2001:db8::1")}}},
	})

	// Fallthrough: only NXDOMAIN goes on.
	fall := externalFor(t, c, "kubetree_external example.org {\n apex ns\n fallthrough\n}")
	runExternal(t, fall, []plugintest.Case{
		{Rule: "fallthrough on NXDOMAIN", Case: test.Case{Qname: "nope.prod.example.org.", Qtype: dns.TypeA}, Next: true},
		{Rule: "no fallthrough on NODATA", Case: test.Case{Qname: lb, Qtype: dns.TypeTXT,
			Ns: []dns.RR{test.SOA("example.org. 5 IN SOA ns1.ns.example.org. hostmaster.ns.example.org. 0 7200 1800 86400 5")}}},
		{Rule: "apex option names the nameserver", Case: test.Case{Qname: zone, Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("example.org. 5 IN NS ns1.ns.example.org.")},
			Extra:  []dns.RR{test.A("ns1.ns.example.org. 5 IN A 192.0.2.53"), test.AAAA("ns1.ns.example.org. 5 IN AAAA 2001:db8::53")}}},
	})

	// PTR records of external IPs, in a reverse zone given to kubetree_external.
	reverse := externalFor(t, c, "kubetree_external example.org 113.0.203.in-addr.arpa 2001:db8::/32")
	revSOA := test.SOA("113.0.203.in-addr.arpa. 5 IN SOA ns1.dns.113.0.203.in-addr.arpa. hostmaster.dns.113.0.203.in-addr.arpa. 0 7200 1800 86400 5")
	runExternal(t, reverse, []plugintest.Case{
		{Rule: "PTR of a load balancer ingress IP", Case: test.Case{Qname: "1.113.0.203.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("1.113.0.203.in-addr.arpa. 5 IN PTR lb.prod.example.org.")}}},
		{Rule: "PTR of an IPv6 ingress IP", Case: test.Case{Qname: "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa. 5 IN PTR lb.prod.example.org.")}}},
		{Rule: "no service has the address", Case: test.Case{Qname: "2.113.0.203.in-addr.arpa.", Qtype: dns.TypePTR,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{revSOA}}},
		{Rule: "the reverse zone's apex", Case: test.Case{Qname: "113.0.203.in-addr.arpa.", Qtype: dns.TypePTR, Ns: []dns.RR{revSOA}}},
	})

	// A status update (a load balancer assigned later) is served, and its PTR record moves.
	elbNow := externalObjects()[3].(*api.Service)
	elbNow.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{IP: "203.0.113.9"}}
	c.Update(t, elbNow)
	plugintest.WaitFor(t, "the new ingress", func() bool {
		w := &plugintest.CaptureWriter{}
		r := new(dns.Msg)
		r.SetQuestion(elb, dns.TypeA)
		_, _ = e.ServeDNS(t.Context(), w, r)
		return w.Msg != nil && len(w.Msg.Answer) == 1 && strings.HasSuffix(w.Msg.Answer[0].String(), "203.0.113.9")
	})
	plugintest.CheckHandler(t, reverse, func(next plugin.Handler) { reverse.Next = next }, plugintest.Case{Case: test.Case{Qname: "9.113.0.203.in-addr.arpa.",
		Qtype: dns.TypePTR, Answer: []dns.RR{test.PTR("9.113.0.203.in-addr.arpa. 5 IN PTR elb.prod.example.org.")}}})
	c.Remove(t, elbNow)
	plugintest.WaitFor(t, "the deleted service's PTR record gone", func() bool {
		w := &plugintest.CaptureWriter{}
		r := new(dns.Msg)
		r.SetQuestion("9.113.0.203.in-addr.arpa.", dns.TypePTR)
		_, _ = reverse.ServeDNS(t.Context(), w, r)
		return w.Msg != nil && w.Msg.Rcode == dns.RcodeNameError
	})
	if got := c.External.Size(); got != 3 { // lb's three addresses
		t.Errorf("external index holds %d addresses, want 3: %v", got, c.External)
	}
}

// TestExternalBeforeSync: a name not yet known is SERVFAIL, never a cached NXDOMAIN.
func TestExternalBeforeSync(t *testing.T) {
	k, _ := plugintest.Wired(t, "kubetree cluster.local")
	e, err := external.Parse(caddy.NewTestController("dns", "kubetree_external example.org"))
	if err != nil {
		t.Fatal(err)
	}
	e.Use(k, nil)
	plugintest.CheckHandler(t, e, func(next plugin.Handler) { e.Next = next }, plugintest.Case{Case: test.Case{Qname: "web.prod.example.org.", Qtype: dns.TypeA,
		Rcode: dns.RcodeServerFailure, Ns: []dns.RR{test.SOA("example.org. 5 IN SOA ns1.dns.example.org. hostmaster.dns.example.org. 0 7200 1800 86400 5")}}})
}

// TestExternalNameserver: when this server is an endpoint of services (the cluster's DNS service),
// the nameserver's addresses are their external IPs, or with headless a headless one's endpoints,
// as the in-tree plugin gives them to k8s_external; otherwise the addresses the server answers on.
func TestExternalNameserver(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local")
	k.SyncedFlag.Store(true)
	a.PublishNameserver([]net.IP{net.ParseIP("10.244.5.5")})
	glue := func(headless bool) []string {
		stanza := "kubetree_external example.org"
		if headless {
			stanza += " {\n headless\n}"
		}
		e, err := external.Parse(caddy.NewTestController("dns", stanza))
		if err != nil {
			t.Fatal(err)
		}
		e.Use(k, nil)
		w := &plugintest.CaptureWriter{}
		r := new(dns.Msg)
		r.SetQuestion("example.org.", dns.TypeNS)
		if _, err := e.ServeDNS(t.Context(), w, r); err != nil || w.Msg == nil || len(w.Msg.Answer) != 1 {
			t.Fatalf("NS: %v %v", w.Msg, err)
		}
		return plugintest.ZoneText(w.Msg.Extra)
	}
	glueIs := func(headless bool, want ...string) {
		t.Helper()
		if got := glue(headless); strings.Join(got, ",") != strings.Join(plugintest.ZoneText(plugintest.ParseRRs(t, want...)), ",") {
			t.Errorf("headless %v: glue %q, want %q", headless, got, want)
		}
	}
	const ns1 = "ns1.dns.example.org."
	glueIs(false, plugintest.RecA(ns1, "10.244.5.5"))

	a.ApplyNamespace("kube-system", true)
	dnsService := k8stest.ClusterIPService("kube-system", "kube-dns", []string{"10.96.0.10"}, k8stest.UDP("dns", 53))
	dnsService.Spec.ExternalIPs = []string{"198.51.100.53", "198.51.100.53"}
	dnsService.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{IP: "2001:db8::53"}, {Hostname: "lb.example.net"}}
	dnsSlices := []*discovery.EndpointSlice{k8stest.Slice("kube-system", "kube-dns", "kube-dns-1", discovery.AddressTypeIPv4,
		k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolUDP, 53)), k8stest.Endpoint{Addrs: []string{"10.244.5.5"}}, k8stest.Endpoint{Addrs: []string{"10.244.5.6"}})}
	svc, sls := plugintest.Slim(t, dnsService, dnsSlices, false)
	a.ApplyService(svc.Key(), svc, sls, true)
	glueIs(false, plugintest.RecA(ns1, "198.51.100.53"), plugintest.RecAAAA(ns1, "2001:db8::53"))

	hl := k8stest.HeadlessService("kube-system", "dns-pods", k8stest.UDP("dns", 53))
	hlSlices := []*discovery.EndpointSlice{k8stest.Slice("kube-system", "dns-pods", "dns-pods-1", discovery.AddressTypeIPv4,
		k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolUDP, 53)), k8stest.Endpoint{Addrs: []string{"10.244.5.5"}}, k8stest.Endpoint{Addrs: []string{"10.244.5.6"}})}
	svc2, sls2 := plugintest.Slim(t, hl, hlSlices, false)
	a.ApplyService(svc2.Key(), svc2, sls2, true)
	glueIs(false, plugintest.RecA(ns1, "198.51.100.53"), plugintest.RecAAAA(ns1, "2001:db8::53"))
	glueIs(true, plugintest.RecA(ns1, "198.51.100.53"), plugintest.RecAAAA(ns1, "2001:db8::53"), plugintest.RecA(ns1, "10.244.5.5"), plugintest.RecA(ns1, "10.244.5.6"))

	// This server leaves the services' endpoints: its own addresses again.
	for i, s := range []*api.Service{dnsService, hl} {
		moved := []*discovery.EndpointSlice{dnsSlices[0], hlSlices[0]}[i]
		moved.Endpoints = moved.Endpoints[1:]
		st, sl := plugintest.Slim(t, s, []*discovery.EndpointSlice{moved}, false)
		a.ApplyService(st.Key(), st, sl, true)
	}
	glueIs(true, plugintest.RecA(ns1, "10.244.5.5"))
}

// BenchmarkExternalServeDNS answers external names through a writer that does not pack, so that
// the allocations are the plugin's own: the reply's records and message, nothing else.
func BenchmarkExternalServeDNS(b *testing.B) {
	c := plugintest.StartCluster(b, "kubetree cluster.local", externalObjects()...)
	e, err := external.Parse(caddy.NewTestController("dns", "kubetree_external example.org {\n headless\n}"))
	if err != nil {
		b.Fatal(err)
	}
	e.Use(c.Kubetree, nil)
	w := plugintest.NewServerWriter()
	for _, bc := range []struct {
		name  string
		qname string
		qtype uint16
		rcode int
		count int // answer records
	}{
		{"A load balancer", "lb.prod.example.org.", dns.TypeA, dns.RcodeSuccess, 2},
		{"SRV load balancer", "_http._tcp.lb.prod.example.org.", dns.TypeSRV, dns.RcodeSuccess, 1},
		{"A headless", "db.prod.example.org.", dns.TypeA, dns.RcodeSuccess, 2},
		{"A endpoint", "db-0.db.prod.example.org.", dns.TypeA, dns.RcodeSuccess, 1},
		{"NXDOMAIN", "nope.prod.example.org.", dns.TypeA, dns.RcodeNameError, 0},
		{"NODATA", "prod.example.org.", dns.TypeA, dns.RcodeSuccess, 0},
	} {
		r := new(dns.Msg)
		r.SetQuestion(bc.qname, bc.qtype)
		rec := &plugintest.CaptureWriter{}
		e.ServeDNS(b.Context(), rec, r)
		if rec.Msg == nil || rec.Msg.Rcode != bc.rcode || len(rec.Msg.Answer) != bc.count {
			b.Fatalf("%s: unexpected reply %v", bc.name, rec.Msg)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.ServeDNS(b.Context(), w, r)
			}
		})
	}
}

// TestExternalTransfer: AXFR of a kubetree_external zone carries the apex and the records that
// queries for each service's external names answer; a secondary with the current serial gets the
// SOA alone; another zone is not ours.
func TestExternalTransfer(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local", externalObjects()...)
	c.Applier.PublishNameserver([]net.IP{net.ParseIP("192.0.2.53")})
	// The serial follows that change within a second; the transfers below compare serials, so a
	// snapshot moves it now, as a transfer does.
	c.Applier.Snapshot(c.ServedZones[0], 0)
	e := externalFor(t, c, "kubetree_external example.org {\n ttl 7\n headless\n}")
	axfr := func(serial uint32) []dns.RR {
		ch, err := e.Transfer("example.org.", serial)
		if err != nil {
			t.Fatal(err)
		}
		var out []dns.RR
		for rrs := range ch {
			out = append(out, rrs...)
		}
		return out
	}
	got := axfr(0)
	if len(got) < 2 || got[0].Header().Rrtype != dns.TypeSOA || got[len(got)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("AXFR does not start and end with the SOA: %v", got)
	}
	const (
		lb, elb, db = "lb.prod.example.org.", "elb.prod.example.org.", "db.prod.example.org."
		db0, db2    = "db-0." + db, "10-244-0-2." + db
	)
	want := []string{
		"example.org. 7 IN NS ns1.dns.example.org.", "ns1.dns.example.org. 7 IN A 192.0.2.53",
		lb + " 7 IN A 203.0.113.1", lb + " 7 IN A 198.51.100.7", lb + " 7 IN AAAA 2001:db8::1",
		lb + " 5 IN SRV 0 16 80 " + lb, lb + " 5 IN SRV 0 16 53 " + lb,
		"_http._tcp." + lb + " 5 IN SRV 0 33 80 " + lb, "_dns._udp." + lb + " 5 IN SRV 0 33 53 " + lb,
		elb + " 5 IN CNAME lb.example.net.", elb + " 5 IN SRV 0 100 80 lb.example.net.",
		"_http._tcp." + elb + " 5 IN SRV 0 100 80 lb.example.net.",
		db + " 7 IN A 10.244.0.1", db + " 7 IN A 10.244.0.2", db + " 7 IN AAAA fd00::2",
		db + " 5 IN SRV 0 33 5432 " + db0, db + " 5 IN SRV 0 33 5432 " + db2,
		"_pg._tcp." + db + " 5 IN SRV 0 33 5432 " + db0, "_pg._tcp." + db + " 5 IN SRV 0 33 5432 " + db2,
		db0 + " 7 IN A 10.244.0.1", db0 + " 7 IN AAAA fd00::2", db0 + " 5 IN SRV 0 50 5432 " + db0,
		db2 + " 7 IN A 10.244.0.2", db2 + " 5 IN SRV 0 100 5432 " + db2,
	}
	if g, w := plugintest.ZoneText(got[1:len(got)-1]), plugintest.ZoneText(plugintest.ParseRRs(t, want...)); !slices.Equal(g, w) {
		t.Errorf("AXFR example.org:\n got %q\nwant %q", g, w)
	}

	serial := got[0].(*dns.SOA).Serial
	if current := axfr(serial); len(current) != 1 || current[0].Header().Rrtype != dns.TypeSOA {
		t.Errorf("IXFR at the current serial: %v, want the SOA alone", current)
	}
	if _, err := e.Transfer("cluster.local.", 0); err != transfer.ErrNotAuthoritative {
		t.Errorf("transfer of a zone not kubetree_external's: %v", err)
	}
}
