package explain

import (
	"net/netip"
	"slices"
	"strings"
	"weak"

	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// The explain option's dump: every name of kubetree's zones, in canonical DNS order, a page at a
// time. A page takes the tree's read lock once, for the walk that finds its sets (internal/tree's
// Page); the names and records are then made from those sets outside the lock, as a query's are:
// published sets are never changed, only replaced. A dump paged with after= while the cluster
// changes lists each name that exists throughout exactly once.

// DumpPage gives emit up to limit names that follow after ("": from the first), zone by zone in
// the order of the stanza, and returns the name to continue after: "" once every name was given.
// keep, when not nil, says which names emit is given; those it leaves out count toward limit too,
// so that a page costs what its limit says, whatever keep keeps.
func (e *Explainer) DumpPage(after string, limit int, keep func(name string) bool, emit func(explainapi.DumpedName) error) (next string, err error) {
	after = strings.ToLower(after)
	first := 0
	if after != "" {
		if first = tree.MatchZone(e.zones, dns.Fqdn(after)); first < 0 {
			return "", nil
		}
		after = dns.Fqdn(after)
	}
	left := limit
	for zi := first; zi < len(e.zones); zi++ {
		z := e.zones[zi]
		from := ""
		if zi == first {
			from = after
		}
		// One entry more than names are wanted: only the set that answers the cursor's own name
		// can give no name after it.
		entries := e.Answerer.Tree.Page(z, from, left+1)
		for _, en := range entries {
			cursor := ""
			if zi == first {
				cursor = after
			}
			for _, n := range e.names(en, cursor, left) {
				if zi == first && after != "" && canonicalCompare(after, n.Name) >= 0 {
					continue
				}
				if keep == nil || keep(n.Name) {
					if err := emit(n); err != nil {
						return "", err
					}
				}
				if left--; left == 0 {
					return n.Name, nil
				}
			}
		}
	}
	return "", nil
}

// names are up to limit of the names one tree entry stands for that follow after ("": from the
// first), in canonical order: a service's set answers the names below its own (its endpoints', its
// SRV names). Only those names' records are made, so that a page costs what its names do, however
// large the service it cuts into.
func (e *Explainer) names(en tree.Entry, after string, limit int) []explainapi.DumpedName {
	s, ok := en.Set.(*records.ServiceSet)
	switch {
	case en.Set == nil:
		return []explainapi.DumpedName{{Name: en.Name, Types: []string{}}}
	case ok:
		return e.serviceNames(s, after, limit)
	}
	// The zone's own records (SOA, NS, dns-version, ns.dns): a few.
	n := explainapi.DumpedName{Name: en.Name, Types: []string{}}
	for _, rr := range records.AllRecords(nil, en.Set) {
		if t := dns.Type(rr.Header().Rrtype).String(); !slices.Contains(n.Types, t) {
			n.Types = append(n.Types, t)
		}
		n.Records++
	}
	slices.Sort(n.Types)
	return []explainapi.DumpedName{n}
}

// queried are the types a service's names are asked for: what a query for each gets is what the
// dump lists.
var queried = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeSRV}

// serviceNames are up to limit of a service's names after the cursor, each with the records a
// query of each type gets there, and the objects they came from.
func (e *Explainer) serviceNames(s *records.ServiceSet, after string, limit int) []explainapi.DumpedName {
	owners := e.ownersOf(s)
	if after != "" {
		start := 0
		switch rel, below := strings.CutSuffix(strings.ToLower(after), "."+s.Name()); {
		case below:
			start, _ = slices.BinarySearchFunc(owners, reversedLabels(rel), func(o owned, key string) int { return strings.Compare(o.key, key) })
			if start < len(owners) && owners[start].key == reversedLabels(rel) {
				start++
			}
		case canonicalCompare(after, s.Name()) >= 0:
			start = 1 // the service's own name, or a name after the whole service's (no entry holds one)
			if canonicalCompare(after, s.Name()) > 0 {
				start = len(owners)
			}
		}
		owners = owners[start:]
	}
	owners = owners[:min(limit, len(owners))]
	svc, sls, kind := e.stored(s)
	published := s.Slices()
	out := make([]explainapi.DumpedName, 0, len(owners))
	for _, o := range owners {
		owner := o.name
		n := explainapi.DumpedName{Name: owner, Types: []string{}}
		rest := owner[:len(owner)-len(s.Name())]
		addrs := map[netip.Addr]bool{} // the name's addresses, to find the slices they came from
		for _, qtype := range queried {
			found := s.Answer(owner, rest, qtype, records.Client{}, records.RoomFor(dns.MaxMsgSize))
			n.Truncated = n.Truncated || found.Truncated
			count := 0
			for _, rr := range found.Answer {
				if rr.Header().Rrtype != qtype {
					continue // an ExternalName's CNAME, answered for every type: counted once, as CNAME
				}
				count++
				if ip, ok := records.AddressOf(rr); ok {
					addrs[ip] = true
				}
			}
			if count > 0 {
				n.Types = append(n.Types, dns.TypeToString[qtype])
				n.Records += count
			}
		}
		slices.Sort(n.Types)
		if svc != nil {
			n.From = append(n.From, explainapi.Object{Kind: kind, Namespace: svc.Namespace, Name: svc.Name, ResourceVersion: svc.ResourceVersion})
			for _, sl := range sls {
				if sl.Model != nil && slices.Contains(published, sl.Model) && holdsAny(sl.Model, addrs) {
					n.From = append(n.From, explainapi.Object{Kind: "EndpointSlice", Namespace: sl.Namespace, Name: sl.Name, ResourceVersion: sl.ResourceVersion})
				}
			}
		}
		out = append(out, n)
	}
	return out
}

// ownersOf is s's names in canonical order. The last service's are kept: a dump paged through a
// service of thousands of endpoints sorts them once, not once a page. A published set never
// changes, so the set itself is the key, held weakly; one set's names are all that is kept.
func (e *Explainer) ownersOf(s *records.ServiceSet) []owned {
	e.lastMu.Lock()
	defer e.lastMu.Unlock()
	if e.lastSet.Value() != s {
		e.lastSet, e.lastOwners = weak.Make(s), belowInOrder(s.Name(), s.Names())
	}
	return e.lastOwners
}

// owned is one of a service's names, with its sort key: the labels below the service's own name,
// from the top, each followed by a zero byte ("" for the service's own name).
type owned struct{ name, key string }

// belowInOrder puts the names of a service (its own, and names one or two labels below it) in
// canonical order, by keys made of the labels below the service's name alone: a page that cuts into
// a service of thousands of endpoints sorts its names without splitting every one of them.
func belowInOrder(service string, names []string) []owned {
	out := make([]owned, len(names))
	for i, n := range names {
		out[i] = owned{name: n, key: reversedLabels(strings.TrimSuffix(n, service))}
	}
	slices.SortFunc(out, func(a, b owned) int { return strings.Compare(a.key, b.key) })
	return out
}

// reversedLabels is rel's labels (each ending in a dot, lower case) from the last to the first,
// each followed by a zero byte, which sorts before every byte of a label: "a" before "ab", and a
// name before the names below it, as canonical order has it.
func reversedLabels(rel string) string {
	labels := strings.Split(strings.TrimSuffix(rel, "."), ".")
	if rel == "" {
		return ""
	}
	slices.Reverse(labels)
	return strings.Join(labels, "\x00") + "\x00"
}

// canonicalCompare orders names in canonical DNS order (RFC 4034 6.1): label by label from the
// root, each label's lower-case bytes, a name before the names below it.
func canonicalCompare(a, b string) int {
	la, lb := dns.SplitDomainName(strings.ToLower(a)), dns.SplitDomainName(strings.ToLower(b))
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := strings.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	return len(la) - len(lb)
}
