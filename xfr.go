package kubetree

import (
	"errors"
	"net/netip"

	"github.com/coredns/coredns/plugin/transfer"

	"github.com/miekg/dns"
)

// Transfer implements transfer.Transferer: the transfer plugin, when it is in the server block,
// hands AXFR and IXFR of the zones we serve here, after its own ACL (to) has allowed them.
//
// A transfer is a snapshot: the sets the zone holds, and the SOA serial that names them, are taken
// together under the applier's lock (pointers only: record sets are never changed once published),
// and the records are made from them afterwards, while the cluster goes on changing.
func (k *Kubetree) Transfer(zone string, serial uint32) (<-chan []dns.RR, error) {
	i := -1
	for j, z := range k.zones {
		if z.name == zone {
			i = j
		}
	}
	if i < 0 || k.applier == nil {
		return nil, transfer.ErrNotAuthoritative
	}
	if !k.synced.Load() {
		// A secondary would serve the part listed so far as the whole zone.
		return nil, errNotSynced
	}
	z := k.zones[i]
	snap := k.applier.snapshot(z, serial)
	ch := make(chan []dns.RR)
	go func() {
		defer close(ch)
		soa := []dns.RR{snap.soa}
		ch <- soa
		switch {
		case snap.current:
			return // a single SOA: the secondary is up to date
		case snap.entries != nil:
			old := dns.Copy(snap.soa).(*dns.SOA)
			old.Serial = serial
			deleted, added := condense(snap.entries, z.name)
			ch <- []dns.RR{old}
			ch <- deleted
			ch <- []dns.RR{dns.Copy(snap.soa)}
			ch <- added
		case z.reverse:
			for _, s := range snap.sets[:1] { // the apex
				ch <- transferRecords(nil, s)
			}
			ch <- k.zonePTRs(z.name, snap.sets[1:])
		default:
			for _, s := range snap.sets {
				if rrs := transferRecords(nil, s); len(rrs) > 0 {
					ch <- rrs
				}
			}
		}
		ch <- []dns.RR{dns.Copy(snap.soa)}
	}()
	return ch, nil
}

// errNotSynced refuses a transfer (SERVFAIL) until the first full sync with the API server.
var errNotSynced = errors.New("not synced with the API server yet: no zone transfer")

// xfrSnapshot is what one transfer sends: the SOA, and either nothing more (the secondary is
// current), the journal entries since its serial (IXFR), or every set of the zone (AXFR; in a
// reverse zone the apex, then the first forward zone's services, whose addresses the PTRs are).
type xfrSnapshot struct {
	soa     *dns.SOA
	current bool
	entries []*journalEntry
	sets    []recordSet
}

// snapshot takes a transfer's snapshot of z for a secondary at serial (0: AXFR). Changes whose
// serial has not moved yet get one now, so that the snapshot is named by its own serial.
func (a *applier) snapshot(z zone, serial uint32) xfrSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settle()
	apex := a.tree.get(z.name, z.name).(*rrsets)
	s := xfrSnapshot{soa: dns.Copy(apex.SOA[0]).(*dns.SOA)}
	if serial != 0 {
		if !serialBefore(serial, s.soa.Serial) {
			s.current = true
			return s
		}
		if entries := a.journal.since(serial); len(entries) > 0 && entries[len(entries)-1].to == s.soa.Serial {
			s.entries = entries
			return s
		}
	}
	if !z.reverse {
		a.tree.each(z.name, func(set recordSet) { s.sets = append(s.sets, set) })
		return s
	}
	s.sets = append(s.sets, apex)
	a.tree.each(a.forward[0], func(set recordSet) {
		if r, ok := set.(*svcRecords); ok {
			s.sets = append(s.sets, r)
		}
	})
	return s
}

// serialBefore reports whether serial a is older than b in RFC 1982 serial number arithmetic.
func serialBefore(a, b uint32) bool { return a != b && int32(b-a) > 0 }

// transferRecords appends the records a zone transfer carries for set: the records of every name
// the set answers, except the SOA, which the transfer sends first and last.
//
// A service carries what the in-tree plugin's transfer carries: its addresses, its SRV records at
// its own name (ClusterIP) and at _<port>._<proto>, and a headless service's endpoint names.
func transferRecords(dst []dns.RR, set recordSet) []dns.RR {
	switch s := set.(type) {
	case *rrsets:
		for _, rrs := range [][]dns.RR{s.NS, s.A, s.AAAA, s.TXT} {
			dst = appendCopies(dst, rrs, "")
		}
	case *svcRecords:
		dst = s.transfer(dst)
	}
	return dst
}

func (r *svcRecords) transfer(dst []dns.RR) []dns.RR {
	if r.kind == externalName {
		return append(dst, &dns.CNAME{Hdr: hdr(r.name, dns.TypeCNAME, r.ttl), Target: r.cname})
	}
	dst = r.addresses(dst, dns.TypeA, r.name)
	dst = r.addresses(dst, dns.TypeAAAA, r.name)
	if r.kind == clusterIP {
		dst, _ = r.srv(dst, nil, "", "", r.name, nil)
	}
	type named struct{ name, protocol string }
	seen := map[named]bool{}
	r.eachPort(func(p port) bool {
		if n := (named{p.Name, p.Protocol}); !seen[n] {
			seen[n] = true
			dst, _ = r.srv(dst, nil, p.Name, p.Protocol, "_"+p.Name+"._"+p.Protocol+"."+r.name, nil)
		}
		return true
	})
	if r.kind != headless {
		return dst
	}
	var labels []string
	known := map[string]bool{}
	for _, sl := range r.slices {
		for i := range sl.Len() {
			if l := sl.endpoint(i).label(); !known[l] {
				known[l] = true
				labels = append(labels, l)
			}
		}
	}
	return r.targetAddresses(dst, labels, nil)
}

// zonePTRs makes the PTR records of the reverse zone zone from the services' records: every
// cluster IP and endpoint address in the zone (and not in a longer reverse zone we also serve),
// pointing where a PTR query for it would.
func (k *Kubetree) zonePTRs(zone string, sets []recordSet) []dns.RR {
	reverse := reverseZones(k.zones)
	owners := map[netip.Addr]*ptrOwners{}
	own := func(addr netip.Addr, o ptrOwner) {
		if reverse.of(addr) != zone {
			return
		}
		if p := owners[addr]; p != nil {
			p.more = append(p.more, o)
			return
		}
		owners[addr] = &ptrOwners{first: o}
	}
	for _, set := range sets {
		r := set.(*svcRecords)
		for _, ip := range r.ips {
			own(ip, ptrOwner{r, clusterIPAt})
		}
		at := uint32(0)
		for _, sl := range r.slices {
			for i := range sl.Len() {
				own(sl.endpoint(i).Addr, ptrOwner{r, at})
				at++
			}
		}
	}
	var out []dns.RR
	for addr, o := range owners {
		out = append(out, k.build.ptr(reverseName(addr), *o)...)
	}
	return out
}

// reverseZone is a reverse zone we serve, with its address range.
type reverseZone struct {
	name   string
	prefix netip.Prefix
}

type reverseZoneList []reverseZone

func reverseZones(zones []zone) reverseZoneList {
	var out reverseZoneList
	for _, z := range zones {
		if p, ok := reversePrefix(z.name); ok && z.reverse {
			out = append(out, reverseZone{z.name, p})
		}
	}
	return out
}

// of returns the longest reverse zone that holds addr's name, or "".
func (l reverseZoneList) of(addr netip.Addr) string {
	best, bits := "", -1
	for _, z := range l {
		if z.prefix.Contains(addr) && z.prefix.Bits() > bits {
			best, bits = z.name, z.prefix.Bits()
		}
	}
	return best
}

// reverseName is addr's name in in-addr.arpa or ip6.arpa.
func reverseName(addr netip.Addr) string {
	name, _ := dns.ReverseAddr(addr.String())
	return name
}

// names returns the names a PTR query for addr answers, nil if none.
func (x *reverseIndex) names(addr netip.Addr) []string {
	x.mu.RLock()
	first, ok := x.get(addr)
	if !ok {
		x.mu.RUnlock()
		return nil
	}
	o := ptrOwners{first: x.owner(first)}
	for _, l := range x.more[addr] {
		o.more = append(o.more, x.owner(l))
	}
	x.mu.RUnlock()
	return ptrNames(o)
}

// each calls f with every set published in zone.
func (t *tree) each(zone string, f func(recordSet)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var walk func(*node)
	walk = func(n *node) {
		if n.set != nil {
			f(n.set)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	if apex := t.apexes[zone]; apex != nil {
		walk(apex)
	}
}
