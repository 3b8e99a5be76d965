package records

import (
	"math/bits"
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
	mu    sync.RWMutex
	zones []netip.Prefix // the reverse zones' address ranges
	// v4 holds the IPv4 addresses by /24 (pod CIDRs are /24s or larger, so a block holds a node's
	// pods or more); v6 an entry an address.
	v4 map[[3]byte]*v4Block
	// underfull are the blocks to shrink or take away once a change is done (settle).
	underfull [][3]byte
	v6        map[[16]byte]ptrLoc
	more      map[netip.Addr][]ptrLoc
	prefixes  map[netip.Prefix]int32
	svcs      []*ServiceSet // by number; nil where free
	free      []uint32
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

// v4Block is the first owners of the IPv4 addresses of one /24 that have one: a bit per address,
// and the owners in address order. A map entry per address took 25 bytes at 1,000,000 endpoints
// (12 of key and value, the rest the map's own room to grow); a block takes 8 an address and 64 a
// block.
type v4Block struct {
	has  [4]uint64 // bit i: the address ending in i has an owner
	locs []ptrLoc
	// shrink says the block is in the index's list of blocks to shrink or take away once the
	// change at hand is done (it fits in the block's size class).
	shrink bool
}

// at returns where the owner of the address ending in last is (or would go) in locs, and
// whether it has one.
func (b *v4Block) at(last byte) (int, bool) {
	word, bit := last>>6, uint64(1)<<(last&63)
	n := bits.OnesCount64(b.has[word] & (bit - 1))
	for _, w := range b.has[:word] {
		n += bits.OnesCount64(w)
	}
	return n, b.has[word]&bit != 0
}

// put sets the owner of the address ending in last.
func (b *v4Block) put(last byte, loc ptrLoc) {
	i, ok := b.at(last)
	if ok {
		b.locs[i] = loc
		return
	}
	if len(b.locs) == cap(b.locs) {
		// A quarter more rather than twice as much: most blocks stay at the size a node's pods
		// make them. Grown from nil, the capacity is what the allocation's size class holds.
		grown := slices.Grow([]ptrLoc(nil), min(256, len(b.locs)+len(b.locs)/4+1))
		b.locs = append(grown, b.locs...)
	}
	b.locs = slices.Insert(b.locs, i, loc)
	b.has[last>>6] |= 1 << (last & 63)
}

// drop takes the owner of the address ending in last away, and reports whether the block now
// holds much less than it has room for: the index shrinks it (or takes it away) once the change at
// hand is done, as a service's new addresses may fill it again (a service rebuilt takes all of
// its addresses away, then puts them back).
func (b *v4Block) drop(last byte) (underfull bool) {
	if i, ok := b.at(last); ok {
		b.locs = slices.Delete(b.locs, i, i+1)
		b.has[last>>6] &^= 1 << (last & 63)
	}
	return len(b.locs) < cap(b.locs)/4 || len(b.locs) == 0
}

// settle shrinks the blocks drop left underfull, or takes them away when empty.
func (x *ReverseIndex) settle() {
	for _, key := range x.underfull {
		switch b := x.v4[key]; {
		case b == nil:
		case len(b.locs) == 0:
			delete(x.v4, key)
		case len(b.locs) < cap(b.locs)/4:
			b.locs = slices.Clone(b.locs)
			fallthrough
		default:
			b.shrink = false
		}
	}
	x.underfull = x.underfull[:0]
	if cap(x.underfull) > 1024 {
		x.underfull = nil
	}
}

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
	x := &ReverseIndex{v4: map[[3]byte]*v4Block{}, v6: map[[16]byte]ptrLoc{}, more: map[netip.Addr][]ptrLoc{},
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
	defer x.settle()
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
		a := ip.As4()
		b := x.v4[[3]byte(a[:3])]
		if b == nil {
			return ptrLoc{}, false
		}
		if i, ok := b.at(a[3]); ok {
			return b.locs[i], true
		}
		return ptrLoc{}, false
	}
	l, ok := x.v6[ip.As16()]
	return l, ok
}

func (x *ReverseIndex) set(ip netip.Addr, loc ptrLoc, keep bool) {
	if ip.Is4() {
		x.set4(ip.As4(), loc, keep)
		return
	}
	switch {
	case keep:
		x.v6[ip.As16()] = loc
	default:
		delete(x.v6, ip.As16())
	}
}

func (x *ReverseIndex) set4(a [4]byte, loc ptrLoc, keep bool) {
	block := [3]byte(a[:3])
	b := x.v4[block]
	switch {
	case keep && b == nil:
		b = &v4Block{}
		x.v4[block] = b
		fallthrough
	case keep:
		b.put(a[3], loc)
	case b != nil && b.drop(a[3]) && !b.shrink:
		b.shrink = true
		x.underfull = append(x.underfull, block)
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
	v4 := 0
	for _, b := range x.v4 {
		v4 += len(b.locs)
	}
	return [3]int{v4, len(x.v6), len(x.prefixes)}
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
