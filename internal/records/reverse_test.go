package records

import (
	"math/rand/v2"
	"net/netip"
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
