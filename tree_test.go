package kubetree_test

import (
	"github.com/kubetree/kubetree/internal/plugintest"

	"net"
	"testing"

	"github.com/miekg/dns"
)

// TestNewWriteSide: before anything of the cluster is known, a server block's tree holds what
// every zone has: SOA and NS at each apex, and in each forward zone dns-version, the empty svc and
// pod names and ns.dns at the server's addresses; nothing else exists. The indexes start empty.
func TestNewWriteSide(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local other.local 10.in-addr.arpa {\n\tpods verified\n}")
	k.SyncedFlag.Store(true)
	a.PublishNameserver([]net.IP{net.ParseIP("10.244.0.53")})
	if k.Reverse == nil || k.Pods == nil || k.Watch.PodStore == nil || k.External == nil || k.Applier != a {
		t.Fatalf("indexes missing: reverse %v, pods %v, pod store %v, external %v", k.Reverse, k.Pods, k.Watch.PodStore, k.External)
	}
	for _, zone := range []string{"cluster.local.", "other.local."} {
		if code, soa := plugintest.Ask(t, k, zone, dns.TypeSOA); code != dns.RcodeSuccess || len(soa) != 1 {
			t.Errorf("%s SOA: %s %v", zone, dns.RcodeToString[code], soa)
		}
		plugintest.Expect(t, k, zone, dns.TypeNS, dns.RcodeSuccess, zone+" 5 IN NS ns.dns."+zone)
		plugintest.Expect(t, k, "dns-version."+zone, dns.TypeTXT, dns.RcodeSuccess, "dns-version."+zone+" 28800 IN TXT \"1.1.0\"")
		plugintest.Expect(t, k, "ns.dns."+zone, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("ns.dns."+zone, "10.244.0.53"))
		plugintest.Expect(t, k, "svc."+zone, dns.TypeA, dns.RcodeSuccess)
		plugintest.Expect(t, k, "pod."+zone, dns.TypeA, dns.RcodeSuccess)
		plugintest.Expect(t, k, "prod.svc."+zone, dns.TypeA, dns.RcodeNameError)
		plugintest.Expect(t, k, "web.prod.svc."+zone, dns.TypeA, dns.RcodeNameError)
	}
	// The reverse zone names the first forward zone's nameserver.
	plugintest.Expect(t, k, "10.in-addr.arpa.", dns.TypeNS, dns.RcodeSuccess, "10.in-addr.arpa. 5 IN NS ns.dns.cluster.local.")
	plugintest.Expect(t, k, "1.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError)
	// Two forward apexes with five names each below them (dns-version, svc, pod, dns, ns.dns) and
	// the reverse apex.
	if got := k.Tree.Size(); got != 13 {
		t.Errorf("the tree holds %d names, want 13", got)
	}
	if got := k.Reverse.Sizes(); got != [3]int{} {
		t.Errorf("the reverse index holds %v", got)
	}
	if got := k.External.Size(); got != 0 {
		t.Errorf("the external index holds %d addresses", got)
	}
}
