package records

import (
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// ReverseIndex answers the names below the reverse zones' apexes. It maps each address to the
// services that own it, and counts the addresses below each reverse-name prefix, so that the names
// between a zone's apex and an address exist (NODATA) exactly when an address lies below them.
//
// It holds an entry for every endpoint in the cluster, so an entry is 8 bytes: the owner's number
// in svcs and where the address is in its records. An address with several owners (a pod behind two
// services) keeps the others in more.
type ReverseIndex struct {
	mu       sync.RWMutex
	zones    []netip.Prefix // the reverse zones' address ranges
	v4       map[[4]byte]ptrLoc
	v6       map[[16]byte]ptrLoc
	more     map[netip.Addr][]ptrLoc
	prefixes map[netip.Prefix]int32
	svcs     []*ServiceSet // by number; nil where free
	free     []uint32
}

// ptrLoc is one owner of an address: service svc's cluster IP (at == clusterIPAt), or the endpoint
// address at position at among all of its records' endpoint addresses, counted across the slices.
// (Not a slice and an index packed 16:16: a slice may hold 1,000 endpoints of 100 addresses each,
// more than 16 bits can count, and the wrapped index pointed past the slices.)
type ptrLoc struct {
	svc uint32
	at  uint32
}

const clusterIPAt = ^uint32(0)

// ptrOwner is a ptrLoc resolved under the lock, so that its names can be made after it.
type ptrOwner struct {
	svc *ServiceSet
	at  uint32
}

// PTROwners are the owners of one address: first, and any others in more. A name between a
// reverse zone's apex and an address has none (first.svc is nil).
type PTROwners struct {
	first ptrOwner
	more  []ptrOwner
}

// Exists reports whether the owners are an address's: a name between a reverse zone's apex and
// an address has none.
func (o PTROwners) Exists() bool { return o.first.svc != nil }

// IPv6 prefixes are counted down to /64: below that every pod address would add its own entries,
// and a partial name inside a /64 is not something resolvers ask for.
const v6PrefixFloor = 64

// NewReverseIndex returns the index of the reverse zones among zones; nil if there are none.
func NewReverseIndex(zones []string) *ReverseIndex {
	x := &ReverseIndex{v4: map[[4]byte]ptrLoc{}, v6: map[[16]byte]ptrLoc{}, more: map[netip.Addr][]ptrLoc{},
		prefixes: map[netip.Prefix]int32{}}
	for _, z := range zones {
		if p, ok := reversePrefix(z); ok {
			x.zones = append(x.zones, p)
		}
	}
	if len(x.zones) == 0 {
		return nil
	}
	return x
}

// Replace swaps a service's reverse names: old (nil for a new service) for r (nil for a removed
// one). r takes over old's number; it must not be published yet.
func (x *ReverseIndex) Replace(old, r *ServiceSet) {
	x.mu.Lock()
	defer x.mu.Unlock()
	id, known := uint32(0), old != nil
	if known {
		id = old.ptrID
		x.EachAddr(old, func(addr netip.Addr, _ uint32) { x.removeOwner(addr, id) })
	}
	switch {
	case r == nil && known:
		x.svcs[id] = nil
		x.free = append(x.free, id)
		return
	case r == nil:
		return
	case !known && len(x.free) > 0:
		id, x.free = x.free[len(x.free)-1], x.free[:len(x.free)-1]
	case !known:
		id = uint32(len(x.svcs))
		x.svcs = append(x.svcs, nil)
	}
	r.ptrID = id
	x.svcs[id] = r
	x.EachAddr(r, func(addr netip.Addr, at uint32) { x.addOwner(addr, ptrLoc{id, at}) })
}

func (x *ReverseIndex) addOwner(addr netip.Addr, loc ptrLoc) {
	if _, ok := x.loc(addr); ok {
		x.more[addr] = append(x.more[addr], loc)
		return
	}
	x.set(addr, loc, true)
	x.count(addr, 1)
}

func (x *ReverseIndex) removeOwner(addr netip.Addr, id uint32) {
	first, ok := x.loc(addr)
	if !ok {
		return
	}
	rest := slices.DeleteFunc(x.more[addr], func(l ptrLoc) bool { return l.svc == id })
	if first.svc == id {
		if len(rest) == 0 {
			delete(x.more, addr)
			x.set(addr, ptrLoc{}, false)
			x.count(addr, -1)
			return
		}
		first, rest = rest[0], rest[1:]
		x.set(addr, first, true)
	}
	if len(rest) == 0 {
		delete(x.more, addr)
	} else {
		x.more[addr] = rest
	}
}

// EachAddr calls f with every address r owns that lies in a reverse zone, and where it is in r.
func (x *ReverseIndex) EachAddr(r *ServiceSet, f func(netip.Addr, uint32)) {
	for _, ip := range r.ips {
		if x.covers(ip) {
			f(ip, clusterIPAt)
		}
	}
	at := uint32(0)
	for _, sl := range r.slices {
		for ei := range sl.Len() {
			if ip := sl.Endpoint(ei).Addr; x.covers(ip) {
				f(ip, at)
			}
			at++
		}
	}
}

func (x *ReverseIndex) covers(ip netip.Addr) bool {
	for _, p := range x.zones {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (x *ReverseIndex) loc(ip netip.Addr) (ptrLoc, bool) {
	if ip.Is4() {
		l, ok := x.v4[ip.As4()]
		return l, ok
	}
	l, ok := x.v6[ip.As16()]
	return l, ok
}

func (x *ReverseIndex) set(ip netip.Addr, loc ptrLoc, keep bool) {
	switch {
	case ip.Is4() && keep:
		x.v4[ip.As4()] = loc
	case ip.Is4():
		delete(x.v4, ip.As4())
	case keep:
		x.v6[ip.As16()] = loc
	default:
		delete(x.v6, ip.As16())
	}
}

// count adds delta to every prefix between a reverse name's apex and the address.
func (x *ReverseIndex) count(ip netip.Addr, delta int32) {
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

// Owners resolves a name below a reverse zone's apex, and reports whether it exists. The owners
// are resolved here, under the lock; only an address with several owners allocates.
func (x *ReverseIndex) Owners(qname string) (o PTROwners, exists bool) {
	ip, bits, ok := ParseReverse(qname)
	if !ok {
		return o, false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if bits < ip.BitLen() {
		p, _ := ip.Prefix(bits)
		return o, x.prefixes[p] > 0
	}
	first, ok := x.loc(ip)
	if !ok {
		return o, false
	}
	o.first = x.owner(first)
	for _, l := range x.more[ip] {
		o.more = append(o.more, x.owner(l))
	}
	return o, true
}

// Sizes are the index's entry counts (IPv4, IPv6, prefixes), for tests that check removal.
func (x *ReverseIndex) Sizes() [3]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return [3]int{len(x.v4), len(x.v6), len(x.prefixes)}
}

func (x *ReverseIndex) owner(l ptrLoc) ptrOwner { return ptrOwner{svc: x.svcs[l.svc], at: l.at} }

// ptrNames returns the names an address points at: the service whose cluster IP it is, else every
// endpoint name with that address, sorted and without repeats.
func ptrNames(owners PTROwners) []string {
	var clusterIPs, endpoints []string
	for _, o := range append([]ptrOwner{owners.first}, owners.more...) {
		if o.at == clusterIPAt {
			clusterIPs = append(clusterIPs, o.svc.name)
			continue
		}
		e := o.svc.endpointAt(o.at)
		endpoints = append(endpoints, labelOf(e)+"."+o.svc.name)
	}
	names := endpoints
	if len(clusterIPs) > 0 {
		names = clusterIPs
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ParseReverse reads an in-addr.arpa or ip6.arpa name, in any case, into the address it names and
// how many leading bits of it the name gives (32 or 128 for a whole address). It does not allocate.
func ParseReverse(name string) (ip netip.Addr, bits int, ok bool) {
	lower := func(suffix string) bool {
		return len(name) >= len(suffix) && tree.EqualFold(name[len(name)-len(suffix):], suffix)
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
	ip, bits, ok := ParseReverse(zone)
	if !ok {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(ip, bits), true
}

// PTR returns the PTR records of an address's owners, owned by owner.
func (b *Builder) PTR(owner string, owners PTROwners) []dns.RR {
	return b.PTRRecords(owner, ptrNames(owners))
}

// PTRRecords returns PTR records owned by owner that point at names.
func (b *Builder) PTRRecords(owner string, names []string) []dns.RR {
	out := make([]dns.RR, 0, len(names))
	for _, name := range names {
		out = append(out, &dns.PTR{Hdr: hdr(owner, dns.TypePTR, b.TTL), Ptr: name})
	}
	return out
}

// endpointAt returns the endpoint address at position at, counted across the slices, as the
// reverse index counts them.
func (r *ServiceSet) endpointAt(at uint32) object.Endpoint {
	i := int(at)
	for _, sl := range r.slices {
		if i < sl.Len() {
			return sl.Endpoint(i)
		}
		i -= sl.Len()
	}
	panic("kubetree: PTR entry past its service's endpoints")
}

// reverseZone is a reverse zone we serve, with its address range.
type reverseZone struct {
	name   string
	prefix netip.Prefix
}

// ReverseZones are the reverse zones of a server block, with their address ranges.
type ReverseZones []reverseZone

// ReverseZonesOf returns the reverse zones among zones.
func ReverseZonesOf(zones []string) ReverseZones {
	var out ReverseZones
	for _, z := range zones {
		if p, ok := reversePrefix(z); ok && tree.IsReverseZone(z) {
			out = append(out, reverseZone{z, p})
		}
	}
	return out
}

// ZoneOf returns the longest reverse zone that holds addr's name, or "".
func (l ReverseZones) ZoneOf(addr netip.Addr) string {
	best, bits := "", -1
	for _, z := range l {
		if z.prefix.Contains(addr) && z.prefix.Bits() > bits {
			best, bits = z.name, z.prefix.Bits()
		}
	}
	return best
}

// ReverseName is addr's name in in-addr.arpa or ip6.arpa.
func ReverseName(addr netip.Addr) string {
	name, _ := dns.ReverseAddr(addr.String())
	return name
}

// Names returns the names a PTR query for addr answers, nil if none.
func (x *ReverseIndex) Names(addr netip.Addr) []string {
	x.mu.RLock()
	first, ok := x.loc(addr)
	if !ok {
		x.mu.RUnlock()
		return nil
	}
	o := PTROwners{first: x.owner(first)}
	for _, l := range x.more[addr] {
		o.more = append(o.more, x.owner(l))
	}
	x.mu.RUnlock()
	return ptrNames(o)
}
