package e2e

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestNegativeTTL: behind CoreDNS's cache, a name asked for before its service exists is cached as
// NXDOMAIN for the SOA's TTL. Two CoreDNS with `cache 30` in front of kubetree with ttl 30 ask for
// a service a moment before it is created: with negative_ttl 1, it resolves through the cache a few
// seconds later (the cache keeps a denial 5 s at least); without, the cache goes on answering
// NXDOMAIN, though kubetree behind it answers the name.
func TestNegativeTTL(t *testing.T) {
	ns := newNamespace(t, "negttl")
	without := startCoreDNSWith(t, []string{"cache 30"}, "ttl 30")
	with := startCoreDNSWith(t, []string{"cache 30"}, "ttl 30", "negative_ttl 1")
	eventually(t, "ready", 30*time.Second, func() bool { return without.isReady() && with.isReady() })
	name := svcName(ns, "late")

	// The miss, asked of the one without negative_ttl first: its cached NXDOMAIN is never the
	// later to expire, so that it can only outlast the other's through negative_ttl.
	for _, m := range []struct {
		c               *coreDNS
		soaTTL, minimum uint32
		what            string
	}{
		{without, 30, 30, "without negative_ttl: the ttl"},
		// The cache writes the TTL it keeps the denial for: at least its minimum, 5 s.
		{with, 5, 1, "with negative_ttl 1: the cache's minimum, 5 s"},
	} {
		r := m.c.query(t, "udp", name, dns.TypeA)
		soa, ok := soaOf(r)
		if r.Rcode != dns.RcodeNameError || !ok || soa.Hdr.Ttl != m.soaTTL || soa.Minttl != m.minimum {
			t.Fatalf("%s: want NXDOMAIN with an SOA of TTL %d and MINIMUM %d, got\n%v", m.what, m.soaTTL, m.minimum, r)
		}
	}
	missed := time.Now()

	time.Sleep(2 * time.Second) // the service comes a moment after the miss
	svc := createService(t, k8stest.ClusterIPService(ns, "late", nil, k8stest.TCP("http", 80)))
	// Well before the 30 s a denial is kept without negative_ttl.
	var last *dns.Msg
	eventually(t, name+" through the cache with negative_ttl", 20*time.Second, func() bool {
		m, err := with.try("udp", name, dns.TypeA)
		last = m
		return err == nil && m.Rcode == dns.RcodeSuccess && len(answers(m)) == 1 && answers(m)[0] == svc.Spec.ClusterIP
	}, func() string { return last.String() })
	report(t, "with negative_ttl 1 behind cache 30, a service created 2 s after a miss resolves %s after the miss",
		time.Since(missed).Round(100*time.Millisecond))

	r := without.query(t, "udp", name, dns.TypeA)
	if soa, ok := soaOf(r); r.Rcode != dns.RcodeNameError || !ok {
		t.Errorf("without negative_ttl: want the cached NXDOMAIN, got\n%v", r)
	} else {
		report(t, "without negative_ttl, the cache keeps the NXDOMAIN %d s more", soa.Hdr.Ttl)
	}
	// The query with the DO bit is another key of the cache: kubetree behind it answers the name.
	do := new(dns.Msg)
	do.SetQuestion(name, dns.TypeA)
	do.SetEdns0(1232, true)
	r, err := dns.Exchange(do, without.addr)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(answers(r)) != 1 || answers(r)[0] != svc.Spec.ClusterIP {
		t.Errorf("without negative_ttl, kubetree behind the cache: want %s, got %v %v", svc.Spec.ClusterIP, r, err)
	}
}

// soaOf returns the SOA of a reply's authority section.
func soaOf(m *dns.Msg) (*dns.SOA, bool) {
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa, true
		}
	}
	return nil, false
}
