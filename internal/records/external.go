package records

import (
	"net/netip"
	"slices"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// ExternalQuery is a query for a name below a service in a kubetree_external zone, split as the
// in-tree plugin splits it: <svc>.<ns>, <endpoint>.<svc>.<ns> or <port>.<protocol>.<svc>.<ns>
// (underscores stripped), with the settings of the kubetree_external stanza.
type ExternalQuery struct {
	Owner          string // the query name, as asked
	Target         string // <svc>.<ns>.<zone>, lower case: the SRV target of an external IP
	Endpoint       string // the endpoint label, or ""
	Port, Protocol string // "" for any
	Qtype          uint16
	TTL            uint32 // kubetree_external's: address records; SRV and CNAME carry kubetree's, as in-tree
	Headless       bool
	Room           int // at most this many records (RoomFor); 0 for every one, as a transfer wants
}

// room is the room the query's reply has.
func (q *ExternalQuery) room() *room {
	if q.Room == 0 {
		return everything()
	}
	return &room{left: q.Room}
}

// ports reports how many of ports the query's port and protocol match: a name without them matches
// every port, and one that has none stands for one unnamed port (the in-tree plugin's sentinel).
func (q *ExternalQuery) ports(ports []object.Port) int {
	if q.Port == "" && q.Protocol == "" {
		return max(len(ports), 1)
	}
	n := 0
	for _, p := range ports {
		if q.matches(p) {
			n++
		}
	}
	return n
}

func (q *ExternalQuery) matches(p object.Port) bool {
	return (q.Port == "" || tree.EqualFold(q.Port, p.Name)) && (q.Protocol == "" || tree.EqualFold(q.Protocol, p.Protocol))
}

// ExternalRecords makes the records k8s_external serves for q from this service, as the in-tree
// plugin's External finds them: with headless, the endpoints of a service without external
// addresses (of a headless service at its own name and below, of any service at an endpoint's
// name); otherwise every external address, at the service's name and at any name one or two labels
// below it. hosts are the load balancer hostnames whose addresses the caller looks up (after each
// CNAME for A and AAAA, in the additional section for SRV). Exists is false for a name error.
func (r *ServiceSet) ExternalRecords(q *ExternalQuery) (found Reply, hosts []string) {
	ext := r.externals()
	rm := q.room()
	defer func() { found.Truncated = rm.cut }()
	if q.Headless && len(ext) == 0 && (r.kind == object.Headless || q.Endpoint != "") {
		found.Answer, found.Extra, found.Exists = r.externalEndpoints(q, rm)
		return found, nil
	}
	matched := q.ports(r.ports)
	if len(ext) == 0 || matched == 0 {
		return found, nil
	}
	var answer, extra []dns.RR
	switch q.Qtype {
	case dns.TypeA, dns.TypeAAAA:
		for i, e := range ext {
			switch {
			case e.Host != "":
				if !slices.Contains(hosts, e.Host) {
					answer = append(answer, &dns.CNAME{Hdr: hdr(q.Owner, dns.TypeCNAME, r.ttl), Target: e.Host})
					hosts = append(hosts, e.Host)
				}
			case !seenAddr(ext[:i], e.Addr) && typeOf(e.Addr) == q.Qtype && rm.take():
				answer = appendAddr(answer, q.Qtype, q.Owner, e.Addr, q.TTL)
			}
		}
	case dns.TypeSRV:
		weight := srvWeight(len(ext) * matched)
		first := true // the targets' addresses go in once, whatever the number of ports
		for _, p := range r.ports {
			if !q.matches(p) {
				continue
			}
			for i, e := range ext {
				target := q.Target
				if e.Host != "" {
					target = e.Host
				}
				if !containsSRV(answer, target, p.Port) && rm.take() {
					answer = append(answer, &dns.SRV{Hdr: hdr(q.Owner, dns.TypeSRV, r.ttl), Weight: weight, Port: p.Port, Target: target})
				}
				switch {
				case !first:
				case e.Host != "":
					if !slices.Contains(hosts, e.Host) {
						hosts = append(hosts, e.Host)
					}
				case !seenAddr(ext[:i], e.Addr):
					extra = appendAddr(extra, dns.TypeA, target, e.Addr, q.TTL)
					extra = appendAddr(extra, dns.TypeAAAA, target, e.Addr, q.TTL)
				}
			}
			first = false
		}
	}
	found.Answer, found.Extra, found.Exists = answer, extra, true
	return found, hosts
}

// externalEndpoints makes the records of q from the service's ready endpoints, as many as rm has
// room for.
func (r *ServiceSet) externalEndpoints(q *ExternalQuery, rm *room) (answer, extra []dns.RR, found bool) {
	label := parseEndpointLabel(q.Endpoint)
	pairs := 0 // endpoint and port pairs, which the in-tree plugin's SRV weights count
	var buf [4]*object.EndpointSlice
	matching := buf[:0]
	for _, sl := range r.slices {
		ports := q.ports(sl.Ports)
		if ports == 0 {
			continue
		}
		n := 0
		for i := range sl.Len() {
			if q.Endpoint == "" || label.denotes(sl.Endpoint(i)) {
				n++
			}
		}
		if n > 0 {
			pairs += n * ports
			matching = append(matching, sl)
		}
	}
	if pairs == 0 {
		return nil, nil, false
	}
	named := func(e object.Endpoint) bool { return q.Endpoint == "" || label.denotes(e) }
	switch q.Qtype {
	case dns.TypeA, dns.TypeAAAA:
		sub := *r
		sub.slices, sub.ttl = matching, q.TTL
		answer = sub.endpointRecords(nil, q.Qtype, q.Owner, named, rm)
	case dns.TypeSRV:
		answer, extra = r.externalSRV(q, matching, named, srvWeight(pairs), rm)
	}
	return answer, extra, true
}

// externalSRV makes the SRV answer of q from the matching slices' named endpoints, one record per
// target and port, and their addresses as extra, as many as rm has room for.
func (r *ServiceSet) externalSRV(q *ExternalQuery, matching []*object.EndpointSlice, named func(object.Endpoint) bool, weight uint16, rm *room) (answer, extra []dns.RR) {
	var targets []string // the targets whose addresses go in extra, in the order of the answer
	type address struct {
		target string
		addr   netip.Addr
	}
	seen := map[address]bool{}
	type srvKey struct {
		target string
		port   uint16
	}
	srvs := map[srvKey]bool{}
	var addrs []netip.Addr // targets' addresses
endpoints:
	for _, sl := range matching {
		for i := range sl.Len() {
			e := sl.Endpoint(i)
			if !named(e) {
				continue
			}
			target := labelOf(e) + "." + q.Target
			served := false
			for _, p := range sl.Ports {
				if !q.matches(p) {
					continue
				}
				t := srvKey{target, p.Port}
				if !srvs[t] && rm.take() {
					srvs[t] = true
					answer = append(answer, &dns.SRV{Hdr: hdr(q.Owner, dns.TypeSRV, r.ttl), Weight: weight, Port: p.Port, Target: target})
				}
				served = served || srvs[t] // a target in the answer: its addresses go in extra
			}
			if a := (address{target, e.Addr}); served && !seen[a] {
				seen[a] = true
				targets = append(targets, target)
				addrs = append(addrs, e.Addr)
			}
			if rm.left <= 0 && rm.cut {
				break endpoints // the weight counts every pair already
			}
		}
	}
	// The targets' addresses follow the answer: they are additional data, what room is left.
	rm.additional()
	for i, target := range targets {
		if rm.take() {
			extra = appendAddr(extra, typeOf(addrs[i]), target, addrs[i], q.TTL)
		}
	}
	return answer, extra
}

// srvWeight is the in-tree plugin's weight for an SRV set made of n candidates: 100 spread over
// all of them, duplicates included, at least 1.
func srvWeight(n int) uint16 {
	return uint16(max(maxWeight/n, 1))
}

func containsSRV(rrs []dns.RR, target string, port uint16) bool {
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SRV); ok && s.Port == port && s.Target == target {
			return true
		}
	}
	return false
}

func seenAddr(ext []object.ExternalAddr, addr netip.Addr) bool {
	for _, e := range ext {
		if e.Host == "" && e.Addr == addr {
			return true
		}
	}
	return false
}

// ExternalSOA is the SOA of a kubetree_external zone, as k8s_external writes it: its nameserver
// (ns1.<apex>.<zone>), its mailbox (hostmaster.<apex>.<zone>), the cluster's serial.
func ExternalSOA(zone, nameserver, hostmaster string, ttl, serial uint32) *dns.SOA {
	return &dns.SOA{Hdr: hdr(zone, dns.TypeSOA, ttl), Ns: nameserver, Mbox: hostmaster,
		Serial: serial, Refresh: soaRefresh, Retry: soaRetry, Expire: soaExpire, Minttl: ttl}
}

// ExternalNS is the NS record of a kubetree_external zone.
func ExternalNS(zone, nameserver string, ttl uint32) *dns.NS {
	return &dns.NS{Hdr: hdr(zone, dns.TypeNS, ttl), Ns: nameserver}
}

// Behind is what the applier knows of the cluster DNS services this server is behind (those
// with one of its local addresses among their ready endpoints), published as one immutable value.
type Behind struct {
	Services []*object.Service
	Local    []netip.Addr
}

// ExternalNameservers appends what the in-tree plugin gives k8s_external as the addresses of its
// nameserver: of each service this server is behind, its external IPs, or with endpoints (the
// headless option) a headless service's endpoints in the slices that hold this server. They are of
// type qtype, owned by owner with ttl, each address once. found is false when this server is behind
// no service: then it is the server's own addresses that count.
func (b *Behind) ExternalNameservers(dst []dns.RR, qtype uint16, owner string, ttl uint32, endpoints bool) (_ []dns.RR, found bool) {
	if b == nil || len(b.Services) == 0 {
		return dst, false
	}
	var seen []netip.Addr
	add := func(addr netip.Addr) {
		if !slices.Contains(seen, addr) {
			seen = append(seen, addr)
			dst = appendAddr(dst, qtype, owner, addr, ttl)
		}
	}
	for _, s := range b.Services {
		if endpoints && s.Kind == object.Headless {
			for _, sl := range s.Slices {
				if sl.IndexOf(b.Local) < 0 {
					continue
				}
				for i := range sl.Len() {
					add(sl.Endpoint(i).Addr)
				}
			}
			continue
		}
		if s.Outside != nil {
			for _, e := range s.Outside.External {
				if e.Host == "" {
					add(e.Addr)
				}
			}
		}
	}
	return dst, true
}

// HasExternalNames reports whether the service has names in a kubetree_external zone of its own,
// as the in-tree plugin lists them for k8s_external's transfer: external addresses, or with
// headless, a headless service's endpoints.
func (r *ServiceSet) HasExternalNames(headlessOption bool) bool {
	return len(r.externals()) > 0 || headlessOption && r.kind == object.Headless && len(r.slices) > 0
}

// ExternalTransfer appends the records a kubetree_external zone transfer carries for the service,
// whose name there is base: what queries for its names answer, A, AAAA and SRV at its own name,
// SRV at _<port>._<proto> of each named port, and for a headless service's endpoints (with
// headless) A, AAAA and SRV at each endpoint's name. A load balancer hostname is its CNAME: its
// addresses are another zone's.
func (r *ServiceSet) ExternalTransfer(dst []dns.RR, base string, ttl uint32, headlessOption bool) []dns.RR {
	ask := func(owner, endpoint, port, protocol string, qtypes ...uint16) {
		for _, qtype := range qtypes {
			q := &ExternalQuery{Owner: owner, Target: base, Endpoint: endpoint, Port: port, Protocol: protocol,
				Qtype: qtype, TTL: ttl, Headless: headlessOption}
			found, _ := r.ExternalRecords(q)
			for _, rr := range found.Answer {
				if qtype == dns.TypeAAAA && rr.Header().Rrtype == dns.TypeCNAME {
					continue // sent with A already
				}
				dst = append(dst, rr)
			}
		}
	}
	ask(base, "", "", "", dns.TypeA, dns.TypeAAAA, dns.TypeSRV)
	type named struct{ name, protocol string }
	seen := map[named]bool{}
	ports := r.ports
	endpoints := headlessOption && len(r.externals()) == 0
	if endpoints {
		ports = nil
		for _, sl := range r.slices {
			ports = append(ports, sl.Ports...)
		}
	}
	for _, p := range ports {
		if n := (named{p.Name, p.Protocol}); !seen[n] {
			seen[n] = true
			ask("_"+p.Name+"._"+p.Protocol+"."+base, "", p.Name, p.Protocol, dns.TypeSRV)
		}
	}
	if !endpoints {
		return dst
	}
	for _, l := range r.endpointLabels() {
		ask(l+"."+base, l, "", "", dns.TypeA, dns.TypeAAAA, dns.TypeSRV)
	}
	return dst
}

// ExternalPTR returns the PTR records of an external IP, owned by owner: each service with it
// ("<svc>.<ns>"), named in zone, as k8s_external names them.
func ExternalPTR(owner string, services []string, zone string, ttl uint32) []dns.RR {
	out := make([]dns.RR, 0, len(services))
	for _, s := range services {
		out = append(out, &dns.PTR{Hdr: hdr(owner, dns.TypePTR, ttl), Ptr: s + "." + zone})
	}
	return out
}
