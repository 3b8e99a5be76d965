package records

import (
	"net/netip"
	"slices"

	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
)

// A change to a large headless service is usually a few endpoints of one of its slices, and the
// other slices are shared, as they are, by the set before and after it. Comparing every record a
// zone transfer carries before and after (500,000 SRV records for 5,000 endpoints × 100 named
// ports) held the applier, and with it every other change, for seconds. SetChange finds what
// changed from the slices the two sets do not share, so that its records cost what the change does.

// endpointAt is an endpoint with the slice it is in.
type endpointAt struct {
	object.Endpoint
	slice *object.EndpointSlice
}

// SetChange is what differs between two versions of a headless service's set.
type SetChange struct {
	old, now   *ServiceSet
	gone, came []endpointAt // the endpoints whose records may differ, in old and in now
}

// ChangeOf is the change from old to now, when it can be told from their slices: both are headless
// sets of one name, and in each every endpoint has a name and an address no other has (so a
// record of an endpoint of a shared slice can be no changed endpoint's). ok is false otherwise:
// every record must be compared.
func ChangeOf(old, now *ServiceSet) (c SetChange, ok bool) {
	if old == nil || now == nil || old.kind != object.Headless || now.kind != object.Headless ||
		old.name != now.name || old.ttl != now.ttl || !old.ownLabels() || !now.ownLabels() {
		return c, false
	}
	c.old, c.now = old, now
	for _, sl := range old.slices {
		if !slices.Contains(now.slices, sl) {
			c.gone = appendEndpoints(c.gone, sl)
		}
	}
	for _, sl := range now.slices {
		if !slices.Contains(old.slices, sl) {
			c.came = appendEndpoints(c.came, sl)
		}
	}
	// An endpoint in a changed slice that is the same after, with the same ports, changed nothing.
	type identity struct {
		hostname, cluster string
		addr              netip.Addr
	}
	came := make(map[identity]int, len(c.came))
	for i, e := range c.came {
		came[identity{e.Hostname, e.Cluster, e.Addr}] = i
	}
	unchanged := make([]bool, len(c.came))
	c.gone = slices.DeleteFunc(c.gone, func(e endpointAt) bool {
		i, ok := came[identity{e.Hostname, e.Cluster, e.Addr}]
		if ok && slices.Equal(e.slice.Ports, c.came[i].slice.Ports) {
			unchanged[i] = true
			return true
		}
		return false
	})
	n := 0
	for i, e := range c.came {
		if !unchanged[i] {
			c.came[n] = e
			n++
		}
	}
	c.came = c.came[:n]
	return c, true
}

func appendEndpoints(dst []endpointAt, sl *object.EndpointSlice) []endpointAt {
	for i := range sl.Len() {
		dst = append(dst, endpointAt{sl.Endpoint(i), sl})
	}
	return dst
}

// ownLabels reports whether every endpoint of the set has an address and a label no other has.
// Addresses are told by dupes; of labels, only hostnames need looking at: an endpoint without one
// is named by its address, unless a hostname spells an address.
func (r *ServiceSet) ownLabels() bool {
	if r.dupes {
		return false
	}
	type label struct{ hostname, cluster string }
	var seen map[label]bool
	for _, sl := range r.slices {
		for i := range sl.Len() {
			e := sl.Endpoint(i)
			if e.Hostname == "" {
				continue
			}
			if seen == nil {
				seen = map[label]bool{}
			}
			l := label{e.Hostname, e.Cluster}
			if seen[l] || parseEndpointLabel(e.Hostname).addr.IsValid() {
				return false
			}
			seen[l] = true
		}
	}
	return true
}

// Addrs calls f with the address of every endpoint that changed: no other address's PTR records
// can differ.
func (c SetChange) Addrs(f func(netip.Addr)) {
	for _, e := range c.gone {
		f(e.Addr)
	}
	for _, e := range c.came {
		f(e.Addr)
	}
}

// TransferRecords are the records a zone transfer carries that the change may touch, before and
// after it: what differs between the two is what the transfer loses and gains. They are the
// changed endpoints' addresses at the service's name and at their own, and their SRV records; and
// every SRV record of a port whose set's weight changed (weights spread over the whole set).
func (c SetChange) TransferRecords() (before, after []dns.RR) {
	oldCount, nowCount := map[portKey]int{}, map[portKey]int{}
	for _, e := range c.gone {
		c.old.countSRV(oldCount, e.slice.Ports)
	}
	for _, e := range c.came {
		c.now.countSRV(nowCount, e.slice.Ports)
	}
	for key := range oldCount {
		c.now.countSRV(nowCount, []object.Port{{Name: key.name, Protocol: key.protocol}})
	}
	for key := range nowCount {
		c.old.countSRV(oldCount, []object.Port{{Name: key.name, Protocol: key.protocol}})
	}
	reweighted := map[portKey]bool{}
	for key, n := range oldCount {
		if m := nowCount[key]; n > 0 && m > 0 && srvWeight(n) != srvWeight(m) {
			reweighted[key] = true
			owner := "_" + key.name + "._" + key.protocol + "." + c.old.name
			before, _ = c.old.srv(before, nil, key.name, key.protocol, owner, c.old.name, nil, everything())
			after, _ = c.now.srv(after, nil, key.name, key.protocol, owner, c.now.name, nil, everything())
		}
	}
	before = c.old.endpointTransfer(before, c.gone, oldCount, reweighted)
	after = c.now.endpointTransfer(after, c.came, nowCount, reweighted)
	return before, after
}

// portKey names an SRV set below a service: _<name>._<protocol>.
type portKey struct{ name, protocol string }

// countSRV counts, once for each port key of ports not counted yet, the SRV records the set has
// at _<name>._<protocol>: one per endpoint of each slice with such a port (every endpoint has a
// label of its own).
func (r *ServiceSet) countSRV(counts map[portKey]int, ports []object.Port) {
	for _, p := range ports {
		key := portKey{p.Name, p.Protocol}
		if _, ok := counts[key]; ok {
			continue
		}
		n := 0
		for _, sl := range r.slices {
			if slices.ContainsFunc(sl.Ports, func(q object.Port) bool { return q.Name == p.Name && q.Protocol == p.Protocol }) {
				n += sl.Len()
			}
		}
		counts[key] = n
	}
}

// endpointTransfer appends the records a zone transfer carries for each of endpoints: its address
// at the service's name and at its own, and an SRV record for each port of its slice, weighted
// for its set's size in counts (the sets of reweighted ports are made whole elsewhere).
func (r *ServiceSet) endpointTransfer(dst []dns.RR, endpoints []endpointAt, counts map[portKey]int, reweighted map[portKey]bool) []dns.RR {
	for _, e := range endpoints {
		target := labelOf(e.Endpoint) + "." + r.name
		dst = appendAddr(dst, typeOf(e.Addr), r.name, e.Addr, r.ttl)
		dst = appendAddr(dst, typeOf(e.Addr), target, e.Addr, r.ttl)
		for _, p := range e.slice.Ports {
			key := portKey{p.Name, p.Protocol}
			if reweighted[key] {
				continue
			}
			dst = append(dst, &dns.SRV{Hdr: hdr("_"+p.Name+"._"+p.Protocol+"."+r.name, dns.TypeSRV, r.ttl),
				Weight: srvWeight(counts[key]), Port: p.Port, Target: target})
		}
	}
	return dst
}
