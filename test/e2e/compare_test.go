package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// The comparison harness: kubetree and the in-tree kubernetes plugin, each in its own CoreDNS with
// the same stanza options and companion plugins, on the one API server of the e2e run. A feature's
// test starts a pair, waits until both see what it created, and asks both the same questions.

// pair is kubetree and the in-tree plugin, side by side.
type pair struct {
	kubetree, kubernetes *coreDNS
}

// startPair starts both plugins with the same options. plugins are Corefile lines beside the
// stanza; "@plugin" in them is replaced by the directive under test (autopath @kubetree, say).
func startPair(t testing.TB, plugins []string, options ...string) pair {
	t.Helper()
	return startPairIn(t, nil, plugins, options...)
}

// startPairIn gives both stanzas zones beyond cluster.local in-addr.arpa ip6.arpa.
func startPairIn(t testing.TB, zones, plugins []string, options ...string) pair {
	t.Helper()
	with := func(directive string) []string {
		var out []string
		for _, p := range plugins {
			out = append(out, strings.ReplaceAll(p, "@plugin", "@"+directive))
		}
		return out
	}
	p := pair{
		kubetree:   startCoreDNSZones(t, "kubetree", zones, with("kubetree"), options...),
		kubernetes: startCoreDNSZones(t, "kubernetes", zones, with("kubernetes"), options...),
	}
	for _, c := range p.both() {
		eventually(t, "ready", 30*time.Second, c.isReady)
	}
	return p
}

func (p pair) both() []*coreDNS { return []*coreDNS{p.kubetree, p.kubernetes} }

// waitAnswer waits until both answer name with exactly want.
func (p pair) waitAnswer(t testing.TB, name string, qtype uint16, want ...string) {
	t.Helper()
	for _, c := range p.both() {
		c.waitAnswer(t, name, qtype, want...)
	}
}

// same asks both the question over network ("udp" or "tcp") and fails the test where the replies
// differ in rcode, flags that matter, or any section's records (compared as sets: neither plugin
// promises an order). It returns kubetree's reply, written as sortedReply writes it.
func (p pair) same(t testing.TB, network, name string, qtype uint16) string {
	t.Helper()
	kt := sortedReply(p.kubetree.query(t, network, name, qtype))
	k8s := sortedReply(p.kubernetes.query(t, network, name, qtype))
	if kt != k8s {
		t.Errorf("%s %s over %s: kubetree and kubernetes differ:\n  kubetree:   %s\n  kubernetes: %s",
			name, dns.TypeToString[qtype], network, kt, k8s)
	}
	return kt
}

// sortedReply writes a reply as its rcode, authoritative bit and each section's records sorted,
// with TTLs and SOA serials as 0: "NOERROR aa | answer... | authority... | additional...".
func sortedReply(m *dns.Msg) string {
	section := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			if soa, ok := rr.(*dns.SOA); ok {
				// Each server keeps its own serial: it is when that server last saw a change.
				c := *soa
				c.Serial = 0
				rr = &c
			}
			out = append(out, strings.Join(strings.Fields(rr.String()), " "))
		}
		slices.Sort(out)
		return strings.Join(out, "; ")
	}
	head := dns.RcodeToString[m.Rcode]
	if m.Authoritative {
		head += " aa"
	}
	return strings.Join([]string{head, section(m.Answer), section(m.Ns), section(m.Extra)}, " | ")
}

// TestSpecRecordsSameAsKubernetes: on one API server, the replies of kubetree and the in-tree
// plugin to the names the DNS specification defines (ClusterIP, headless and ExternalName
// services, endpoints, SRV, PTR, the namespace, the SOA and dns-version) and to a missing service
// are the same, every section and the authoritative bit, over UDP and TCP.
func TestSpecRecordsSameAsKubernetes(t *testing.T) {
	ns := newNamespace(t, "compare")
	web := createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
		k8stest.Endpoint{Addrs: []string{"10.244.7.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.7.2"}},
		k8stest.Endpoint{Addrs: []string{"10.244.7.3"}, NotReady: true}))
	createService(t, k8stest.ExternalNameService(ns, "docs", "www.example.org"))

	p := startPair(t, nil)
	p.waitAnswer(t, svcName(ns, "db"), dns.TypeA, "10.244.7.1", "10.244.7.2")
	p.waitAnswer(t, svcName(ns, "web"), dns.TypeA, web.Spec.ClusterIP)

	questions := []struct {
		name  string
		qtype uint16
	}{
		{svcName(ns, "web"), dns.TypeA},
		{svcName(ns, "web"), dns.TypeAAAA},
		{svcName(ns, "web"), dns.TypeSRV},
		{"_http._tcp." + svcName(ns, "web"), dns.TypeSRV},
		{svcName(ns, "db"), dns.TypeA},
		{svcName(ns, "db"), dns.TypeSRV},
		{"db-0." + svcName(ns, "db"), dns.TypeA},
		{"10-244-7-2." + svcName(ns, "db"), dns.TypeA},
		{"_pg._tcp." + svcName(ns, "db"), dns.TypeSRV},
		{svcName(ns, "docs"), dns.TypeCNAME},
		{svcName(ns, "missing"), dns.TypeA},
		{ns + ".svc.cluster.local.", dns.TypeA},
		{"1.7.244.10.in-addr.arpa.", dns.TypePTR},
		{"cluster.local.", dns.TypeSOA},
		{"dns-version.cluster.local.", dns.TypeTXT},
		// In the question's case (CoreDNS's TestPreserveCase): the owners as asked, and the zone
		// of the names each plugin makes (SRV targets and glue, the SOA's names) as asked.
		{"not-a-service." + ns + ".svc.ClUsTeR.lOcAl.", dns.TypeA},
		{"Cluster.local.", dns.TypeSOA},
		{"_HtTp._TcP.wEb." + strings.ToUpper(ns) + ".SvC.cLuStEr.LoCaL.", dns.TypeSRV},
		{"WEB." + ns + ".svc.Cluster.Local.", dns.TypeA},
		{"db." + ns + ".svc.CLUSTER.LOCAL.", dns.TypeSRV},
		{"_Pg._Tcp.Db." + ns + ".svc.cluster.LOCAL.", dns.TypeSRV},
		{"DB-0.db." + ns + ".svc.Cluster.Local.", dns.TypeSRV},
		{"Docs." + ns + ".svc.Cluster.Local.", dns.TypeCNAME},
		{strings.ToUpper(ns) + ".svc.Cluster.Local.", dns.TypeA},
		{"1.7.244.10.IN-ADDR.ARPA.", dns.TypePTR},
	}
	for _, q := range questions {
		for _, network := range []string{"udp", "tcp"} {
			p.same(t, network, q.name, q.qtype)
		}
	}
}

// TestUpstreamTruncationSameAsKubernetes: an ExternalName service whose target the next plugin
// (forward, to the stub upstream) resolves carries the upstream's TC bit to the client in both
// plugins: over UDP the upstream's reply is cut short, and so is each plugin's; over TCP neither is.
func TestUpstreamTruncationSameAsKubernetes(t *testing.T) {
	ns := newNamespace(t, "cut")
	createService(t, k8stest.ExternalNameService(ns, "external", "www."+strings.TrimSuffix(stubTruncated, ".")))
	createService(t, k8stest.ExternalNameService(ns, "whole", "www.example.org"))
	p := startPair(t, nil)
	for _, c := range p.both() {
		c.waitAnswer(t, svcName(ns, "whole"), dns.TypeCNAME, "www.example.org.")
		c.waitAnswer(t, svcName(ns, "external"), dns.TypeCNAME, "www."+stubTruncated)
	}
	for _, tc := range []struct {
		name, network string
		truncated     bool
	}{
		{svcName(ns, "external"), "udp", true},
		{svcName(ns, "external"), "tcp", false},
		{svcName(ns, "whole"), "udp", false},
	} {
		kt := p.same(t, tc.network, tc.name, dns.TypeA)
		for _, c := range p.both() {
			m := c.query(t, tc.network, tc.name, dns.TypeA)
			if m.Truncated != tc.truncated {
				t.Errorf("%s: %s A over %s: TC %v, want %v (%s)", c.directive, tc.name, tc.network, m.Truncated, tc.truncated, kt)
			}
		}
	}
}
