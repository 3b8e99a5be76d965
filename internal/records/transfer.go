package records

import (
	"errors"
	"net/netip"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// SerialBefore reports whether serial a is older than b in RFC 1982 serial number arithmetic.
func SerialBefore(a, b uint32) bool { return a != b && int32(b-a) > 0 }

// TransferRecords appends the records a zone transfer carries for set: the records of every name
// the set answers, except the SOA, which the transfer sends first and last.
//
// The apex carries its NS records and their targets' addresses, under the names the NS records
// give (where they are in the zone), as the in-tree plugin's transfer does and as NS answers
// carry them: ns.dns.<zone>, which answers the same addresses, is not carried on its own, or a
// transfer would name a nameserver the NS records do not.
//
// A service carries what the in-tree plugin's transfer carries: its addresses, its SRV records at
// its own name (ClusterIP) and at _<port>._<proto>, and a headless service's endpoint names.
func TransferRecords(dst []dns.RR, set tree.Set) []dns.RR {
	switch s := set.(type) {
	case *FixedSet:
		if s.nameserverAlias {
			break
		}
		for _, rrs := range [][]dns.RR{s.ns, s.a, s.aaaa, s.txt} {
			dst = AppendCopies(dst, rrs, "")
		}
		if len(s.SOA) > 0 {
			zone := s.SOA[0].Header().Name
			for _, rr := range s.Glue {
				if dns.IsSubDomain(zone, rr.Header().Name) {
					dst = append(dst, dns.Copy(rr))
				}
			}
		}
	case *ServiceSet:
		dst = s.appendTransfer(dst)
	}
	return dst
}

// TransferSize is about how many records a zone transfer carries for set (at least as many),
// counted without making them: a headless service's endpoints each have two addresses and an SRV
// record per port of their slice.
func TransferSize(set tree.Set) int {
	r, ok := set.(*ServiceSet)
	if !ok {
		return 0
	}
	n := len(r.ips) * (1 + len(r.ports))
	for _, sl := range r.slices {
		n += sl.Len() * (2 + len(sl.Ports))
	}
	return n
}

func (r *ServiceSet) appendTransfer(dst []dns.RR) []dns.RR {
	if r.kind == object.ExternalName {
		return append(dst, &dns.CNAME{Hdr: hdr(r.name, dns.TypeCNAME, r.ttl), Target: r.target()})
	}
	dst = r.addresses(dst, dns.TypeA, r.name, everything())
	dst = r.addresses(dst, dns.TypeAAAA, r.name, everything())
	if r.kind == object.ClusterIP {
		dst, _ = r.srv(dst, nil, "", "", r.name, r.name, nil, everything())
	}
	type named struct{ name, protocol string }
	seen := map[named]bool{}
	r.eachPort(func(p object.Port) bool {
		if n := (named{p.Name, p.Protocol}); !seen[n] {
			seen[n] = true
			dst, _ = r.srv(dst, nil, p.Name, p.Protocol, "_"+p.Name+"._"+p.Protocol+"."+r.name, r.name, nil, everything())
		}
		return true
	})
	if r.kind != object.Headless {
		return dst
	}
	return r.targetAddresses(dst, r.endpointLabels(), r.name, nil, everything())
}

// ZonePTRs makes the PTR records of the reverse zone zone from the services' records: every
// cluster IP and endpoint address in the zone (and not in a longer reverse zone of reverse),
// pointing where a PTR query for it would.
func (b *Builder) ZonePTRs(zone string, reverse ReverseZones, sets []*ServiceSet) []dns.RR {
	owners := map[netip.Addr]*PTROwners{}
	own := func(addr netip.Addr, o ptrOwner) {
		if reverse.ZoneOf(addr) != zone {
			return
		}
		if p := owners[addr]; p != nil {
			p.more = append(p.more, o)
			return
		}
		owners[addr] = &PTROwners{first: o}
	}
	for _, r := range sets {
		for _, ip := range r.ips {
			own(ip, ptrOwner{r, clusterIPAt})
		}
		at := uint32(0)
		for _, sl := range r.slices {
			for i := range sl.Len() {
				own(sl.Endpoint(i).Addr, ptrOwner{r, at})
				at++
			}
		}
	}
	var out []dns.RR
	for addr, o := range owners {
		out = append(out, b.PTR(ReverseName(addr), *o)...)
	}
	return out
}

// ErrNotSynced refuses a zone transfer (SERVFAIL) until the first full sync with the API server: a
// secondary would serve the part listed so far as the whole zone.
var ErrNotSynced = errors.New("not synced with the API server yet: no zone transfer")
