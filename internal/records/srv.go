package records

import (
	"net/netip"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// hasPort reports whether _<name>._<protocol> names an SRV set of the service, without making it.
func (r *ServiceSet) hasPort(name, protocol string) bool {
	found := false
	r.eachPort(func(p object.Port) bool {
		found = tree.EqualFold(name, p.Name) && tree.EqualFold(protocol, p.Protocol)
		return !found
	})
	return found
}

// hasCluster reports whether some endpoint is in the source cluster named label, so that
// <cluster>.<svc> exists in a multicluster zone.
func (r *ServiceSet) hasCluster(label string) bool {
	for _, sl := range r.slices {
		if tree.EqualFold(label, sl.SourceCluster()) {
			return true
		}
	}
	return false
}

// hasProtocol reports whether some named port uses protocol (the label after the underscore), so
// that _<proto>.<svc> exists.
func (r *ServiceSet) hasProtocol(protocol string) bool {
	found := false
	r.eachPort(func(p object.Port) bool { found = tree.EqualFold(protocol, p.Protocol); return !found })
	return found
}

// eachPort calls f with every named port that has an SRV record, until f returns false.
func (r *ServiceSet) eachPort(f func(object.Port) bool) {
	if r.kind == object.ClusterIP {
		for _, p := range r.ports {
			if !f(p) {
				return
			}
		}
		return
	}
	if r.kind != object.Headless {
		return
	}
	for _, sl := range r.slices {
		for _, p := range sl.Ports {
			if !f(p) {
				return
			}
		}
	}
}

// srv appends the SRV records for port name and protocol ("" for every named port), owned by
// owner, and their targets' address records to extra, as many as rm has room for. A ClusterIP
// service's records target the service, written svcName (nameAsAsked); a headless service's, each
// endpoint below it that keep accepts (nil: every one). Weight 100 is spread evenly over the whole set, as in the in-tree plugin,
// records left out included.
func (r *ServiceSet) srv(answer, extra []dns.RR, name, protocol, owner, svcName string, keep func(object.Endpoint) bool, rm *room) ([]dns.RR, []dns.RR) {
	first := len(answer)
	match := func(p object.Port) bool {
		return name == "" || tree.EqualFold(name, p.Name) && tree.EqualFold(protocol, p.Protocol)
	}
	total := 0 // the records of the whole set, counted past the room only as far as a weight tells
	switch r.kind {
	case object.ClusterIP:
		for _, p := range r.ports {
			if !match(p) {
				continue
			}
			total++
			if rm.take() {
				answer = append(answer, &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, r.ttl), Port: p.Port, Target: svcName})
			}
		}
		if len(answer) > first {
			rm.additional()
			extra = r.addresses(extra, dns.TypeA, svcName, rm)
			extra = r.addresses(extra, dns.TypeAAAA, svcName, rm)
		}
	case object.Headless:
		type target struct {
			name string
			port uint16
		}
		seen := map[target]bool{}
		targets := map[string]bool{}
		var labels []string // the targets' labels, in the order of the answer
	endpoints:
		for _, sl := range r.slices {
			for _, p := range sl.Ports {
				if !match(p) {
					continue
				}
				for i := range sl.Len() {
					e := sl.Endpoint(i)
					if keep != nil && !keep(e) {
						continue
					}
					label := labelOf(e)
					t := target{label + "." + svcName, p.Port}
					if seen[t] {
						continue
					}
					seen[t] = true
					total++
					if !rm.take() {
						if total > maxWeight {
							break endpoints // the weight is 1, however many more there are
						}
						continue
					}
					answer = append(answer, &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, r.ttl), Port: p.Port, Target: t.name})
					if !targets[label] {
						targets[label] = true
						labels = append(labels, label)
					}
				}
			}
		}
		rm.additional()
		extra = r.targetAddresses(extra, labels, svcName, keep, rm)
	}
	setWeights(answer[first:], total)
	return answer, extra
}

// targetAddresses appends the A and then the AAAA records of each SRV target, named by its label
// below the service (written svcName), as endpointsNamed would for each, but in one pass over the endpoints: a
// pass per target made an SRV answer quadratic in the endpoints (100 ms for a headless service of
// 1,000, seconds for a few thousand). Only the addresses of endpoints keep accepts count (nil:
// all), as many as rm has room for.
func (r *ServiceSet) targetAddresses(dst []dns.RR, labels []string, svcName string, keep func(object.Endpoint) bool, rm *room) []dns.RR {
	if len(labels) == 0 || rm.left <= 0 {
		return dst
	}
	type loc struct{ slice, i int }
	named := make(map[string][]loc, len(labels))
	for _, label := range labels {
		named[label] = nil
	}
	for si, sl := range r.slices {
		for i := range sl.Len() {
			// Labels are lower case, so a label names exactly the endpoints that have it.
			e := sl.Endpoint(i)
			if keep != nil && !keep(e) {
				continue
			}
			label := labelOf(e)
			if locs, ok := named[label]; ok {
				named[label] = append(locs, loc{si, i})
			}
		}
	}
	for _, label := range labels {
		owner := label + "." + svcName
		for _, want4 := range []bool{true, false} {
			var seen map[netip.Addr]bool
			if r.dupes {
				seen = map[netip.Addr]bool{}
			}
			for _, l := range named[label] {
				sl := r.slices[l.slice]
				a := sl.Endpoint(l.i).Addr
				if a.Is4() != want4 || seen[a] {
					continue
				}
				if seen != nil {
					seen[a] = true
				}
				if !rm.take() {
					return dst
				}
				if want4 {
					dst = append(dst, &dns.A{Hdr: hdr(owner, dns.TypeA, r.ttl), A: sl.IP(l.i)})
				} else {
					dst = append(dst, &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, r.ttl), AAAA: sl.IP(l.i)})
				}
			}
		}
	}
	return dst
}

// endpointSRV answers SRV at an endpoint's own name, as the in-tree plugin does: one record per
// named port of the endpoint's slices, targeting the endpoint below svcName (nameAsAsked), its
// addresses in extra (those keep accepts, as endpointsNamedClosest answers them).
func (r *ServiceSet) endpointSRV(label endpointLabel, owner, svcName string, keep func(object.Endpoint) bool, rm *room) (answer, extra []dns.RR, found bool) {
	target := ""
	ports := map[uint16]bool{}
	for _, sl := range r.slices {
		for i := range sl.Len() {
			e := sl.Endpoint(i)
			if !label.denotes(e) {
				continue
			}
			found, target = true, labelOf(e)+"."+svcName
			for _, p := range sl.Ports {
				if !ports[p.Port] {
					ports[p.Port] = true
					if rm.take() {
						answer = append(answer, &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, r.ttl), Port: p.Port, Target: target})
					}
				}
			}
		}
	}
	if len(answer) > 0 {
		rm.additional()
		extra, _ = r.endpointsNamedClosest(nil, label, dns.TypeA, target, keep, rm)
		extra, _ = r.endpointsNamedClosest(extra, label, dns.TypeAAAA, target, keep, rm)
	}
	setWeights(answer, len(ports))
	return answer, extra, found
}

// maxWeight is the weight an SRV set at one priority shares.
const maxWeight = 100

// setWeights spreads weight 100 evenly over an SRV set of total records at one priority, as the
// in-tree plugin does; srvs are those of them that the reply has room for.
func setWeights(srvs []dns.RR, total int) {
	if total == 0 {
		return
	}
	w := srvWeight(total)
	for _, rr := range srvs {
		rr.(*dns.SRV).Weight = w
	}
}
