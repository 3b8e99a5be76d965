package plugintest

import (
	"testing"

	"github.com/miekg/dns"
)

// Xfr runs a transfer as the transfer plugin would and returns every record sent, in order.
func Xfr(t testing.TB, k *Plugin, zone string, serial uint32) []dns.RR {
	t.Helper()
	ch, err := k.Transfer(zone, serial)
	if err != nil {
		t.Fatalf("transfer %s from %d: %v", zone, serial, err)
	}
	var out []dns.RR
	for rrs := range ch {
		out = append(out, rrs...)
	}
	return out
}

// AXFRBody checks that rrs starts and ends with the same SOA, and returns the serial and the
// records between, as ZoneText.
func AXFRBody(t *testing.T, rrs []dns.RR) (uint32, []string) {
	t.Helper()
	if len(rrs) < 2 {
		t.Fatalf("transfer of %d records", len(rrs))
	}
	first, ok1 := rrs[0].(*dns.SOA)
	last, ok2 := rrs[len(rrs)-1].(*dns.SOA)
	if !ok1 || !ok2 || first.String() != last.String() {
		t.Fatalf("transfer does not start and end with one SOA: %v ... %v", rrs[0], rrs[len(rrs)-1])
	}
	for _, rr := range rrs[1 : len(rrs)-1] {
		if rr.Header().Rrtype == dns.TypeSOA {
			t.Fatalf("SOA inside a full transfer: %v", rr)
		}
	}
	return first.Serial, ZoneText(rrs[1 : len(rrs)-1])
}

// Texts is records in zone-file form as ZoneText writes them, sorted.
func Texts(t *testing.T, s ...string) []string {
	t.Helper()
	if len(s) == 0 {
		return []string{}
	}
	return ZoneText(ParseRRs(t, s...))
}
