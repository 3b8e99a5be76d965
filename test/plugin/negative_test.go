package plugin_test

import (
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
)

// TestNegativeTTL: with negative_ttl, NXDOMAIN and NODATA answers (and SERVFAIL before the sync)
// carry the SOA with negative_ttl as its TTL and MINIMUM, in forward and reverse zones, so that
// a miss is cached that long (RFC 2308: the smaller of the two; CoreDNS's cache: the TTL); the
// SOA asked for, and transferred, keeps the ttl as its TTL and has the same MINIMUM.
func TestNegativeTTL(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local 10.in-addr.arpa {\n\tttl 30\n\tnegative_ttl 1\n}")
	web := "web.prod.svc.cluster.local."
	a.ApplyNamespace("prod", true)
	svc, sls := plugintest.Slim(t, k8stest.ClusterIPService("prod", "web", []string{"10.0.0.10"}, k8stest.TCP("http", 80)), nil, false)
	a.ApplyService(svc.Key(), svc, sls, true)

	negative := []dns.RR{test.SOA("cluster.local. 1 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 1")}
	reverse := []dns.RR{test.SOA("10.in-addr.arpa. 1 IN SOA ns.dns.cluster.local. hostmaster.10.in-addr.arpa. 0 7200 1800 86400 1")}
	unsynced := []plugintest.Case{
		{Rule: "not synced: SERVFAIL with the negative SOA", Case: test.Case{Qname: "late.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeServerFailure, Ns: negative}},
	}
	plugintest.RunCases(t, k, unsynced)
	k.SyncedFlag.Store(true)
	plugintest.RunCases(t, k, []plugintest.Case{
		{Rule: "NXDOMAIN: the SOA's TTL and MINIMUM are negative_ttl", Case: test.Case{Qname: "late.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: negative}},
		{Rule: "NODATA of a service", Case: test.Case{Qname: web, Qtype: dns.TypeAAAA, Ns: negative}},
		{Rule: "NODATA of an empty non-terminal", Case: test.Case{Qname: "svc.cluster.local.", Qtype: dns.TypeA, Ns: negative}},
		{Rule: "NXDOMAIN in a reverse zone", Case: test.Case{Qname: "99.0.0.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Rcode: dns.RcodeNameError, Ns: reverse}},
		{Rule: "an answer keeps the ttl", Case: test.Case{Qname: web, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A(web + " 30 IN A 10.0.0.10")}}},
		{Rule: "the SOA asked for keeps the ttl, with negative_ttl as its MINIMUM", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeSOA,
			Answer: []dns.RR{test.SOA("cluster.local. 30 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 1")}}},
	})

	rrs := plugintest.Xfr(t, k, "cluster.local.", 0)
	if soa, ok := rrs[0].(*dns.SOA); !ok || soa.Hdr.Ttl != 30 || soa.Minttl != 1 {
		t.Errorf("transferred SOA %v, want TTL 30 and MINIMUM 1", rrs[0])
	}
}
