package records

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kubetree/kubetree/internal/object"
)

// ptrLookup states what the reverse index finds at a name: "missing", "ENT", or the PTR targets.
func ptrLookup(x *ReverseIndex, qname string) string {
	o, exists := x.Owners(qname)
	switch {
	case !exists:
		return "missing"
	case o.first.svc == nil:
		return "ENT"
	}
	return "PTR " + strings.Join(ptrNames(o), ",")
}

func TestReverseIndex(t *testing.T) {
	x := NewReverseIndex([]string{"example.org.", "in-addr.arpa.", "8.b.d.0.1.0.0.2.ip6.arpa."})
	db := &ServiceSet{name: "db.prod.svc.example.org.", kind: object.Headless, slices: []*object.EndpointSlice{object.NewEndpointSlice(nil, []object.Endpoint{
		{Addr: netip.MustParseAddr("192.0.2.1"), Hostname: "db-0"}, {Addr: netip.MustParseAddr("2001:db8::1")}})}}
	web := &ServiceSet{name: "web.prod.svc.example.org.", kind: object.ClusterIP, ips: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}
	x.Replace(nil, db)
	in6 := "8.b.d.0.1.0.0.2.ip6.arpa."
	v6 := "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0." + in6
	want := map[string]string{"1.2.0.192.in-addr.arpa.": "PTR db-0.db.prod.svc.example.org.", "2.0.192.in-addr.arpa.": "ENT",
		"0.192.IN-ADDR.arpa.": "ENT", "2.2.0.192.in-addr.arpa.": "missing", "3.0.192.in-addr.arpa.": "missing",
		v6: "PTR 2001-db8--1.db.prod.svc.example.org.", "0.0.0.0." + in6: "ENT", "1.0.0.0." + in6: "missing"}
	for name, w := range want {
		if got := ptrLookup(x, name); got != w {
			t.Errorf("%s: got %q, want %q", name, got, w)
		}
	}
	// A cluster IP's PTR wins over an endpoint's; each owner leaves only its own.
	x.Replace(nil, web)
	if got := ptrLookup(x, "1.2.0.192.in-addr.arpa."); got != "PTR web.prod.svc.example.org." {
		t.Errorf("with a cluster IP: %q", got)
	}
	x.Replace(web, nil)
	if got := ptrLookup(x, "1.2.0.192.in-addr.arpa."); got != "PTR db-0.db.prod.svc.example.org." {
		t.Errorf("cluster IP gone: %q", got)
	}
	x.Replace(db, nil)
	for name := range want {
		if got := ptrLookup(x, name); got != "missing" {
			t.Errorf("%s after every owner left: %q", name, got)
		}
	}
	if x.Sizes() != [3]int{} {
		t.Errorf("entries left after every owner left: %v", x.Sizes())
	}
	if NewReverseIndex([]string{"example.org."}) != nil {
		t.Errorf("an index without reverse zones")
	}
}

// TestV4Block puts and drops owners of addresses of one /24 in random order, beside a map.
func TestV4Block(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var b v4Block
	want := map[byte]ptrLoc{}
	for step := range 5000 {
		last := byte(r.IntN(256))
		if r.IntN(3) == 0 {
			delete(want, last)
			if underfull := b.drop(last); underfull != (len(b.locs) < cap(b.locs)/4 || len(want) == 0) {
				t.Fatalf("step %d: drop says underfull %v with %d of %d left", step, underfull, len(b.locs), cap(b.locs))
			}
		} else {
			loc := ptrLoc{svc: uint32(step), at: uint32(last)}
			want[last] = loc
			b.put(last, loc)
		}
		if len(b.locs) != len(want) {
			t.Fatalf("step %d: %d owners, want %d", step, len(b.locs), len(want))
		}
		for l := range 256 {
			i, ok := b.at(byte(l))
			w, in := want[byte(l)]
			if ok != in || ok && b.locs[i] != w {
				t.Fatalf("step %d: .%d has an owner: %v (at %d), want %v (%v)", step, l, ok, i, in, w)
			}
		}
	}
	if cap(b.locs) > 256 {
		t.Errorf("a block has room for %d owners; a /24 has 256 addresses", cap(b.locs))
	}
}

// TestReverseIndexUpdates changes services at random (endpoints moved, added, taken away, shared
// with other services, dual stack, addresses outside the reverse zones) and checks after each
// change that the index holds what one built afresh from the services as they are now holds.
func TestReverseIndexUpdates(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	zones := []string{"cluster.local.", "0.10.in-addr.arpa.", "8.b.d.0.1.0.0.2.ip6.arpa."}
	addr := func() netip.Addr {
		switch r.IntN(5) {
		case 0:
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(r.IntN(8))})
		case 1:
			return netip.AddrFrom4([4]byte{192, 0, 2, byte(r.IntN(8))}) // outside the zones
		}
		return netip.AddrFrom4([4]byte{10, 0, byte(r.IntN(3)), byte(r.IntN(12))})
	}
	set := func(name string) *ServiceSet {
		s := &ServiceSet{name: name + ".ns.svc.cluster.local.", kind: object.Headless}
		if r.IntN(3) == 0 {
			s.kind, s.ips = object.ClusterIP, []netip.Addr{addr()}
		}
		for range r.IntN(3) {
			var eps []object.Endpoint
			for range r.IntN(6) {
				eps = append(eps, object.Endpoint{Addr: addr()})
			}
			s.slices = append(s.slices, object.NewEndpointSlice(nil, eps))
		}
		return s
	}
	x := NewReverseIndex(zones)
	live := map[string]*ServiceSet{}
	names := []string{"a", "b", "c", "d", "e"}
	for step := range 3000 {
		name := names[r.IntN(len(names))]
		old, now := live[name], set(name)
		if r.IntN(6) == 0 {
			now = nil
			delete(live, name)
		} else {
			live[name] = now
		}
		x.Replace(old, now)
		fresh := NewReverseIndex(zones)
		for _, n := range names {
			if s := live[n]; s != nil {
				fresh.Replace(nil, &ServiceSet{name: s.name, kind: s.kind, ips: s.ips, slices: s.slices})
			}
		}
		if got, want := reverseEntries(x), reverseEntries(fresh); got != want {
			t.Fatalf("step %d, %s: the index holds\n%s\nbuilt afresh it holds\n%s", step, name, got, want)
		}
		// The names between the zone's apex and the addresses exist exactly while an address of
		// a live service lies below them.
		below := map[string]bool{}
		for _, s := range live {
			x.EachAddr(s, func(a netip.Addr, _ uint32) {
				if a.Is4() {
					b := a.As4()
					below[fmt.Sprintf("%d.%d.in-addr.arpa.", b[1], b[0])] = true
					below[fmt.Sprintf("%d.%d.%d.in-addr.arpa.", b[2], b[1], b[0])] = true
				}
			})
		}
		for _, name := range []string{"0.10.in-addr.arpa.", "0.0.10.in-addr.arpa.", "1.0.10.in-addr.arpa.", "2.0.10.in-addr.arpa."} {
			if _, exists := x.Owners(name); exists != below[name] {
				t.Fatalf("step %d: %s exists: %v, want %v", step, name, exists, below[name])
			}
		}
	}
}

// reverseEntries writes out what an index holds: each address with its owners' names and places
// (sorted), then the prefix counts.
func reverseEntries(x *ReverseIndex) string {
	var lines []string
	owners := func(addr netip.Addr) {
		first, ok := x.loc(addr)
		if !ok {
			return
		}
		var names []string
		for _, l := range append([]ptrLoc{first}, x.more[addr]...) {
			names = append(names, fmt.Sprintf("%s@%d", x.svcs[l.svc].name, int32(l.at)))
		}
		slices.Sort(names)
		lines = append(lines, addr.String()+" "+strings.Join(names, " "))
	}
	for block, b := range x.v4 {
		for last := range 256 {
			if _, ok := b.at(byte(last)); ok {
				owners(netip.AddrFrom4([4]byte{block[0], block[1], block[2], byte(last)}))
			}
		}
	}
	for a := range x.v6 {
		owners(netip.AddrFrom16(a))
	}
	for p, n := range x.prefixes {
		lines = append(lines, fmt.Sprintf("%s: %d", p, n))
	}
	for a := range x.more {
		if _, ok := x.loc(a); !ok {
			lines = append(lines, "more without a first owner: "+a.String())
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
