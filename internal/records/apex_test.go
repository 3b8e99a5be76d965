package records

import (
	"testing"

	"github.com/miekg/dns"
)

// TestApexSetNegativeTTL: the SOA's MINIMUM is the negative TTL; its own TTL is the ttl where it is
// asked for and the negative TTL in negative answers, each at most soaMaxTTL. Without a negative
// TTL of its own (the same as the ttl), both are one record.
func TestApexSetNegativeTTL(t *testing.T) {
	for _, tc := range []struct {
		name             string
		ttl, negative    uint32
		soaTTL, negTTL   uint32 // the SOA's TTL asked for, and in negative answers
		minimum          uint32
		oneRecordForBoth bool
	}{
		{name: "the default: as the ttl", ttl: 5, negative: 5, soaTTL: 5, negTTL: 5, minimum: 5, oneRecordForBoth: true},
		{name: "shorter than the ttl", ttl: 30, negative: 1, soaTTL: 30, negTTL: 1, minimum: 1},
		{name: "no negative caching", ttl: 30, negative: 0, soaTTL: 30, negTTL: 0, minimum: 0},
		{name: "longer than the ttl", ttl: 5, negative: 60, soaTTL: 5, negTTL: 60, minimum: 60},
		{name: "longer than the SOA's TTL may be", ttl: 30, negative: 3600, soaTTL: 30, negTTL: soaMaxTTL, minimum: 3600},
		{name: "both above the SOA's TTL cap", ttl: 3600, negative: 600, soaTTL: soaMaxTTL, negTTL: soaMaxTTL, minimum: 600, oneRecordForBoth: true},
		{name: "a long ttl as the negative TTL", ttl: 3600, negative: 3600, soaTTL: soaMaxTTL, negTTL: soaMaxTTL, minimum: 3600, oneRecordForBoth: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Builder{TTL: tc.ttl, NegativeTTL: tc.negative, Nameserver: "ns.dns.cluster.local."}
			for _, zone := range []string{"cluster.local.", "10.in-addr.arpa."} {
				s := b.ApexSet(zone, 42, nil)
				if len(s.SOA) != 1 || len(s.NegativeSOA) != 1 {
					t.Fatalf("%s: SOA %v, negative SOA %v: want one each", zone, s.SOA, s.NegativeSOA)
				}
				soa, neg := s.SOA[0].(*dns.SOA), s.NegativeSOA[0].(*dns.SOA)
				if soa.Hdr.Ttl != tc.soaTTL || soa.Minttl != tc.minimum {
					t.Errorf("%s: SOA TTL %d MINIMUM %d, want %d and %d", zone, soa.Hdr.Ttl, soa.Minttl, tc.soaTTL, tc.minimum)
				}
				if neg.Hdr.Ttl != tc.negTTL || neg.Minttl != tc.minimum {
					t.Errorf("%s: negative SOA TTL %d MINIMUM %d, want %d and %d", zone, neg.Hdr.Ttl, neg.Minttl, tc.negTTL, tc.minimum)
				}
				// Apart from the TTL, the one SOA of the zone.
				same := *neg
				same.Hdr.Ttl = soa.Hdr.Ttl
				if same.String() != soa.String() {
					t.Errorf("%s: negative SOA %v differs from the SOA %v beyond its TTL", zone, neg, soa)
				}
				if (neg == soa) != tc.oneRecordForBoth {
					t.Errorf("%s: one record for both is %v, want %v", zone, neg == soa, tc.oneRecordForBoth)
				}
			}
		})
	}
}
