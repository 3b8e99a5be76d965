package kubetree

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// ptrIndex answers the reverse zones. It maps each address to the services that own it, and counts
// the addresses below each reverse-name prefix, so that the names between a zone's apex and an
// address exist (NODATA) exactly when an address lies below them. The Tree's lock guards it.
type ptrIndex struct {
	zones    []netip.Prefix // the reverse zones' address ranges
	v4       map[[4]byte]ptrRef
	v6       map[[16]byte]ptrRef
	prefixes map[netip.Prefix]int32
}

// ptrRef is one owner of an address: a cluster IP of svc (ep < 0), or endpoint ep of svc's slice.
// Chains are never changed once stored: an update stores a new head, so a reader may follow a chain
// it copied under the lock after letting go of the lock.
type ptrRef struct {
	svc   *svcRecords
	ep    int32
	slice uint16
	next  *ptrRef
}

// IPv6 prefixes are counted down to /64: below that every pod address would add its own entries,
// and a partial name inside a /64 is not something resolvers ask for.
const v6PrefixFloor = 64

func newPTRIndex() *ptrIndex {
	return &ptrIndex{v4: map[[4]byte]ptrRef{}, v6: map[[16]byte]ptrRef{}, prefixes: map[netip.Prefix]int32{}}
}

// add records every address the service owns: its cluster IPs and its endpoints.
func (x *ptrIndex) add(r *svcRecords) {
	x.each(r, func(addr netip.Addr, ref ptrRef) {
		cur, ok := x.get(addr)
		if ok {
			head := cur
			ref.next = &head
		} else {
			x.count(addr, 1)
		}
		x.set(addr, ref, true)
	})
}

// remove forgets every address r owns (r is the very records object that add was given).
func (x *ptrIndex) remove(r *svcRecords) {
	x.each(r, func(addr netip.Addr, _ ptrRef) {
		cur, ok := x.get(addr)
		if !ok {
			return
		}
		var kept []ptrRef
		for p := &cur; p != nil; p = p.next {
			if p.svc != r {
				kept = append(kept, *p)
			}
		}
		if len(kept) == 0 {
			x.set(addr, ptrRef{}, false)
			x.count(addr, -1)
			return
		}
		// kept holds fresh copies: linking them changes nothing a reader may hold.
		for i := range len(kept) - 1 {
			kept[i].next = &kept[i+1]
		}
		kept[len(kept)-1].next = nil
		x.set(addr, kept[0], true)
	})
}

// each calls f with every address r owns that lies in a reverse zone, once per owning entry.
func (x *ptrIndex) each(r *svcRecords, f func(netip.Addr, ptrRef)) {
	for _, ip := range r.ips {
		if x.inZone(ip) {
			f(ip, ptrRef{svc: r, ep: -1})
		}
	}
	for si, sl := range r.slices {
		for ei := range sl.Endpoints {
			if ip := sl.Endpoints[ei].Addr; x.inZone(ip) {
				f(ip, ptrRef{svc: r, ep: int32(ei), slice: uint16(si)})
			}
		}
	}
}

func (x *ptrIndex) inZone(ip netip.Addr) bool {
	for _, p := range x.zones {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (x *ptrIndex) get(ip netip.Addr) (ptrRef, bool) {
	if ip.Is4() {
		r, ok := x.v4[ip.As4()]
		return r, ok
	}
	r, ok := x.v6[ip.As16()]
	return r, ok
}

func (x *ptrIndex) set(ip netip.Addr, ref ptrRef, keep bool) {
	switch {
	case ip.Is4() && keep:
		x.v4[ip.As4()] = ref
	case ip.Is4():
		delete(x.v4, ip.As4())
	case keep:
		x.v6[ip.As16()] = ref
	default:
		delete(x.v6, ip.As16())
	}
}

// count adds delta to every prefix between a reverse name's apex and the address.
func (x *ptrIndex) count(ip netip.Addr, delta int32) {
	step, top := 8, 32
	if ip.Is6() {
		step, top = 4, v6PrefixFloor
	}
	for bits := step; bits <= top && bits < ip.BitLen(); bits += step {
		p, _ := ip.Prefix(bits)
		if x.prefixes[p] += delta; x.prefixes[p] <= 0 {
			delete(x.prefixes, p)
		}
	}
}

// lookup resolves a name below a reverse zone's apex.
func (x *ptrIndex) lookup(qname string) (found, bool) {
	ip, bits, ok := parseReverse(qname)
	if !ok {
		return found{}, false
	}
	if bits == ip.BitLen() {
		ref, ok := x.get(ip)
		return found{ptr: ref}, ok
	}
	p, _ := ip.Prefix(bits)
	return found{}, x.prefixes[p] > 0
}

// ptrNames returns the names an address points at: the service whose cluster IP it is, else every
// endpoint name with that address, sorted and without repeats.
func ptrNames(ref ptrRef) []string {
	var clusterIPs, endpoints []string
	for p := &ref; p != nil; p = p.next {
		if p.ep < 0 {
			clusterIPs = append(clusterIPs, p.svc.name)
			continue
		}
		e := &p.svc.slices[p.slice].Endpoints[p.ep]
		endpoints = append(endpoints, e.label()+"."+p.svc.name)
	}
	names := endpoints
	if len(clusterIPs) > 0 {
		names = clusterIPs
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// parseReverse reads an in-addr.arpa or ip6.arpa name, in any case, into the address it names and
// how many leading bits of it the name gives (32 or 128 for a whole address). It does not allocate.
func parseReverse(name string) (ip netip.Addr, bits int, ok bool) {
	lower := func(suffix string) bool {
		return len(name) >= len(suffix) && equalFoldASCII(name[len(name)-len(suffix):], suffix)
	}
	switch {
	case lower(".in-addr.arpa."):
		return parseReverse4(name[:len(name)-len(".in-addr.arpa.")])
	case lower(".ip6.arpa."):
		return parseReverse6(name[:len(name)-len(".ip6.arpa.")])
	}
	return netip.Addr{}, 0, false
}

func parseReverse4(labels string) (netip.Addr, int, bool) {
	var octets [4]byte
	n := 0
	for end := len(labels); end > 0; n++ {
		start := strings.LastIndexByte(labels[:end], '.') + 1
		label := labels[start:end]
		if n == 4 || label == "" || len(label) > 3 || (len(label) > 1 && label[0] == '0') {
			return netip.Addr{}, 0, false
		}
		v := 0
		for i := 0; i < len(label); i++ {
			if label[i] < '0' || label[i] > '9' {
				return netip.Addr{}, 0, false
			}
			v = v*10 + int(label[i]-'0')
		}
		if v > 255 {
			return netip.Addr{}, 0, false
		}
		octets[n] = byte(v)
		end = start - 1
	}
	return netip.AddrFrom4(octets), 8 * n, true
}

func parseReverse6(labels string) (netip.Addr, int, bool) {
	var b [16]byte
	n := 0
	for end := len(labels); end > 0; n++ {
		start := end - 1
		if n == 32 || (start > 0 && labels[start-1] != '.') {
			return netip.Addr{}, 0, false
		}
		v, ok := hexNibble(labels[start])
		if !ok {
			return netip.Addr{}, 0, false
		}
		if n%2 == 0 {
			b[n/2] = v << 4
		} else {
			b[n/2] |= v
		}
		end = start - 1
	}
	return netip.AddrFrom16(b), 4 * n, true
}

func hexNibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// reversePrefix is the address range a reverse zone covers; ok is false for a forward zone.
func reversePrefix(zone string) (netip.Prefix, bool) {
	switch zone {
	case "in-addr.arpa.":
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), true
	case "ip6.arpa.":
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true
	}
	ip, bits, ok := parseReverse(zone)
	if !ok {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(ip, bits), true
}

// reverseName is the in-addr.arpa or ip6.arpa name of addr.
func reverseName(addr netip.Addr) string {
	name, _ := dns.ReverseAddr(addr.String())
	return name
}
