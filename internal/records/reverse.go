package records

import (
	"math/bits"
	"net/netip"
	"slices"
	"sync"
)

// ReverseIndex answers the names below the reverse zones' apexes. It maps each address to the
// services that own it, and counts what lies below each reverse-name prefix (IPv4 /24 blocks that
// hold an address, IPv6 addresses down to /64), so that a name between a zone's apex and an
// address exists (NODATA) when an address lies below it; an IPv6 name longer than /64 but shorter
// than an address does not (v6PrefixFloor).
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
	switch {
	case old != nil && r != nil:
		x.update(old, r)
		return
	case old != nil:
		id := old.ptrID
		x.EachAddr(old, func(addr netip.Addr, at uint32) { x.removeOwner(addr, ptrLoc{id, at}) })
		x.svcs[id] = nil
		x.free = append(x.free, id)
		return
	case r == nil:
		return
	}
	id := uint32(len(x.svcs))
	if len(x.free) > 0 {
		id, x.free = x.free[len(x.free)-1], x.free[:len(x.free)-1]
	} else {
		x.svcs = append(x.svcs, nil)
	}
	r.ptrID = id
	x.svcs[id] = r
	x.EachAddr(r, func(addr netip.Addr, at uint32) { x.addOwner(addr, ptrLoc{id, at}) })
}

// update gives a service's number to its new set r, and changes only the entries that differ
// between old and r, address by address in their order: an update usually moves one endpoint of
// many, and taking every address out and putting it back cost a tenth of the update's CPU.
func (x *ReverseIndex) update(old, r *ServiceSet) {
	id := old.ptrID
	r.ptrID = id
	x.svcs[id] = r
	was, is := x.addrs(old), x.addrs(r)
	for {
		oldAddr, oldAt, hadOne := was.next()
		addr, at, hasOne := is.next()
		switch {
		case !hadOne && !hasOne:
			return
		case hadOne && hasOne && oldAddr == addr:
			if oldAt != at {
				x.moveOwner(addr, ptrLoc{id, oldAt}, ptrLoc{id, at})
			}
			continue
		}
		// The index holds a multiset of owners an address, so taking one out and putting another
		// in, step by step, leaves what old's and r's entries make whatever the order.
		if hadOne {
			x.removeOwner(oldAddr, ptrLoc{id, oldAt})
		}
		if hasOne {
			x.addOwner(addr, ptrLoc{id, at})
		}
	}
}

// setAddrs walks the addresses of a set that lie in a reverse zone, in EachAddr's order.
type setAddrs struct {
	x                *ReverseIndex
	r                *ServiceSet
	ip, slice, inner int
	at               uint32
}

func (x *ReverseIndex) addrs(r *ServiceSet) setAddrs { return setAddrs{x: x, r: r} }

// next returns the next address and where it is in the set; ok is false past the last.
func (c *setAddrs) next() (addr netip.Addr, at uint32, ok bool) {
	for c.ip < len(c.r.ips) {
		addr = c.r.ips[c.ip]
		c.ip++
		if c.x.covers(addr) {
			return addr, clusterIPAt, true
		}
	}
	for c.slice < len(c.r.slices) {
		sl := c.r.slices[c.slice]
		for c.inner < sl.Len() {
			addr, at = sl.Addr(c.inner), c.at
			c.inner++
			c.at++
			if c.x.covers(addr) {
				return addr, at, true
			}
		}
		c.slice, c.inner = c.slice+1, 0
	}
	return netip.Addr{}, 0, false
}

func (x *ReverseIndex) addOwner(addr netip.Addr, loc ptrLoc) {
	if _, ok := x.loc(addr); ok {
		x.more[addr] = append(x.more[addr], loc)
		return
	}
	x.set(addr, loc, true)
	x.count(addr, 1)
}

// removeOwner takes one owner entry of an address away.
func (x *ReverseIndex) removeOwner(addr netip.Addr, loc ptrLoc) {
	first, ok := x.loc(addr)
	if !ok {
		return
	}
	more := x.more[addr]
	switch i := slices.Index(more, loc); {
	case first == loc && len(more) == 0:
		x.set(addr, ptrLoc{}, false)
		x.count(addr, -1)
		return
	case first == loc:
		x.set(addr, more[0], true)
		more = more[1:]
	case i >= 0:
		more = slices.Delete(more, i, i+1)
	}
	if len(more) == 0 {
		delete(x.more, addr)
	} else {
		x.more[addr] = more
	}
}

// moveOwner changes where one owner entry of an address points.
func (x *ReverseIndex) moveOwner(addr netip.Addr, from, to ptrLoc) {
	if first, ok := x.loc(addr); ok && first == from {
		x.set(addr, to, true)
		return
	}
	if more := x.more[addr]; len(more) > 0 {
		if i := slices.Index(more, from); i >= 0 {
			more[i] = to
		}
	}
}

// EachAddr calls f with every address r owns that lies in a reverse zone, and where it is in r.
func (x *ReverseIndex) EachAddr(r *ServiceSet, f func(netip.Addr, uint32)) {
	for c := x.addrs(r); ; {
		addr, at, ok := c.next()
		if !ok {
			return
		}
		f(addr, at)
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
		if len(b.locs) == 0 {
			x.countBlock(block, 1)
		}
		b.put(a[3], loc)
	case b != nil:
		had := len(b.locs)
		underfull := b.drop(a[3])
		if had > 0 && len(b.locs) == 0 {
			x.countBlock(block, -1)
		}
		if underfull && !b.shrink {
			b.shrink = true
			x.underfull = append(x.underfull, block)
		}
	}
}

// countBlock adds delta to the /8 and /16 above an IPv4 block that gains its first address or
// loses its last: an IPv4 prefix is counted by the blocks below it that hold an address, and a /24
// is its block, so a change of one address touches no count unless its block empties or fills.
func (x *ReverseIndex) countBlock(block [3]byte, delta int32) {
	for _, bits := range []int{8, 16} {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{block[0], block[1], block[2]}), bits).Masked()
		if x.prefixes[p] += delta; x.prefixes[p] <= 0 {
			delete(x.prefixes, p)
		}
	}
}

// count adds delta to every IPv6 prefix between a reverse name's apex and the address (IPv4
// prefixes are counted by block, countBlock).
func (x *ReverseIndex) count(ip netip.Addr, delta int32) {
	if ip.Is4() {
		return
	}
	for bits := 4; bits <= v6PrefixFloor; bits += 4 {
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
		if ip.Is4() && bits == 24 {
			a := ip.As4()
			b := x.v4[[3]byte(a[:3])]
			return o, b != nil && len(b.locs) > 0
		}
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
