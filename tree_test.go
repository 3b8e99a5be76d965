package kubetree

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// TestNewWriteSide: before anything of the cluster is known, a server block's tree holds what
// every zone has: SOA and NS at each apex, and in each forward zone dns-version, the empty svc and
// pod names and ns.dns at the server's addresses; nothing else exists. The indexes start empty.
func TestNewWriteSide(t *testing.T) {
	k, a := wired(t, "kubetree cluster.local other.local 10.in-addr.arpa {\n\tpods verified\n}")
	k.synced.Store(true)
	a.PublishNameserver([]net.IP{net.ParseIP("10.244.0.53")})
	if k.reverse == nil || k.pods == nil || k.podStore == nil || k.external == nil || k.applier != a {
		t.Fatalf("indexes missing: reverse %v, pods %v, pod store %v, external %v", k.reverse, k.pods, k.podStore, k.external)
	}
	for _, zone := range []string{"cluster.local.", "other.local."} {
		if code, soa := ask(t, k, zone, dns.TypeSOA); code != okay || len(soa) != 1 {
			t.Errorf("%s SOA: %s %v", zone, dns.RcodeToString[code], soa)
		}
		expectK(t, k, zone, dns.TypeNS, okay, zone+" 5 IN NS ns.dns."+zone)
		expectK(t, k, "dns-version."+zone, dns.TypeTXT, okay, "dns-version."+zone+" 28800 IN TXT \"1.1.0\"")
		expectK(t, k, "ns.dns."+zone, dns.TypeA, okay, recA("ns.dns."+zone, "10.244.0.53"))
		expectK(t, k, "svc."+zone, dns.TypeA, okay)
		expectK(t, k, "pod."+zone, dns.TypeA, okay)
		expectK(t, k, "prod.svc."+zone, dns.TypeA, dns.RcodeNameError)
		expectK(t, k, "web.prod.svc."+zone, dns.TypeA, dns.RcodeNameError)
	}
	// The reverse zone names the first forward zone's nameserver.
	expectK(t, k, "10.in-addr.arpa.", dns.TypeNS, okay, "10.in-addr.arpa. 5 IN NS ns.dns.cluster.local.")
	expectK(t, k, "1.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError)
	// Two forward apexes with five names each below them (dns-version, svc, pod, dns, ns.dns) and
	// the reverse apex.
	if got := k.tree.Size(); got != 13 {
		t.Errorf("the tree holds %d names, want 13", got)
	}
	if got := k.reverse.Sizes(); got != [3]int{} {
		t.Errorf("the reverse index holds %v", got)
	}
	if got := k.external.Size(); got != 0 {
		t.Errorf("the external index holds %d addresses", got)
	}
}
