package kubetree

import (
	"sync"

	"github.com/miekg/dns"
)

// RRSets are the finished records of a name that is not a service's: the apex, dns-version, ns.dns,
// a pod. Once published they are never modified; readers copy before handing records on.
type RRSets struct {
	A, AAAA []dns.RR
	TXT     []dns.RR
	NS      []dns.RR
	SOA     []dns.RR
}

// present marks a name that exists without records of its own (a namespace, svc, pod): such a name
// is kept when its last child goes, unlike an empty non-terminal that only exists for its children.
var present = &RRSets{}

// Node is one name in the tree. Interior nodes are the empty non-terminals; a name that has no node
// does not exist.
type Node struct {
	children map[string]*Node
	rrs      *RRSets
	svc      *svcRecords // a service's name: everything below it is answered from these records
}

// Child returns the child with the given (lower-case) label, for building subtrees.
func (n *Node) Child(label string) *Node {
	if n.children == nil {
		n.children = map[string]*Node{}
	}
	c := n.children[label]
	if c == nil {
		c = &Node{}
		n.children[label] = c
	}
	return c
}

// Records returns the node's record sets, creating them while the subtree is being built.
func (n *Node) Records() *RRSets {
	if n.rrs == nil || n.rrs == present {
		n.rrs = &RRSets{}
	}
	return n.rrs
}

// Tree holds every name of every zone we serve. Readers take the read lock only for the walk (a few
// map lookups); writers take the write lock only to link or unlink a finished subtree, so a reader
// never waits on a rebuild and never sees a half-built service.
type Tree struct {
	mu    sync.RWMutex
	zones map[string]*Node // apex by zone name, lower case and fully qualified
	ptr   *ptrIndex        // the reverse zones' names; nil without reverse zones
	// services counts the services published in the first forward zone, for metrics.
	services int
}

// Services returns how many services the tree serves.
func (t *Tree) Services() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.services
}

// found is what a name resolves to: plain records (nil for an empty non-terminal), or a service
// and the labels of the name below it (rest, in the query's case, "" for the service itself), or
// the owners of an address in a reverse zone.
type found struct {
	rrs     *RRSets
	svc     *svcRecords
	rest    string
	ptr     ptrOwner   // an address's first owner, when ptr.svc is not nil
	morePTR []ptrOwner // and its other owners
}

// NewTree returns a tree whose zones hold only the records every apex has.
func NewTree(zones []string, apex func(zone string) *Node) *Tree {
	t := &Tree{zones: make(map[string]*Node, len(zones))}
	for _, z := range zones {
		t.zones[z] = apex(z)
		if p, ok := reversePrefix(z); ok {
			if t.ptr == nil {
				t.ptr = newPTRIndex()
			}
			t.ptr.zones = append(t.ptr.zones, p)
		}
	}
	return t
}

// Lookup finds qname, in any letter case, below the apex of zone (as returned by matchZone), and
// reports whether the name exists at all. It does not allocate.
func (t *Tree) Lookup(qname, zone string) (f found, exists bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := t.zones[zone]
	if n == nil {
		return f, false
	}
	end := len(qname) - len(zone) // qname[:end] is the part below the apex, with its trailing dot
	if zone == "." && end > 0 {
		end++ // the root's dot is also the last label's
	}
	if end > 0 && t.ptr != nil && isReverse(zone) {
		return t.ptr.lookup(qname)
	}
	var buf [63]byte
	for end > 0 {
		if n.svc != nil {
			return found{svc: n.svc, rest: qname[:end]}, true
		}
		start := end - 1
		for start > 0 && (qname[start-1] != '.' || escaped(qname, start-1)) {
			start--
		}
		label := qname[start : end-1]
		if label == "" || len(label) > len(buf) {
			return f, false
		}
		var child *Node
		if hasUpper(label) {
			child = n.children[string(lowerInto(buf[:0], label))] // the compiler does not allocate here
		} else {
			child = n.children[label]
		}
		if child == nil {
			return f, false
		}
		n = child
		end = start
	}
	f.svc = n.svc
	if n.rrs != present {
		f.rrs = n.rrs
	}
	return f, true
}

// PublishService swaps the records of one service (name is <svc>.<ns>.svc.) in every forward zone,
// records[i] for zones[i], nil where the service has no name; the first zone's records also own the
// service's reverse names. Readers see the whole change or none of it.
func (t *Tree) PublishService(name string, zones []string, records []*svcRecords) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var old *svcRecords
	if n := t.node(zones[0], name+zones[0]); n != nil {
		old = n.svc
	}
	if old != nil {
		t.services--
	}
	if records[0] != nil {
		t.services++
	}
	if t.ptr != nil {
		t.ptr.replace(old, records[0])
	}
	for i, zone := range zones {
		full := name + zone
		if records[i] == nil {
			t.prune(zone, full, true)
			continue
		}
		parentName, label := parentOf(full)
		if parent := t.walk(zone, parentName); parent != nil {
			parent.Child(label) // create the map if needed
			parent.children[label] = &Node{svc: records[i]}
		}
	}
}

// node returns the node at name, or nil; it creates nothing.
func (t *Tree) node(zone, name string) *Node {
	n := t.zones[zone]
	if n == nil || !dns.IsSubDomain(zone, name) {
		return nil
	}
	labels := dns.SplitDomainName(name[:len(name)-len(zone)])
	for i := len(labels) - 1; i >= 0 && n != nil; i-- {
		n = n.children[labels[i]]
	}
	return n
}

// Set publishes rrs at name (lower case, fully qualified, inside zone), keeping the name's children
// and creating empty non-terminals above it. A nil rrs takes the name's own records away; the name
// is then removed if nothing lives below it.
func (t *Tree) Set(zone, name string, rrs *RRSets) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rrs == nil {
		t.prune(zone, name, false)
		return
	}
	n := t.walk(zone, name)
	if n != nil {
		n.rrs = rrs
	}
}

// walk returns the node at name, creating empty non-terminals on the way; nil if name is not in zone.
func (t *Tree) walk(zone, name string) *Node {
	n := t.zones[zone]
	if n == nil || !dns.IsSubDomain(zone, name) {
		return nil
	}
	labels := dns.SplitDomainName(name[:len(name)-len(zone)])
	for i := len(labels) - 1; i >= 0; i-- {
		n = n.Child(labels[i])
	}
	return n
}

// prune takes the records at name away (and with whole, its children), then unlinks every node on
// the way up that no longer holds anything.
func (t *Tree) prune(zone, name string, whole bool) {
	apex := t.zones[zone]
	if apex == nil || !dns.IsSubDomain(zone, name) {
		return
	}
	labels := dns.SplitDomainName(name[:len(name)-len(zone)])
	path := make([]*Node, 0, len(labels)+1)
	path = append(path, apex)
	n := apex
	for i := len(labels) - 1; i >= 0; i-- {
		n = n.children[labels[i]]
		if n == nil {
			return
		}
		path = append(path, n)
	}
	if len(path) == 1 { // never the apex
		return
	}
	if whole {
		n.children = nil
		n.svc = nil
	}
	n.rrs = nil
	for i := len(path) - 1; i > 0; i-- {
		node := path[i]
		if node.rrs != nil || node.svc != nil || len(node.children) > 0 {
			return
		}
		delete(path[i-1].children, labels[len(labels)-i])
	}
}

// Len counts the names in the tree, for metrics and tests.
func (t *Tree) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	total := 0
	var count func(*Node)
	count = func(n *Node) {
		total++
		for _, c := range n.children {
			count(c)
		}
	}
	for _, apex := range t.zones {
		count(apex)
	}
	return total
}

func parentOf(name string) (parent, label string) {
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			return name[i+1:], name[:i]
		}
	}
	return ".", name
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

func lowerInto(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// matchZone returns the longest of zones (lower case) that qname, in any case, is in; "" if none.
// It does not allocate.
func matchZone(zones []string, qname string) string {
	best := ""
	for _, z := range zones {
		if len(z) <= len(best) || len(z) > len(qname) {
			continue
		}
		if z == "." {
			best = z
			continue
		}
		off := len(qname) - len(z)
		if off > 0 && (qname[off-1] != '.' || escaped(qname, off-1)) {
			continue // a\.cluster.local. is in local., not cluster.local.
		}
		if equalFoldASCII(qname[off:], z) {
			best = z
		}
	}
	return best
}

// escaped reports whether s[i] is escaped by the backslashes before it: the dot in a\.b is part of
// the label, the one in a\\.b ends it.
func escaped(s string, i int) bool {
	n := 0
	for i > n && s[i-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
