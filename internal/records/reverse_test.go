package records

import (
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
