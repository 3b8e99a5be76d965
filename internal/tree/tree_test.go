package tree

import (
	"fmt"
	"strings"
	"testing"
)

const testZone = "example.org."

// testSet is a record set told apart by its id; with below, it answers the names below its own, as
// a service's does.
type testSet struct {
	id    string
	below bool
}

func (s *testSet) AnswersBelow() bool { return s.below }

// nameOnlySet is a set of a name that exists without records of its own.
type nameOnlySet struct{}

func (nameOnlySet) AnswersBelow() bool { return false }

var nameOnly = nameOnlySet{}

func plainSet(id string) *testSet { return &testSet{id: id} }
func belowSet(id string) *testSet { return &testSet{id: id, below: true} }

// newTestTree is a tree of one zone whose apex has a set, and a name-only svc below it.
func newTestTree() *Tree {
	tr := New([]string{testZone})
	tr.Publish(Placement{testZone, testZone, plainSet("apex")}, Placement{testZone, "svc." + testZone, nameOnly})
	return tr
}

// lookup states what the tree finds at a name: "missing", "ENT" (an empty non-terminal), "name
// only", a set's id, or "<id> below: <rest>" for a name below a set that answers it.
func lookup(tr *Tree, qname string) string {
	s, rest, exists := tr.Lookup(qname, testZone)
	switch s := s.(type) {
	case nil:
		if !exists {
			return "missing"
		}
		return "ENT"
	case nameOnlySet:
		return "name only"
	case *testSet:
		if rest != "" {
			return s.id + " below: " + rest
		}
		return s.id
	}
	return "unknown set"
}

func TestTreeLookup(t *testing.T) {
	tr := newTestTree()
	long := strings.Repeat("x", 63)
	tr.Publish(
		Placement{testZone, "a.b.c.example.org.", plainSet("abc")},
		Placement{testZone, "web.prod.svc.example.org.", belowSet("web")},
		Placement{testZone, long + ".example.org.", plainSet("long")},
		Placement{testZone, `dot\.ted.example.org.`, plainSet("escaped")},
		Placement{testZone, "ted.example.org.", plainSet("ted")},
	)

	tests := []struct {
		name, qname, want string
	}{
		{"name with a set", "a.b.c.example.org.", "abc"},
		{"empty non-terminal", "b.c.example.org.", "ENT"},
		{"empty non-terminal next to the apex", "c.example.org.", "ENT"},
		{"name-only name", "svc.example.org.", "name only"},
		{"ENT between a name-only name and a set", "prod.svc.example.org.", "ENT"},
		{"apex", "example.org.", "apex"},
		{"missing below a set", "x.a.b.c.example.org.", "missing"},
		{"missing sibling", "d.c.example.org.", "missing"},
		{"missing next to the apex", "nope.example.org.", "missing"},
		{"a set that answers below its name", "web.prod.svc.example.org.", "web"},
		{"one label below it", "a.web.prod.svc.example.org.", "web below: a."},
		{"two labels below it, in the query's case", "_http._TCP.web.prod.svc.example.org.", "web below: _http._TCP."},
		{"upper case folds", "A.B.C.Example.ORG.", "abc"},
		{"upper case ENT", "PROD.SVC.example.org.", "ENT"},
		{"mixed case in one label", "wEb.prod.svc.example.org.", "web"},
		{"63-byte label", long + ".example.org.", "long"},
		{"63-byte label in upper case", strings.ToUpper(long) + ".example.org.", "long"},
		{"64-byte label", long + "x.example.org.", "missing"},
		{"64-byte label in upper case", "X" + long + ".example.org.", "missing"},
		{"empty label", "a..c.example.org.", "missing"},
		{"escaped dot is inside the label", `dot\.ted.example.org.`, "escaped"},
		{"escaped dot in upper case", `DOT\.Ted.example.org.`, "escaped"},
		{"a label ending in an escaped dot", `ted\..example.org.`, "missing"},
		{"a label starting with an escaped dot", `\.ted.example.org.`, "missing"},
		{"an escaped backslash before a dot ends the label", `dot\\.ted.example.org.`, "missing"},
		{"the two labels of an escaped name are not an alias of it", "dot.ted.example.org.", "missing"},
		{"decimal escapes are compared as written", `\097.b.c.example.org.`, "missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := lookup(tr, tc.qname); got != tc.want {
				t.Errorf("lookup(%q) = %s, want %s", tc.qname, got, tc.want)
			}
		})
	}

	if _, _, exists := tr.Lookup("a.example.net.", "example.net."); exists {
		t.Errorf("lookup in a zone the tree does not hold found a name")
	}
}

func TestTreeLookupDoesNotAllocate(t *testing.T) {
	tr := newTestTree()
	tr.Publish(Placement{testZone, "web.prod.svc.example.org.", belowSet("web")})
	for _, qname := range []string{"web.prod.svc.example.org.", "WEB.Prod.SVC.example.org.", "x.Web.prod.svc.example.org.", "nope.prod.svc.example.org."} {
		if n := testing.AllocsPerRun(100, func() { tr.Lookup(qname, testZone) }); n != 0 {
			t.Errorf("lookup(%q) allocates %v times", qname, n)
		}
	}
}

func TestTreePublish(t *testing.T) {
	tr := newTestTree()
	base := tr.Size()

	tr.Publish(Placement{testZone, "a.b.c.example.org.", plainSet("one")}, Placement{testZone, "x.a.b.c.example.org.", plainSet("x")})
	if got := tr.Size(); got != base+4 {
		t.Fatalf("size = %d after setting two names three deep, want %d", got, base+4)
	}

	// Replacing a name's set keeps its children.
	tr.Publish(Placement{testZone, "a.b.c.example.org.", plainSet("two")})
	expectNames(t, tr, "replaced set", map[string]string{"a.b.c.example.org.": "two", "x.a.b.c.example.org.": "x"})

	// Taking the set away from a name with children leaves an empty non-terminal.
	tr.Publish(Placement{testZone, "a.b.c.example.org.", nil})
	expectNames(t, tr, "set taken from an inner name", map[string]string{"a.b.c.example.org.": "ENT", "x.a.b.c.example.org.": "x"})

	// Taking away the last name prunes every empty non-terminal up to the apex, and not the apex.
	tr.Publish(Placement{testZone, "x.a.b.c.example.org.", nil})
	expectNames(t, tr, "last name removed", map[string]string{"x.a.b.c.example.org.": "missing", "a.b.c.example.org.": "missing",
		"b.c.example.org.": "missing", "c.example.org.": "missing", "example.org.": "apex"})
	if got := tr.Size(); got != base {
		t.Errorf("size = %d after pruning, want %d", got, base)
	}

	// Pruning stops at a name-only name.
	tr.Publish(Placement{testZone, "web.prod.svc.example.org.", belowSet("web")})
	tr.Publish(Placement{testZone, "web.prod.svc.example.org.", nil})
	expectNames(t, tr, "pruned to a name-only name", map[string]string{"prod.svc.example.org.": "missing", "svc.example.org.": "name only"})

	// A name-only name is removed when told to, and its empty parents with it.
	tr.Publish(Placement{testZone, "ns.dns.example.org.", nameOnly})
	expectNames(t, tr, "name-only name set", map[string]string{"ns.dns.example.org.": "name only", "dns.example.org.": "ENT"})
	tr.Publish(Placement{testZone, "ns.dns.example.org.", nil})
	expectNames(t, tr, "name-only name removed", map[string]string{"ns.dns.example.org.": "missing", "dns.example.org.": "missing"})

	// The apex takes a new set (the SOA serial moves) but is never removed.
	tr.Publish(Placement{testZone, testZone, plainSet("apex 2")})
	expectNames(t, tr, "apex set replaced", map[string]string{"example.org.": "apex 2", "svc.example.org.": "name only"})
	tr.Publish(Placement{testZone, testZone, nil})
	if _, _, exists := tr.Lookup(testZone, testZone); !exists {
		t.Errorf("the apex was removed")
	}

	// Names outside the zone, and zones the tree does not hold, change nothing.
	before := tr.Size()
	tr.Publish(Placement{testZone, "a.example.net.", plainSet("out")}, Placement{"example.net.", "a.example.net.", plainSet("out")},
		Placement{testZone, "nope.example.org.", nil})
	if got := tr.Size(); got != before {
		t.Errorf("size = %d after setting names outside the tree, want %d", got, before)
	}
}

// A set that answers below its name (a service) replaces what was below it, and leaves its
// neighbours alone.
func TestTreePublishSetThatAnswersBelow(t *testing.T) {
	tr := newTestTree()
	base := tr.Size()
	tr.Publish(Placement{testZone, "x.web.prod.svc.example.org.", plainSet("stale")})
	tr.Publish(Placement{testZone, "web.prod.svc.example.org.", belowSet("web 1")})
	expectNames(t, tr, "published", map[string]string{"web.prod.svc.example.org.": "web 1",
		"x.web.prod.svc.example.org.": "web 1 below: x.", "prod.svc.example.org.": "ENT"})
	if got := tr.Get(testZone, "web.prod.svc.example.org."); got.(*testSet).id != "web 1" {
		t.Errorf("get = %v, want web 1", got)
	}

	tr.Publish(Placement{testZone, "prod.svc.example.org.", nameOnly}, Placement{testZone, "db.prod.svc.example.org.", belowSet("db")})
	tr.Publish(Placement{testZone, "web.prod.svc.example.org.", nil})
	expectNames(t, tr, "sibling removed", map[string]string{"web.prod.svc.example.org.": "missing",
		"db.prod.svc.example.org.": "db", "prod.svc.example.org.": "name only"})
	if tr.Get(testZone, "web.prod.svc.example.org.") != nil {
		t.Errorf("get finds a removed name")
	}

	tr.Publish(Placement{testZone, "db.prod.svc.example.org.", nil}, Placement{testZone, "prod.svc.example.org.", nil})
	if got := tr.Size(); got != base {
		t.Errorf("size = %d after removing everything, want %d", got, base)
	}
}

// expectNames checks what the tree finds at each name.
func expectNames(t *testing.T, tr *Tree, step string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := lookup(tr, name); got != w {
			t.Errorf("%s: lookup(%q) = %s, want %s", step, name, got, w)
		}
	}
}

// TestPage: the names of a zone in canonical order (the apex, then each name before the names
// below it, siblings by their lower-case bytes), a page at a time; pages of any size, each after
// the last name of the one before, give every name exactly once. A set that answers below its name
// comes again on the page after a cursor below it, which only that set can continue.
func TestPage(t *testing.T) {
	tr := newTestTree()
	tr.Publish(
		Placement{testZone, "web.prod.svc." + testZone, belowSet("web")},
		Placement{testZone, "db.prod.svc." + testZone, belowSet("db")},
		Placement{testZone, "a.qa.svc." + testZone, belowSet("a")},
		Placement{testZone, "dns-version." + testZone, plainSet("version")},
		Placement{testZone, "x.y.z." + testZone, plainSet("deep")},
	)
	want := []string{testZone, "dns-version." + testZone, "svc." + testZone, "prod.svc." + testZone, "db.prod.svc." + testZone,
		"web.prod.svc." + testZone, "qa.svc." + testZone, "a.qa.svc." + testZone, "z." + testZone, "y.z." + testZone, "x.y.z." + testZone}
	names := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return out
	}
	if got := names(tr.Page(testZone, "", 100)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("one page:\n got %v\nwant %v", got, want)
	}
	for limit := 1; limit <= len(want); limit++ {
		var got []string
		after := ""
		for {
			// One entry more than wanted: the first may be the cursor's own set, which the
			// caller reads for the names below it.
			page := tr.Page(testZone, after, limit+1)
			if len(page) > limit+1 {
				t.Fatalf("limit %d: a page of %d", limit+1, len(page))
			}
			var kept []string
			for _, e := range page {
				if e.Name != after && len(kept) < limit {
					kept = append(kept, e.Name)
				}
			}
			if len(kept) == 0 {
				break
			}
			got = append(got, kept...)
			after = kept[len(kept)-1]
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("pages of %d:\n got %v\nwant %v", limit, got, want)
		}
	}
	if got := names(tr.Page(testZone, "_http._tcp.web.prod.svc."+testZone, 2)); strings.Join(got, " ") != "web.prod.svc."+testZone+" qa.svc."+testZone {
		t.Errorf("after a name a service answers: %v, want the service again, then what follows it", got)
	}
	if got := names(tr.Page(testZone, "web.prod.svc."+testZone, 2)); strings.Join(got, " ") != "web.prod.svc."+testZone+" qa.svc."+testZone {
		t.Errorf("after a service's own name: %v, want the service again, then what follows it", got)
	}
	if got := names(tr.Page(testZone, "b.PROD.svc."+testZone, 1)); len(got) != 1 || got[0] != "db.prod.svc."+testZone {
		t.Errorf("after a name that does not exist (in upper case): %v, want the next name that does", got)
	}
	if got := tr.Page(testZone, "example.com.", 5); got != nil {
		t.Errorf("after a name outside the zone: %v, want nothing", names(got))
	}
}

// BenchmarkPage: the time one page of 1,000 names holds the read lock, in the worst case for it:
// 100,000 services in one namespace, whose labels the page sorts, with the cursor in the middle.
func BenchmarkPage(b *testing.B) {
	tr := newTestTree()
	const services = 100000
	ps := make([]Placement, 0, services)
	for i := range services {
		ps = append(ps, Placement{testZone, fmt.Sprintf("svc-%06d.prod.svc.%s", i, testZone), belowSet("svc")})
	}
	tr.Publish(ps...)
	after := fmt.Sprintf("svc-%06d.prod.svc.%s", services/2, testZone)
	b.ReportAllocs()
	for b.Loop() {
		if page := tr.Page(testZone, after, 1001); len(page) != 1001 {
			b.Fatalf("a page of %d", len(page))
		}
	}
}
