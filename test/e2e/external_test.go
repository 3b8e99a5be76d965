package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// startExternalPair is startPair with each plugin's external names companion beside it:
// kubetree_external beside kubetree, k8s_external beside kubernetes, with the same stanza and the
// same other plugin lines.
func startExternalPair(t testing.TB, stanza string, plugins []string, options ...string) pair {
	t.Helper()
	p := pair{
		kubetree:   startCoreDNSPlugin(t, "kubetree", append([]string{"kubetree_external " + stanza}, plugins...), options...),
		kubernetes: startCoreDNSPlugin(t, "kubernetes", append([]string{"k8s_external " + stanza}, plugins...), options...),
	}
	for _, c := range p.both() {
		eventually(t, "ready", 30*time.Second, c.isReady)
	}
	return p
}

// setIngress gives a LoadBalancer service its load balancer's addresses, as a cloud controller
// would: through the status subresource.
func setIngress(t testing.TB, s *api.Service, ingress ...api.LoadBalancerIngress) {
	t.Helper()
	s.Status.LoadBalancer.Ingress = ingress
	if _, err := env.client.CoreV1().Services(s.Namespace).UpdateStatus(bg, s, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestSameExternalNamesAsK8sExternal: kubetree_external answers the names k8s_external serves
// from the in-tree plugin with the same records: load balancer ingress IPs of both families and
// hostnames, external IPs, SRV, headless services and endpoint names, the apex, PTR records of
// external IPs in reverse zones, and the negative answers, over UDP and TCP.
func TestSameExternalNamesAsK8sExternal(t *testing.T) {
	ns := newNamespace(t, "external")
	lb := k8stest.ClusterIPService(ns, "lb", nil, k8stest.TCP("http", 80), k8stest.TCP("https", 443))
	lb.Spec.Type = api.ServiceTypeLoadBalancer
	lb.Spec.ExternalIPs = []string{"198.51.100.7"}
	setIngress(t, createService(t, lb), api.LoadBalancerIngress{IP: "203.0.113.1"}, api.LoadBalancerIngress{IP: "2001:db8::1"})
	elb := k8stest.ClusterIPService(ns, "elb", nil, k8stest.TCP("http", 80))
	elb.Spec.Type = api.ServiceTypeLoadBalancer
	setIngress(t, createService(t, elb), api.LoadBalancerIngress{Hostname: "lb.example.net"})

	createService(t, k8stest.ClusterIPService(ns, "plain", nil, k8stest.TCP("http", 80)))
	applySlice(t, k8stest.Slice(ns, "plain", "plain-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
		k8stest.Endpoint{Addrs: []string{"10.244.9.1"}, Hostname: "p-0"}))
	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	pg := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432))
	applySlice(t, k8stest.Slice(ns, "db", "db-v4", discovery.AddressTypeIPv4, pg,
		k8stest.Endpoint{Addrs: []string{"10.244.9.2"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.9.3"}},
		k8stest.Endpoint{Addrs: []string{"10.244.9.4"}, NotReady: true}))
	applySlice(t, k8stest.Slice(ns, "db", "db-v6", discovery.AddressTypeIPv6, pg, k8stest.Endpoint{Addrs: []string{"fd00::9:2"}, Hostname: "db-0"}))

	const ip6 = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
	p := startExternalPair(t, "example.org 113.0.203.in-addr.arpa 100.51.198.in-addr.arpa 8.b.d.0.1.0.0.2.ip6.arpa {\n        headless\n        ttl 7\n    }", nil, "ttl 9")
	name := func(prefix string) string { return prefix + "." + ns + ".example.org." }
	p.waitAnswer(t, name("lb"), dns.TypeA, "198.51.100.7", "203.0.113.1")
	p.waitAnswer(t, name("elb"), dns.TypeA, "lb.example.net.", "192.0.2.1")
	p.waitAnswer(t, name("db"), dns.TypeA, "10.244.9.2", "10.244.9.3")

	questions := []struct {
		name  string
		qtype uint16
	}{
		{name("lb"), dns.TypeA},
		{name("lb"), dns.TypeAAAA},
		{name("lb"), dns.TypeSRV},
		{name("lb"), dns.TypeTXT},
		{name("_http._tcp.lb"), dns.TypeSRV},
		{name("_https._tcp.lb"), dns.TypeA},
		{name("_http._udp.lb"), dns.TypeSRV},
		{name("www.lb"), dns.TypeA},
		{name("a.b.c.lb"), dns.TypeA},
		{name("elb"), dns.TypeA},
		{name("elb"), dns.TypeAAAA},
		{name("elb"), dns.TypeSRV},
		{name("elb"), dns.TypeCNAME},
		{name("plain"), dns.TypeA},
		{name("p-0.plain"), dns.TypeA},
		{name("p-0.plain"), dns.TypeSRV},
		{name("db"), dns.TypeA},
		{name("db"), dns.TypeAAAA},
		{name("db"), dns.TypeSRV},
		{name("_pg._tcp.db"), dns.TypeSRV},
		{name("db-0.db"), dns.TypeA},
		{name("db-0.db"), dns.TypeAAAA},
		{name("db-0.db"), dns.TypeSRV},
		{name("10-244-9-3.db"), dns.TypeA},
		{name("10-244-9-4.db"), dns.TypeA},
		{name("missing"), dns.TypeA},
		{ns + ".example.org.", dns.TypeA},
		{"lb.no-such-namespace.example.org.", dns.TypeA},
		{"example.org.", dns.TypeSOA},
		{"example.org.", dns.TypeA},
		{"dns.example.org.", dns.TypeA},
		{"ns2.dns.example.org.", dns.TypeA},
		{"1.113.0.203.in-addr.arpa.", dns.TypePTR},
		{"7.100.51.198.in-addr.arpa.", dns.TypePTR},
		{ip6, dns.TypePTR},
		{"2.113.0.203.in-addr.arpa.", dns.TypePTR},
		{"113.0.203.in-addr.arpa.", dns.TypeSOA},
		{"1.113.0.203.in-addr.arpa.", dns.TypeA},
	}
	for _, q := range questions {
		for _, network := range []string{"udp", "tcp"} {
			p.same(t, network, q.name, q.qtype)
		}
	}

	// The apex NS is the same record; its glue is the server's address for kubetree, and nothing
	// for the in-tree plugin, which finds no address on a server bound to 127.0.0.1 (see the README).
	for _, c := range p.both() {
		m := c.query(t, "udp", "example.org.", dns.TypeNS)
		if got := strings.Join(answers(m), ","); m.Rcode != dns.RcodeSuccess || got != "ns1.dns.example.org." {
			t.Errorf("apex NS: rcode %s, answer %q", dns.RcodeToString[m.Rcode], got)
		}
	}
	if m := p.kubetree.query(t, "udp", "ns1.dns.example.org.", dns.TypeA); strings.Join(answers(m), ",") != "127.0.0.1" {
		t.Errorf("kubetree: ns1.dns.example.org A: %v", m)
	}

	// A load balancer that changes its address is served anew.
	cur, err := env.client.CoreV1().Services(ns).Get(bg, "elb", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setIngress(t, cur, api.LoadBalancerIngress{IP: "203.0.113.9"})
	p.waitAnswer(t, name("elb"), dns.TypeA, "203.0.113.9")
	p.same(t, "udp", name("elb"), dns.TypeSRV)
}

// TestSameExternalOptionsAsK8sExternal: apex and fallthrough, and kubetree's namespaces option,
// mean the same with both: a name error falls through to forward, NODATA does not, and a
// namespace the cluster plugin does not serve has no external names.
func TestSameExternalOptionsAsK8sExternal(t *testing.T) {
	ns, other := newNamespace(t, "external-opts"), newNamespace(t, "external-hidden")
	for _, n := range []string{ns, other} {
		lb := k8stest.ClusterIPService(n, "lb", nil, k8stest.TCP("http", 80))
		lb.Spec.ExternalIPs = []string{"198.51.100.8"}
		createService(t, lb)
	}
	p := startExternalPair(t, "example.org {\n        apex ns\n        fallthrough\n    }", nil, "namespaces "+ns)
	p.waitAnswer(t, "lb."+ns+".example.org.", dns.TypeA, "198.51.100.8")
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"lb." + ns + ".example.org.", dns.TypeA},
		{"lb." + ns + ".example.org.", dns.TypeTXT},
		{"missing." + ns + ".example.org.", dns.TypeA},
		{"lb." + other + ".example.org.", dns.TypeA},
		{"example.org.", dns.TypeSOA},
		{"ns.example.org.", dns.TypeA},
		{"ns2.ns.example.org.", dns.TypeA},
	} {
		for _, network := range []string{"udp", "tcp"} {
			p.same(t, network, q.name, q.qtype)
		}
	}
	// The name error went on to forward, whose stand-in answers every A question.
	if m := p.kubetree.query(t, "udp", "missing."+ns+".example.org.", dns.TypeA); strings.Join(answers(m), ",") != "192.0.2.1" {
		t.Errorf("fallthrough: %v", m)
	}
}

// TestSameExternalNameserverAsK8sExternal: with no bind, so that the in-tree plugin finds the
// server's addresses, the zone's nameserver (the apex NS glue and ns1.dns.<zone>) is the same: the
// server's own addresses (but the link-local ones, which the in-tree plugin also names and which
// mean nothing off their link), then, once it is an endpoint of a Service, that Service's external
// IPs.
func TestSameExternalNameserverAsK8sExternal(t *testing.T) {
	var self string // an address of this machine the in-tree plugin also finds
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil && ip.To4() != nil && !ip.IsLoopback() {
			self = ip.String()
			break
		}
	}
	if self == "" {
		t.Skip("no non-loopback IPv4 address on this machine to be an endpoint")
	}
	p := startExternalPair(t, "example.org", []string{unbound})
	nameserver := []struct {
		name  string
		qtype uint16
	}{{"example.org.", dns.TypeNS}, {"ns1.dns.example.org.", dns.TypeA}, {"ns1.dns.example.org.", dns.TypeAAAA}}
	for _, q := range nameserver {
		kt := sortedReply(p.kubetree.query(t, "udp", q.name, q.qtype))
		k8s := sortedReply(withoutLinkLocal(p.kubernetes.query(t, "udp", q.name, q.qtype)))
		if kt != k8s {
			t.Errorf("%s %s: kubetree and kubernetes (link-local addresses left out) differ:\n  kubetree:   %s\n  kubernetes: %s",
				q.name, dns.TypeToString[q.qtype], kt, k8s)
		}
	}

	ns := newNamespace(t, "external-ns")
	svc := k8stest.ClusterIPService(ns, "dns", nil, k8stest.UDP("dns", 53))
	svc.Spec.Type = api.ServiceTypeLoadBalancer
	svc.Spec.ExternalIPs = []string{"198.51.100.53"}
	setIngress(t, createService(t, svc), api.LoadBalancerIngress{IP: "2001:db8::53"})
	applySlice(t, k8stest.Slice(ns, "dns", "dns-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolTCP, 53)),
		k8stest.Endpoint{Addrs: []string{self}}))
	p.waitAnswer(t, "ns1.dns.example.org.", dns.TypeA, "198.51.100.53")
	for _, q := range nameserver {
		for _, network := range []string{"udp", "tcp"} {
			p.same(t, network, q.name, q.qtype)
		}
	}
}

// withoutLinkLocal is m without its A and AAAA records of link-local addresses.
func withoutLinkLocal(m *dns.Msg) *dns.Msg {
	keep := func(rrs []dns.RR) []dns.RR {
		var out []dns.RR
		for _, rr := range rrs {
			switch a := rr.(type) {
			case *dns.A:
				if a.A.IsLinkLocalUnicast() {
					continue
				}
			case *dns.AAAA:
				if a.AAAA.IsLinkLocalUnicast() {
					continue
				}
			}
			out = append(out, rr)
		}
		return out
	}
	m = m.Copy()
	m.Answer, m.Extra = keep(m.Answer), keep(m.Extra)
	return m
}

// TestExternalNeedsKubetree: like k8s_external without the kubernetes plugin, kubetree_external
// without kubetree in its server block stops CoreDNS from starting, and says why.
func TestExternalNeedsKubetree(t *testing.T) {
	corefile := filepath.Join(t.TempDir(), "Corefile")
	addr := freePorts(t, 1)[0]
	text := ".:" + port(addr) + " {\n    bind 127.0.0.1\n    kubetree_external example.org\n    forward . " + env.stubDNS + "\n}\n"
	if err := os.WriteFile(corefile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, coreDNSBinary(), "-conf", corefile).CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "kubetree_external: needs kubetree in the same server block") {
		t.Errorf("coredns: %v, want it to refuse to start:\n%s", err, out)
	}
}

// TestExternalTransferSameAsK8sExternal: AXFR of the external zone through the transfer plugin,
// from kubetree_external and from k8s_external on the same API data: the same records, apart from
// the differences the README lists, which this test spells out.
func TestExternalTransferSameAsK8sExternal(t *testing.T) {
	ns := newNamespace(t, "external-xfr")
	lb := k8stest.ClusterIPService(ns, "lb", nil, k8stest.TCP("http", 80), k8stest.TCP("https", 443))
	lb.Spec.Type = api.ServiceTypeLoadBalancer
	lb.Spec.ExternalIPs = []string{"198.51.100.7"}
	setIngress(t, createService(t, lb), api.LoadBalancerIngress{IP: "2001:db8::1"})
	elb := k8stest.ClusterIPService(ns, "elb", nil, k8stest.TCP("http", 80))
	elb.Spec.Type = api.ServiceTypeLoadBalancer
	setIngress(t, createService(t, elb), api.LoadBalancerIngress{Hostname: "lb.example.net"})
	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	applySlice(t, k8stest.Slice(ns, "db", "db-v4", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
		k8stest.Endpoint{Addrs: []string{"10.244.9.2"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.9.3"}}))

	p := startExternalPair(t, "example.org {\n        headless\n    }", []string{"transfer {\n        to *\n    }"})
	name := func(prefix string) string { return prefix + "." + ns + ".example.org." }
	p.waitAnswer(t, name("lb"), dns.TypeA, "198.51.100.7")
	p.waitAnswer(t, name("elb"), dns.TypeA, "lb.example.net.", "192.0.2.1")
	p.waitAnswer(t, name("db"), dns.TypeA, "10.244.9.2", "10.244.9.3")

	ours := func(rr dns.RR) bool {
		return strings.HasSuffix(rr.Header().Name, "."+ns+".example.org.") || rr.Header().Name == "example.org."
	}
	set := func(c *coreDNS) []string {
		rrs, rc := c.transferIn(t, "example.org.", 0)
		if rc != dns.RcodeSuccess {
			t.Fatalf("AXFR example.org: %s", dns.RcodeToString[rc])
		}
		soaSerial(t, rrs)
		return slices.Compact(zoneLines(rrs, ours)) // k8s_external sends some records twice
	}
	kt, k8s := set(p.kubetree), set(p.kubernetes)
	// The differences the README lists, each written as the record on one side only: k8s_external
	// sends the first SRV record of each name only (one of lb's two ports is missing at its own
	// name), weighs each SRV record 100 where its answers spread 100 over the set, and truncates a
	// load balancer hostname behind _<port>._<proto> to its last label.
	srv := func(owner string, weight int, port, target string) string {
		return owner + " 5 IN SRV 0 " + strconv.Itoa(weight) + " " + port + " " + target
	}
	onlyKubetree := []string{
		srv(name("lb"), 25, "80", name("lb")), srv(name("lb"), 25, "443", name("lb")),
		srv(name("_http._tcp.lb"), 50, "80", name("lb")), srv(name("_https._tcp.lb"), 50, "443", name("lb")),
		srv(name("_http._tcp.elb"), 100, "80", "lb.example.net."),
	}
	onlyK8s := []string{
		srv(name("lb"), 100, "80", name("lb")),
		srv(name("_http._tcp.lb"), 100, "80", name("lb")), srv(name("_https._tcp.lb"), 100, "443", name("lb")),
		srv(name("_http._tcp.elb"), 100, "80", "net."),
	}
	for _, l := range kt {
		if !slices.Contains(k8s, l) && !slices.Contains(onlyKubetree, l) {
			t.Errorf("only kubetree_external transfers %s", l)
		}
	}
	for _, l := range k8s {
		if !slices.Contains(kt, l) && !slices.Contains(onlyK8s, l) {
			t.Errorf("only k8s_external transfers %s", l)
		}
	}
	for _, l := range onlyKubetree {
		if !slices.Contains(kt, l) || slices.Contains(k8s, l) {
			t.Errorf("not a difference any more: %s", l)
		}
	}
	for _, l := range onlyK8s {
		if !slices.Contains(k8s, l) || slices.Contains(kt, l) {
			t.Errorf("not a difference any more: %s", l)
		}
	}
	if len(kt) < 20 {
		t.Errorf("kubetree_external transfers %d records of this test, want at least 20", len(kt))
	}
	if t.Failed() {
		t.Logf("kubetree_external:\n%s\nk8s_external:\n%s", strings.Join(kt, "\n"), strings.Join(k8s, "\n"))
	}
}
