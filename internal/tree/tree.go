package tree

import (
	"slices"
	"strings"
	"sync"
)

// Set is what the tree holds at a name. The tree stores and finds sets; it never looks inside
// one, except to ask whether the set also answers the names below its own.
type Set interface {
	// AnswersBelow reports whether every name below the set's own is answered by the set (a
	// service answers its endpoints' names and SRV names), so that a lookup stops at it.
	AnswersBelow() bool
}

// node is one name. Interior nodes without a set are the empty non-terminals; a name that has no
// node does not exist.
type node struct {
	children map[string]*node
	set      Set
}

func (n *node) child(label string) *node {
	if n.children == nil {
		n.children = map[string]*node{}
	}
	c := n.children[label]
	if c == nil {
		c = &node{}
		// A copy: the label is cut from the whole name, which the key would keep alive.
		n.children[strings.Clone(label)] = c
	}
	return c
}

// Tree holds the names of the zones it is given, keyed by reversed labels, each with the Set
// published there. Readers take the read lock only for the walk (a few map lookups); writers take
// the write lock only to link or unlink finished record sets, so a reader never waits on a build
// and never sees half of one.
type Tree struct {
	mu     sync.RWMutex
	apexes map[string]*node // by zone name, lower case and fully qualified
}

// New returns a tree of empty zones (lower case, fully qualified).
func New(zones []string) *Tree {
	t := &Tree{apexes: make(map[string]*node, len(zones))}
	for _, z := range zones {
		t.apexes[z] = &node{}
	}
	return t
}

// Lookup finds qname, in any letter case, in zone (as MatchZone returns it). It returns the set
// that answers the name (nil for an empty non-terminal) and, when that set answers below its own
// name, the labels below it (rest, in the query's case, with its trailing dot); exists is false
// when the name is not in the tree. It does not allocate.
func (t *Tree) Lookup(qname, zone string) (set Set, rest string, exists bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := t.apexes[zone]
	if n == nil {
		return nil, "", false
	}
	end := len(qname) - len(zone) // qname[:end] is the part below the apex, with its trailing dot
	var buf [63]byte
	for end > 0 {
		if n.set != nil && n.set.AnswersBelow() {
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
		if HasUpper(label) {
			child = n.children[string(LowerInto(buf[:0], label))] // the compiler does not allocate here
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

// Get returns the set published at exactly name (lower case, fully qualified), or nil.
func (t *Tree) Get(zone, name string) Set {
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

// Placement is one set to publish at one name of one zone; a nil set takes the name's set away.
type Placement struct {
	Zone, Name string
	Set        Set
}

// Publish makes every placement at once: readers see all of them or none. A name keeps its
// children, and gets the empty non-terminals above it; a name whose set is taken away is removed
// with the empty non-terminals above it, unless something still lives below it. A set that
// answers below its name replaces whatever was below.
func (t *Tree) Publish(ps ...Placement) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range ps {
		if p.Set == nil {
			t.remove(p.Zone, p.Name)
			continue
		}
		apex := t.apexes[p.Zone]
		if apex == nil || !inZone(p.Name, p.Zone) {
			continue
		}
		n := apex
		for _, label := range labelsBelow(p.Name, p.Zone) {
			n = n.child(label)
		}
		n.set = p.Set
		if p.Set.AnswersBelow() {
			n.children = nil
		}
	}
}

// remove takes the set at name away, then unlinks every node on the way up that no longer holds
// anything. The apex is never removed.
func (t *Tree) remove(zone, name string) {
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

// Size counts the names in the tree, apexes included.
func (t *Tree) Size() int {
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

// At walks down from zone's apex along labels (the outermost first, in any letter case) and
// returns how many of them exist and the set at the last one reached. It does not allocate.
func (t *Tree) At(zone string, labels ...string) (set Set, depth int) {
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
		if HasUpper(label) {
			child = n.children[string(LowerInto(buf[:0], label))]
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

// Each calls f with every set published in zone, while holding the read lock: f must not call
// back into the tree.
func (t *Tree) Each(zone string, f func(Set)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var walk func(*node)
	walk = func(n *node) {
		if n.set != nil {
			f(n.set)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	if apex := t.apexes[zone]; apex != nil {
		walk(apex)
	}
}

// Entry is one name of a Page: the name (lower case, fully qualified) and the set published
// there, nil for an empty non-terminal.
type Entry struct {
	Name string
	Set  Set
}

// Page returns up to limit names of zone that come after after, in canonical DNS order (RFC 4034
// 6.1: label by label from the apex down, each label's lower-case bytes compared), from the apex on
// when after is "". A set that answers below its name comes back also when after is its name or
// lies below it, as names it answers may still follow after. The read lock is held for this one
// page: a dump pages through a zone while it changes, and a name that exists all along is on
// exactly one page.
func (t *Tree) Page(zone, after string, limit int) []Entry {
	if HasUpper(after) {
		after = strings.ToLower(after)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	apex := t.apexes[zone]
	if apex == nil || limit <= 0 || after != "" && !inZone(after, zone) {
		return nil
	}
	var cursor []string
	if after != "" {
		cursor = labelsBelow(after, zone)
	}
	p := pager{cursor: cursor, limit: limit}
	p.walk(apex, zone, 0, after != "")
	return p.out
}

// pager is one Page's walk.
type pager struct {
	cursor []string // the labels of after, outermost first
	limit  int
	out    []Entry
}

// walk adds n (named name, depth labels below the apex) and the names below it that follow the
// cursor; bound says n is on the cursor's path (the cursor or one of its ancestors). It returns
// false once the page is full.
func (p *pager) walk(n *node, name string, depth int, bound bool) bool {
	switch {
	case !bound:
		if p.out = append(p.out, Entry{Name: name, Set: n.set}); len(p.out) >= p.limit {
			return false
		}
	case n.set != nil && n.set.AnswersBelow():
		p.out = append(p.out, Entry{Name: name, Set: n.set}) // the cursor is it or one of its names
		return len(p.out) < p.limit
	}
	from := ""
	if bound && depth < len(p.cursor) {
		from = p.cursor[depth]
	}
	// Each child gives the page a name at least (but the one on the cursor's path), so the
	// page needs no more children than it has room for names.
	for _, l := range firstLabels(n.children, from, p.limit-len(p.out)+1) {
		onPath := bound && depth < len(p.cursor) && l == p.cursor[depth]
		if !p.walk(n.children[l], l+"."+name, depth+1, onPath) {
			return false
		}
	}
	return true
}

// firstLabels returns, in order, the k smallest labels of children that are not below from. It
// keeps at most 2k of them at a time, so a page in a namespace of 100,000 services reads their
// labels once, and sorts about as many as it returns: the read lock is held for a scan, not for
// a sort of them all.
func firstLabels(children map[string]*node, from string, k int) []string {
	out := make([]string, 0, min(len(children), 2*k))
	var above string // once out was cut to k, no label at or above this one can be among the first
	for l := range children {
		if l < from || above != "" && l >= above {
			continue
		}
		if out = append(out, l); len(out) == 2*k {
			slices.Sort(out)
			out, above = out[:k], out[k]
		}
	}
	slices.Sort(out)
	if len(out) > k {
		out = out[:k]
	}
	return out
}
