package kubetree

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

const testZone = "example.org."

// newTestTree is a tree of one zone whose apex has a SOA, and a present name under it.
func newTestTree() *Tree {
	return NewTree([]string{testZone}, func(z string) *Node {
		n := &Node{rrs: &RRSets{SOA: []dns.RR{test.SOA(z + " 5 IN SOA ns.dns." + z + " hostmaster." + z + " 1 7200 1800 86400 5")}}}
		n.Child("svc").rrs = present
		return n
	})
}

// aRecords is a record set with one A record, told apart from others by its address.
func aRecords(name, ip string) *RRSets {
	return &RRSets{A: []dns.RR{test.A(name + " 5 IN A " + ip)}}
}

// lookup states what Lookup returns for a name: "missing", "ENT" (exists without records), or
// the address of its first A record.
func lookup(tr *Tree, qname string) string { return lookupIn(tr, qname, testZone) }

func lookupIn(tr *Tree, qname, zone string) string {
	f, exists := tr.Lookup(qname, zone)
	rrs := f.rrs
	switch {
	case !exists:
		return "missing"
	case f.ptr.svc != nil:
		return "PTR " + strings.Join(ptrNames(f.ptr, f.morePTR), ",")
	case f.svc != nil && f.rest == "":
		return "service " + f.svc.ips[0].String()
	case f.svc != nil:
		return "below service: " + f.rest
	case rrs == nil:
		return "ENT"
	case len(rrs.A) == 0:
		return "records"
	}
	return rrs.A[0].(*dns.A).A.String()
}

func TestTreeLookup(t *testing.T) {
	tr := newTestTree()
	tr.Set(testZone, "a.b.c.example.org.", aRecords("a.b.c.example.org.", "192.0.2.1"))
	tr.Set(testZone, "web.prod.svc.example.org.", aRecords("web.prod.svc.example.org.", "192.0.2.2"))
	long := strings.Repeat("x", 63)
	tr.Set(testZone, long+".example.org.", aRecords(long+".example.org.", "192.0.2.3"))
	tr.Set(testZone, `dot\.ted.example.org.`, aRecords(`dot\.ted.example.org.`, "192.0.2.4"))
	tr.Set(testZone, "ted.example.org.", aRecords("ted.example.org.", "192.0.2.5"))

	tests := []struct {
		name, qname, want string
	}{
		{"name with records", "a.b.c.example.org.", "192.0.2.1"},
		{"empty non-terminal", "b.c.example.org.", "ENT"},
		{"empty non-terminal next to the apex", "c.example.org.", "ENT"},
		{"present name", "svc.example.org.", "ENT"},
		{"ENT between a present name and records", "prod.svc.example.org.", "ENT"},
		{"apex", "example.org.", "records"},
		{"missing below records", "x.a.b.c.example.org.", "missing"},
		{"missing sibling", "d.c.example.org.", "missing"},
		{"missing next to the apex", "nope.example.org.", "missing"},
		{"upper case folds", "A.B.C.Example.ORG.", "192.0.2.1"},
		{"upper case ENT", "PROD.SVC.example.org.", "ENT"},
		{"mixed case in one label", "wEb.prod.svc.example.org.", "192.0.2.2"},
		{"63-byte label", long + ".example.org.", "192.0.2.3"},
		{"63-byte label in upper case", strings.ToUpper(long) + ".example.org.", "192.0.2.3"},
		{"64-byte label", long + "x.example.org.", "missing"},
		{"64-byte label in upper case", "X" + long + ".example.org.", "missing"},
		{"empty label", "a..c.example.org.", "missing"},
		{"escaped dot is inside the label", `dot\.ted.example.org.`, "192.0.2.4"},
		{"escaped dot in upper case", `DOT\.Ted.example.org.`, "192.0.2.4"},
		{"a label ending in an escaped dot", `ted\..example.org.`, "missing"},
		{"a label starting with an escaped dot", `\.ted.example.org.`, "missing"},
		{"an escaped backslash before a dot ends the label", `dot\\.ted.example.org.`, "missing"},
		{"the two labels of an escaped name are not an alias of it", "dot.ted.example.org.", "missing"},
		{"decimal escapes are compared as written", `\097.b.c.example.org.`, "missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := lookup(tr, tc.qname); got != tc.want {
				t.Errorf("Lookup(%q) = %s, want %s", tc.qname, got, tc.want)
			}
		})
	}

	if _, exists := tr.Lookup("a.example.net.", "example.net."); exists {
		t.Errorf("Lookup in a testZone the tree does not hold found a name")
	}
}

func TestTreeLookupRootZone(t *testing.T) {
	tr := NewTree([]string{"."}, func(string) *Node { return &Node{rrs: &RRSets{}} })
	tr.Set(".", "web.prod.svc.", aRecords("web.prod.svc.", "192.0.2.1"))
	for _, tc := range []struct{ qname, want string }{
		{"web.prod.svc.", "192.0.2.1"},
		{"Web.Prod.Svc.", "192.0.2.1"},
		{"prod.svc.", "ENT"},
		{"svc.", "ENT"},
		{".", "records"},
		{"nope.", "missing"},
		{"x.web.prod.svc.", "missing"},
	} {
		if got := lookupIn(tr, tc.qname, "."); got != tc.want {
			t.Errorf("Lookup(%q) in the root zone = %s, want %s", tc.qname, got, tc.want)
		}
	}
}

func TestTreeLookupDoesNotAllocate(t *testing.T) {
	tr := newTestTree()
	tr.Set(testZone, "web.prod.svc.example.org.", aRecords("web.prod.svc.example.org.", "192.0.2.2"))
	for _, qname := range []string{"web.prod.svc.example.org.", "WEB.Prod.SVC.example.org.", "nope.prod.svc.example.org."} {
		if n := testing.AllocsPerRun(100, func() { tr.Lookup(qname, testZone) }); n != 0 {
			t.Errorf("Lookup(%q) allocates %v times", qname, n)
		}
	}
}

func TestTreeSet(t *testing.T) {
	tr := newTestTree()
	base := tr.Len()

	tr.Set(testZone, "a.b.c.example.org.", aRecords("a.b.c.example.org.", "192.0.2.1"))
	tr.Set(testZone, "x.a.b.c.example.org.", aRecords("x.a.b.c.example.org.", "192.0.2.9"))
	if got := tr.Len(); got != base+4 {
		t.Fatalf("Len = %d after setting two names three deep, want %d", got, base+4)
	}

	// Replacing a name's records keeps its children.
	tr.Set(testZone, "a.b.c.example.org.", aRecords("a.b.c.example.org.", "192.0.2.2"))
	expect(t, tr, "replaced records", map[string]string{"a.b.c.example.org.": "192.0.2.2", "x.a.b.c.example.org.": "192.0.2.9"})

	// Taking records away from a name with children leaves an empty non-terminal.
	tr.Set(testZone, "a.b.c.example.org.", nil)
	expect(t, tr, "records taken from an inner name", map[string]string{"a.b.c.example.org.": "ENT", "x.a.b.c.example.org.": "192.0.2.9"})

	// Taking away the last name prunes every empty non-terminal up to the apex, and not the apex.
	tr.Set(testZone, "x.a.b.c.example.org.", nil)
	expect(t, tr, "last name removed", map[string]string{"x.a.b.c.example.org.": "missing", "a.b.c.example.org.": "missing",
		"b.c.example.org.": "missing", "c.example.org.": "missing", "example.org.": "records"})
	if got := tr.Len(); got != base {
		t.Errorf("Len = %d after pruning, want %d", got, base)
	}

	// Pruning stops at a present name.
	tr.Set(testZone, "web.prod.svc.example.org.", aRecords("web.prod.svc.example.org.", "192.0.2.3"))
	tr.Set(testZone, "web.prod.svc.example.org.", nil)
	expect(t, tr, "pruned to a present name", map[string]string{"prod.svc.example.org.": "missing", "svc.example.org.": "ENT"})

	// A present name is removed when told to, and its empty parents with it.
	tr.Set(testZone, "ns.dns.example.org.", present)
	expect(t, tr, "present name set", map[string]string{"ns.dns.example.org.": "ENT", "dns.example.org.": "ENT"})
	tr.Set(testZone, "ns.dns.example.org.", nil)
	expect(t, tr, "present name removed", map[string]string{"ns.dns.example.org.": "missing", "dns.example.org.": "missing"})

	// The apex takes new records (the SOA serial moves) but is never removed.
	tr.Set(testZone, testZone, aRecords(testZone, "192.0.2.4"))
	expect(t, tr, "apex records replaced", map[string]string{"example.org.": "192.0.2.4", "svc.example.org.": "ENT"})
	tr.Set(testZone, testZone, nil)
	if _, exists := tr.Lookup(testZone, testZone); !exists {
		t.Errorf("the apex was removed")
	}

	// Names outside the testZone, and zones the tree does not hold, change nothing.
	before := tr.Len()
	tr.Set(testZone, "a.example.net.", aRecords("a.example.net.", "192.0.2.5"))
	tr.Set("example.net.", "a.example.net.", aRecords("a.example.net.", "192.0.2.5"))
	tr.Set(testZone, "nope.example.org.", nil)
	if got := tr.Len(); got != before {
		t.Errorf("Len = %d after setting names outside the tree, want %d", got, before)
	}
}

func TestTreePublishService(t *testing.T) {
	tr := newTestTree()
	base := tr.Len()
	web := func(ip string) []*svcRecords {
		return []*svcRecords{{name: "web.prod.svc.example.org.", kind: clusterIP, ips: addrs(ip)}}
	}
	zones := []string{testZone}

	tr.PublishService("web.prod.svc.", zones, web("192.0.2.1"))
	expect(t, tr, "published", map[string]string{"web.prod.svc.example.org.": "service 192.0.2.1",
		"a.web.prod.svc.example.org.": "below service: a.", "_http._tcp.WEB.prod.svc.example.org.": "below service: _http._tcp.",
		"prod.svc.example.org.": "ENT"})

	// Publishing again replaces the service's records.
	tr.PublishService("web.prod.svc.", zones, web("192.0.2.2"))
	expect(t, tr, "republished", map[string]string{"web.prod.svc.example.org.": "service 192.0.2.2"})

	// Removing a service keeps what lives next to it.
	tr.Set(testZone, "prod.svc.example.org.", present)
	tr.PublishService("db.prod.svc.", zones, []*svcRecords{{name: "db.prod.svc.example.org.", kind: clusterIP, ips: addrs("192.0.2.3")}})
	tr.PublishService("web.prod.svc.", zones, []*svcRecords{nil})
	expect(t, tr, "sibling removed", map[string]string{"web.prod.svc.example.org.": "missing", "a.web.prod.svc.example.org.": "missing",
		"db.prod.svc.example.org.": "service 192.0.2.3", "prod.svc.example.org.": "ENT"})
	if got := tr.Services(); got != 1 {
		t.Errorf("Services = %d, want 1", got)
	}

	// Removing the last service under a present name keeps the present name.
	tr.PublishService("db.prod.svc.", zones, []*svcRecords{nil})
	expect(t, tr, "last service removed under a present namespace", map[string]string{"db.prod.svc.example.org.": "missing", "prod.svc.example.org.": "ENT"})

	// Without the present name, empty non-terminals are pruned up to the next present name.
	tr.Set(testZone, "prod.svc.example.org.", nil)
	tr.PublishService("web.prod.svc.", zones, web("192.0.2.4"))
	tr.PublishService("web.prod.svc.", zones, []*svcRecords{nil})
	expect(t, tr, "pruned to svc", map[string]string{"prod.svc.example.org.": "missing", "svc.example.org.": "ENT"})
	if got := tr.Len(); got != base || tr.Services() != 0 {
		t.Errorf("Len = %d, Services = %d after removing every service, want %d and 0", got, tr.Services(), base)
	}
	// Removing what is not there changes nothing.
	tr.PublishService("nope.prod.svc.", zones, []*svcRecords{nil})
	if got := tr.Len(); got != base || tr.Services() != 0 {
		t.Errorf("Len = %d, Services = %d after a no-op, want %d and 0", got, tr.Services(), base)
	}
}

func TestTreeReverseNames(t *testing.T) {
	zones := []string{testZone, "in-addr.arpa.", "8.b.d.0.1.0.0.2.ip6.arpa."}
	tr := NewTree(zones, func(string) *Node { return &Node{rrs: &RRSets{}} })
	fwd := []string{testZone}
	db := &svcRecords{name: "db.prod.svc.example.org.", kind: headless, slices: []*endpointSlice{newEndpointSlice(nil, []endpoint{
		{Addr: netip.MustParseAddr("192.0.2.1"), Hostname: "db-0"}, {Addr: netip.MustParseAddr("2001:db8::1")}})}}
	web := &svcRecords{name: "web.prod.svc.example.org.", kind: clusterIP, ips: addrs("192.0.2.1")}
	tr.PublishService("db.prod.svc.", fwd, []*svcRecords{db})
	in4, in6 := "in-addr.arpa.", "8.b.d.0.1.0.0.2.ip6.arpa."
	v6 := "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0." + in6
	want := map[string]string{"1.2.0.192.in-addr.arpa.": "PTR db-0.db.prod.svc.example.org.", "2.0.192.in-addr.arpa.": "ENT",
		"0.192.IN-ADDR.arpa.": "ENT", "2.2.0.192.in-addr.arpa.": "missing", "3.0.192.in-addr.arpa.": "missing",
		v6: "PTR 2001-db8--1.db.prod.svc.example.org.", "0.0.0.0." + in6: "ENT", "1.0.0.0." + in6: "missing"}
	for name, w := range want {
		zone := in4
		if strings.HasSuffix(name, in6) {
			zone = in6
		}
		if got := lookupIn(tr, name, zone); got != w {
			t.Errorf("%s: got %q, want %q", name, got, w)
		}
	}
	// A cluster IP's PTR wins over an endpoint's; each owner leaves only its own.
	tr.PublishService("web.prod.svc.", fwd, []*svcRecords{web})
	if got := lookupIn(tr, "1.2.0.192.in-addr.arpa.", in4); got != "PTR web.prod.svc.example.org." {
		t.Errorf("with a cluster IP: %q", got)
	}
	tr.PublishService("web.prod.svc.", fwd, []*svcRecords{nil})
	if got := lookupIn(tr, "1.2.0.192.in-addr.arpa.", in4); got != "PTR db-0.db.prod.svc.example.org." {
		t.Errorf("cluster IP gone: %q", got)
	}
	tr.PublishService("db.prod.svc.", fwd, []*svcRecords{nil})
	for name := range want {
		zone := in4
		if strings.HasSuffix(name, in6) {
			zone = in6
		}
		if got := lookupIn(tr, name, zone); got != "missing" {
			t.Errorf("%s after every owner left: %q", name, got)
		}
	}
}

// expect checks what Lookup says about each name.
func expect(t *testing.T, tr *Tree, step string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := lookup(tr, name); got != w {
			t.Errorf("%s: Lookup(%q) = %s, want %s", step, name, got, w)
		}
	}
}

func TestMatchZone(t *testing.T) {
	zones := []string{"cluster.local.", "svc.cluster.local.", "10.in-addr.arpa.", "in-addr.arpa."}
	tests := []struct {
		qname, want string
	}{
		{"web.prod.svc.cluster.local.", "svc.cluster.local."},
		{"svc.cluster.local.", "svc.cluster.local."},
		{"pod.cluster.local.", "cluster.local."},
		{"cluster.local.", "cluster.local."},
		{"Web.Prod.SVC.Cluster.Local.", "svc.cluster.local."},
		{"CLUSTER.LOCAL.", "cluster.local."},
		{"1.0.0.10.in-addr.arpa.", "10.in-addr.arpa."},
		{"1.0.0.110.in-addr.arpa.", "in-addr.arpa."},
		{"local.", ""},
		{"xcluster.local.", ""},
		{"cluster.local.example.org.", ""},
		{"example.org.", ""},
		{".", ""},
		{`a\.cluster.local.`, ""},
		{`a\\.cluster.local.`, "cluster.local."},
		{`a\.svc.cluster.local.`, "cluster.local."},
	}
	for _, tc := range tests {
		if got := matchZone(zones, tc.qname); got != tc.want {
			t.Errorf("matchZone(%q) = %q, want %q", tc.qname, got, tc.want)
		}
	}

	root := []string{".", "cluster.local."}
	if got := matchZone(root, "example.org."); got != "." {
		t.Errorf("matchZone with the root testZone = %q, want .", got)
	}
	if got := matchZone(root, "a.cluster.local."); got != "cluster.local." {
		t.Errorf("matchZone with the root testZone = %q, want the longer cluster.local.", got)
	}
	if n := testing.AllocsPerRun(100, func() { matchZone(zones, "Web.Prod.SVC.Cluster.Local.") }); n != 0 {
		t.Errorf("matchZone allocates %v times", n)
	}
}
