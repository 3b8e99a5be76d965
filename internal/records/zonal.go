package records

import (
	"strings"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// Zone-scoped names, with zonal: <zone>.pin._zone.<svc>... answers the headless service's
// endpoints in that topology zone (NODATA when there are none), <zone>.prefer._zone.<svc>... those,
// or every endpoint when there are none. The zone may span labels (a zone label value may hold dots).
const (
	ZoneLabel  = "_zone"
	ZonePin    = "pin"
	ZonePrefer = "prefer"
)

// zoneScoped answers a zone-scoped name: rest is what the query has below the service (in its case,
// with its trailing dot); SRV records target endpoints below svcName (nameAsAsked). exists is false when rest is not a zone-scoped name.
func (r *ServiceSet) zoneScoped(owner, rest, svcName string, qtype uint16, rm *room) (answer, extra []dns.RR, exists bool) {
	rest = rest[:len(rest)-1]
	cut := strings.LastIndexByte(rest, '.')
	if cut < 0 || !tree.EqualFold(rest[cut+1:], ZoneLabel) {
		return nil, nil, false
	}
	rest = rest[:cut]
	cut = strings.LastIndexByte(rest, '.')
	if cut <= 0 {
		return nil, nil, false
	}
	topologyZone, directive := rest[:cut], rest[cut+1:]
	prefer := tree.EqualFold(directive, ZonePrefer)
	if !prefer && !tree.EqualFold(directive, ZonePin) {
		return nil, nil, false
	}
	keep := func(e object.Endpoint) bool { return e.Zone != "" && tree.EqualFold(topologyZone, e.Zone) }
	if prefer && !r.anyEndpoint(keep) {
		keep = nil
	}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA:
		if keep == nil {
			keep = func(object.Endpoint) bool { return true }
		}
		answer = r.endpointRecords(nil, qtype, owner, keep, rm)
	case dns.TypeSRV:
		answer, extra = r.srv(nil, nil, "", "", owner, svcName, keep, rm)
	}
	return answer, extra, true
}

// anyEndpoint reports whether match accepts some endpoint.
func (r *ServiceSet) anyEndpoint(match func(object.Endpoint) bool) bool {
	for _, sl := range r.slices {
		for i := range sl.Len() {
			if match(sl.Endpoint(i)) {
				return true
			}
		}
	}
	return false
}
