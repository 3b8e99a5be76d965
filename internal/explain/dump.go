package explain

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// The explain option's dump: every name of kubetree's zones, in canonical DNS order, a page at a
// time. A page takes the tree's read lock once, for the walk that finds its sets (internal/tree's
// Page); the names and records are then made from those sets outside the lock, as a query's are:
// published sets are never changed, only replaced. A dump paged with after= while the cluster
// changes lists each name that exists throughout exactly once.

// DumpedName is one line of the dump; README's "Explain" documents its fields.
type DumpedName struct {
	Name    string   `json:"name"`
	Types   []string `json:"types"`   // the types it has records of; none for a name without records
	Records int      `json:"records"` // how many
	From    []Object `json:"from,omitempty"`
}

// The names a page of the dump holds: without limit=, and at most.
const (
	DefaultDumpLimit = 1000
	MaxDumpLimit     = 10000
)

// DumpPage gives emit up to limit names that follow after ("": from the first), zone by zone in
// the order of the stanza, and returns the name to continue after: "" once every name was given.
func (e *Explainer) DumpPage(after string, limit int, emit func(DumpedName) error) (next string, err error) {
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
			for _, n := range e.names(en) {
				if zi == first && after != "" && canonicalCompare(after, n.Name) >= 0 {
					continue
				}
				if err := emit(n); err != nil {
					return "", err
				}
				if left--; left == 0 {
					return n.Name, nil
				}
			}
		}
	}
	return "", nil
}

// names are the names one tree entry stands for, in canonical order: a service's set answers the
// names below its own (its endpoints', its SRV names).
func (e *Explainer) names(en tree.Entry) []DumpedName {
	if en.Set == nil {
		return []DumpedName{{Name: en.Name, Types: []string{}}}
	}
	byOwner := map[string]*DumpedName{en.Name: {Name: en.Name, Types: []string{}}}
	addrs := map[string][]netip.Addr{} // each name's addresses, to find the slices they came from
	for _, rr := range records.AllRecords(nil, en.Set) {
		owner := strings.ToLower(rr.Header().Name)
		n := byOwner[owner]
		if n == nil {
			n = &DumpedName{Name: owner, Types: []string{}}
			byOwner[owner] = n
		}
		if t := dns.Type(rr.Header().Rrtype).String(); !slices.Contains(n.Types, t) {
			n.Types = append(n.Types, t)
		}
		n.Records++
		if ip, ok := addressOf(rr); ok {
			addrs[owner] = append(addrs[owner], ip)
		}
	}
	var svc *object.StoredService
	var at map[netip.Addr][]*object.StoredSlice
	var kind string
	if s, ok := en.Set.(*records.ServiceSet); ok {
		var sls []*object.StoredSlice
		svc, sls, kind = e.stored(s)
		at = publishedSlicesByAddr(s, sls)
		addQueried(s, byOwner)
	}
	out := make([]DumpedName, 0, len(byOwner))
	for _, owner := range slices.SortedFunc(maps.Keys(byOwner), canonicalCompare) {
		n := byOwner[owner]
		slices.Sort(n.Types)
		if svc != nil {
			n.From = append(n.From, Object{Kind: kind, Namespace: svc.Namespace, Name: svc.Name, ResourceVersion: svc.ResourceVersion})
			seen := map[*object.StoredSlice]bool{}
			for _, ip := range addrs[owner] {
				for _, sl := range at[ip] {
					if !seen[sl] {
						seen[sl] = true
						n.From = append(n.From, Object{Kind: "EndpointSlice", Namespace: sl.Namespace, Name: sl.Name, ResourceVersion: sl.ResourceVersion})
					}
				}
			}
		}
		out = append(out, *n)
	}
	return out
}

// addQueried adds to a service's names the records a query gets and a zone transfer does not: SRV
// records at the service's own name (one per endpoint and named port of a headless service) and at
// each endpoint's name (one per named port).
func addQueried(s *records.ServiceSet, byOwner map[string]*DumpedName) {
	for owner, n := range byOwner {
		rest := owner[:len(owner)-len(s.Name())]
		if strings.HasPrefix(rest, "_") || slices.Contains(n.Types, "SRV") {
			continue // a port's name: its SRV records are the transfer's too
		}
		if answer, _, _, _ := s.Answer(owner, rest, dns.TypeSRV, records.Client{}); len(answer) > 0 {
			n.Types = append(n.Types, "SRV")
			n.Records += len(answer)
		}
	}
}

// addressOf is the address of an A or AAAA record.
func addressOf(rr dns.RR) (netip.Addr, bool) {
	switch a := rr.(type) {
	case *dns.A:
		return netip.AddrFromSlice(a.A.To4())
	case *dns.AAAA:
		return netip.AddrFromSlice(a.AAAA)
	}
	return netip.Addr{}, false
}

// publishedSlicesByAddr maps each ready address of the set to the stored slices it came from: those
// whose model the set was built from (a slice changed since is left out).
func publishedSlicesByAddr(s *records.ServiceSet, sls []*object.StoredSlice) map[netip.Addr][]*object.StoredSlice {
	published := s.Slices()
	at := map[netip.Addr][]*object.StoredSlice{}
	for _, sl := range sls {
		if sl.Model == nil || !slices.Contains(published, sl.Model) {
			continue
		}
		for i := range sl.Model.Len() {
			a := sl.Model.Endpoint(i).Addr
			at[a] = append(at[a], sl)
		}
	}
	return at
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
