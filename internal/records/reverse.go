package records

import (
	"net/netip"
	"slices"
	"sync"
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

// Keep returns the owners whose service keep accepts (given its namespace and name), and reports
// whether it left any out: with isolate, an address's PTR names only what the client may resolve.
func (o PTROwners) Keep(keep func(namespace, service string) bool) (_ PTROwners, dropped bool) {
	var out PTROwners
	for _, w := range append([]ptrOwner{o.first}, o.more...) {
		if w.svc == nil {
			continue
		}
		if !keep(w.svc.namespaceAndName()) {
			dropped = true
			continue
		}
		if out.first.svc == nil {
			out.first = w
		} else {
			out.more = append(out.more, w)
		}
	}
	return out, dropped
}

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
