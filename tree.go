package kubetree

import (
	"sync"
)

// recordSet is what the tree holds at a name. The tree stores and finds record sets; it never
// looks inside one, except to ask whether the set also answers the names below its own.
type recordSet interface {
	// answersBelow reports whether every name below the set's own is answered by the set (a
	// service answers its endpoints' names and SRV names), so that a lookup stops at it.
	answersBelow() bool
}

// nameOnly is the set of a name that exists without records of its own (a namespace, svc, pod).
// Unlike an empty non-terminal, which exists only for its children, it stays when they go.
type nameOnly struct{}

func (nameOnly) answersBelow() bool { return false }

// node is one name. Interior nodes without a set are the empty non-terminals; a name that has no
// node does not exist.
type node struct {
	children map[string]*node
	set      recordSet
}

func (n *node) child(label string) *node {
	if n.children == nil {
		n.children = map[string]*node{}
	}
	c := n.children[label]
	if c == nil {
		c = &node{}
		n.children[label] = c
	}
	return c
}

// tree holds every name of every zone we serve, keyed by reversed labels. Readers take the read
// lock only for the walk (a few map lookups); writers take the write lock only to link or unlink
// a finished record set, so a reader never waits on a build and never sees half of one.
type tree struct {
	mu     sync.RWMutex
	apexes map[string]*node // by zone name, lower case and fully qualified
}

// newTree returns a tree of empty zones.
func newTree(zones []string) *tree {
	t := &tree{apexes: make(map[string]*node, len(zones))}
	for _, z := range zones {
		t.apexes[z] = &node{}
	}
	return t
}

// lookup finds qname, in any letter case, in zone (as matchZone returns it). It returns the set
// that answers the name (nil for an empty non-terminal) and, when that set answers below its own
// name, the labels below it (rest, in the query's case, with its trailing dot); exists is false
// when the name is not in the tree. It does not allocate.
func (t *tree) lookup(qname, zone string) (set recordSet, rest string, exists bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := t.apexes[zone]
	if n == nil {
		return nil, "", false
	}
	end := len(qname) - len(zone) // qname[:end] is the part below the apex, with its trailing dot
	var buf [63]byte
	for end > 0 {
		if n.set != nil && n.set.answersBelow() {
			return n.set, qname[:end], true
		}
		start := end - 1
		for start > 0 && (qname[start-1] != '.' || escaped(qname, start-1)) {
			start--
		}
		label := qname[start : end-1]
		if label == "" || len(label) > len(buf) {
			return nil, "", false
		}
		var child *node
		if hasUpper(label) {
			child = n.children[string(lowerInto(buf[:0], label))] // the compiler does not allocate here
		} else {
			child = n.children[label]
		}
		if child == nil {
			return nil, "", false
		}
		n = child
		end = start
	}
	return n.set, "", true
}

// get returns the set published at exactly name (lower case, fully qualified), or nil.
func (t *tree) get(zone, name string) recordSet {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := t.apexes[zone]
	if n == nil || !inZone(name, zone) {
		return nil
	}
	for _, label := range labelsBelow(name, zone) {
		if n = n.children[label]; n == nil {
			return nil
		}
	}
	return n.set
}

// placement is one set to publish at one name of one zone; a nil set takes the name's set away.
type placement struct {
	zone, name string
	set        recordSet
}

// publish makes every placement at once: readers see all of them or none. A name keeps its
// children, and gets the empty non-terminals above it; a name whose set is taken away is removed
// with the empty non-terminals above it, unless something still lives below it. A set that
// answers below its name replaces whatever was below.
func (t *tree) publish(ps ...placement) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range ps {
		if p.set == nil {
			t.remove(p.zone, p.name)
			continue
		}
		apex := t.apexes[p.zone]
		if apex == nil || !inZone(p.name, p.zone) {
			continue
		}
		n := apex
		for _, label := range labelsBelow(p.name, p.zone) {
			n = n.child(label)
		}
		n.set = p.set
		if p.set.answersBelow() {
			n.children = nil
		}
	}
}

// remove takes the set at name away, then unlinks every node on the way up that no longer holds
// anything. The apex is never removed.
func (t *tree) remove(zone, name string) {
	apex := t.apexes[zone]
	if apex == nil || !inZone(name, zone) {
		return
	}
	labels := labelsBelow(name, zone)
	path := make([]*node, 0, len(labels)+1)
	path = append(path, apex)
	n := apex
	for _, label := range labels {
		if n = n.children[label]; n == nil {
			return
		}
		path = append(path, n)
	}
	n.set = nil
	for i := len(path) - 1; i > 0; i-- {
		if path[i].set != nil || len(path[i].children) > 0 {
			return
		}
		delete(path[i-1].children, labels[i-1])
	}
}

// size counts the names in the tree, apexes included.
func (t *tree) size() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	total := 0
	var count func(*node)
	count = func(n *node) {
		total++
		for _, c := range n.children {
			count(c)
		}
	}
	for _, apex := range t.apexes {
		count(apex)
	}
	return total
}

// at walks down from zone's apex along labels (the outermost first, in any letter case) and
// returns how many of them exist and the set at the last one reached. It does not allocate.
func (t *tree) at(zone string, labels ...string) (set recordSet, depth int) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := t.apexes[zone]
	if n == nil {
		return nil, 0
	}
	var buf [63]byte
	for _, label := range labels {
		if len(label) > len(buf) {
			return n.set, depth
		}
		var child *node
		if hasUpper(label) {
			child = n.children[string(lowerInto(buf[:0], label))]
		} else {
			child = n.children[label]
		}
		if child == nil {
			return n.set, depth
		}
		n = child
		depth++
	}
	return n.set, depth
}
