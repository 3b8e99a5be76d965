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
// two things a transfer leaves out as the in-tree plugin's does: the apex's SOA, and a ClusterIP
// service's endpoint names.
func AllRecords(dst []dns.RR, set tree.Set) []dns.RR {
	if s, ok := set.(*FixedSet); ok {
		dst = AppendCopies(dst, s.SOA, "")
	}
	dst = TransferRecords(dst, set)
	s, ok := set.(*ServiceSet)
	if !ok || s.kind != object.ClusterIP {
		return dst
	}
	var labels []string
	known := map[string]bool{}
	for _, sl := range s.slices {
		for i := range sl.Len() {
			if l := labelOf(sl.Endpoint(i)); !known[l] {
				known[l] = true
				labels = append(labels, l)
			}
		}
	}
	return s.targetAddresses(dst, labels, nil)
}
