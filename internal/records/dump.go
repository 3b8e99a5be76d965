package records

import (
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// What the explain endpoint reads of a set (internal/explain): the model it was
// built from, and the records of every name it answers.

// Kind is what the service is to DNS.
func (r *ServiceSet) Kind() object.Kind { return r.kind }

// Slices are the endpoint slices the set answers from, shared with the informer's store: the
// caller must not change them.
func (r *ServiceSet) Slices() []*object.EndpointSlice { return r.slices }

// AllRecords appends the records of every name set answers: what a zone transfer carries, and the
// three things a transfer leaves out as the in-tree plugin's does: the apex's SOA, ns.dns.<zone>'s
// addresses, and a ClusterIP service's endpoint names.
func AllRecords(dst []dns.RR, set tree.Set) []dns.RR {
	if s, ok := set.(*FixedSet); ok {
		dst = AppendCopies(dst, s.SOA, "")
		if s.nameserverAlias {
			dst = AppendCopies(AppendCopies(dst, s.a, ""), s.aaaa, "")
		}
	}
	dst = TransferRecords(dst, set)
	s, ok := set.(*ServiceSet)
	if !ok || s.kind != object.ClusterIP {
		return dst
	}
	return s.targetAddresses(dst, s.endpointLabels(), s.name, nil, everything())
}

// Names are the names the set has records at, for a query or a zone transfer: its own, the
// _<port>._<proto> name of each named port, and each endpoint's (its hostname or dashed address,
// under its cluster in a multicluster zone), lower case and fully qualified, in no order. They are
// made from the set's ports and endpoints, no record built: a page of the dump finds its names
// among them and makes the records of those alone.
func (r *ServiceSet) Names() []string {
	names := []string{r.name}
	if r.kind == object.ExternalName {
		return names
	}
	seen := map[string]bool{r.name: true}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	r.eachPort(func(p object.Port) bool {
		add("_" + p.Name + "._" + p.Protocol + "." + r.name)
		return true
	})
	for _, l := range r.endpointLabels() {
		add(l + "." + r.name)
	}
	return names
}
