package records

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
)

// Answer makes the records of one type at a name of the service or below it (rest, in the
// query's case, "" for the service's own name), owned by owner, and the SRV targets' addresses for
// the additional section, at most roomFor records in all (RoomFor; Unlimited for every one). With
// topology, a headless service's endpoints are those the client is sent to (topology.go); the zero
// Client gets every one.
func (r *ServiceSet) Answer(owner, rest string, qtype uint16, client Client, roomFor int) Reply {
	first, second, more := splitRest(rest)
	near := r.closestFor(client)
	var keep func(object.Endpoint) bool // nil: every endpoint
	if near.filters() {
		keep = near.keeps
	}
	rm := room{left: roomFor}
	var reply Reply
	var svcName string // the name SRV records target, with the zone as asked
	if qtype == dns.TypeSRV {
		svcName = r.nameAsAsked(owner)
	}
	switch {
	case rest == "":
		switch {
		case r.kind == object.ExternalName:
			reply.Answer = append(reply.Answer, &dns.CNAME{Hdr: hdr(owner, dns.TypeCNAME, r.ttl), Target: r.target()})
			reply.CNAME = r.target()
		case qtype == dns.TypeSRV:
			reply.Answer, reply.Extra = r.srv(nil, nil, "", "", owner, svcName, keep, &rm)
		case keep != nil:
			reply.Answer = r.endpointRecords(nil, qtype, owner, keep, &rm)
		default:
			reply.Answer = r.addresses(nil, qtype, owner, &rm)
		}
		reply.Exists = true
	case more && r.zonal:
		reply.Answer, reply.Extra, reply.Exists = r.zoneScoped(owner, rest, svcName, qtype, &rm)
	case r.kind == object.ExternalName || more:
	case second == "" && strings.HasPrefix(first, "_"):
		reply.Exists = r.hasProtocol(first[1:]) // _<proto>.<svc>: an empty non-terminal
	case r.multicluster && second == "":
		reply.Exists = r.hasCluster(first) // <cluster>.<svc>: an empty non-terminal
	case r.multicluster && !strings.HasPrefix(first, "_") && !strings.HasPrefix(second, "_"):
		// <hostname>.<cluster>.<svc>: an endpoint of one source cluster.
		label := parseEndpointLabel(first)
		label.cluster = second
		if qtype == dns.TypeSRV {
			reply.Answer, reply.Extra, reply.Exists = r.endpointSRV(label, owner, svcName, nil, &rm)
		} else {
			reply.Answer, reply.Exists = r.endpointsNamed(nil, label, qtype, owner, &rm)
		}
	case second == "" && qtype == dns.TypeSRV:
		reply.Answer, reply.Extra, reply.Exists = r.endpointSRV(parseEndpointLabel(first), owner, svcName, keep, &rm)
	case second == "":
		reply.Answer, reply.Exists = r.endpointsNamedClosest(nil, parseEndpointLabel(first), qtype, owner, keep, &rm)
	case strings.HasPrefix(first, "_") && strings.HasPrefix(second, "_"):
		if qtype != dns.TypeSRV {
			reply.Exists = r.hasPort(first[1:], second[1:])
			break
		}
		reply.Answer, reply.Extra = r.srv(nil, nil, first[1:], second[1:], owner, svcName, keep, &rm)
		reply.Exists = len(reply.Answer) > 0
	}
	reply.Truncated = rm.cut
	return reply
}

// addresses appends the service's A or AAAA records, owned by owner: the cluster IPs, or for a
// headless service every ready endpoint address.
func (r *ServiceSet) addresses(dst []dns.RR, qtype uint16, owner string, rm *room) []dns.RR {
	if r.kind != object.Headless {
		for _, ip := range r.ips {
			if typeOf(ip) == qtype && rm.take() {
				dst = appendAddr(dst, qtype, owner, ip, r.ttl)
			}
		}
		return dst
	}
	return r.endpointRecords(dst, qtype, owner, func(object.Endpoint) bool { return true }, rm)
}

// endpointsNamed appends the A or AAAA records of the endpoints named label; found says
// whether any endpoint has that name, whatever its address family.
func (r *ServiceSet) endpointsNamed(dst []dns.RR, label endpointLabel, qtype uint16, owner string, rm *room) (_ []dns.RR, found bool) {
	dst = r.endpointRecords(dst, qtype, owner, func(e object.Endpoint) bool {
		if label.denotes(e) {
			found = true
			return true
		}
		return false
	}, rm)
	return dst, found
}

// endpointsNamedClosest appends the A or AAAA records of the endpoints named label that keep
// accepts (nil: every one), or of every endpoint so named when keep accepts none: a name that
// exists answers whoever asks. found says whether any endpoint has that name.
func (r *ServiceSet) endpointsNamedClosest(dst []dns.RR, label endpointLabel, qtype uint16, owner string, keep func(object.Endpoint) bool, rm *room) (_ []dns.RR, found bool) {
	if keep != nil {
		n := len(dst)
		dst = r.endpointRecords(dst, qtype, owner, func(e object.Endpoint) bool {
			if label.denotes(e) {
				found = true
				return keep(e)
			}
			return false
		}, rm)
		if len(dst) > n {
			return dst, found
		}
	}
	return r.endpointsNamed(dst, label, qtype, owner, rm)
}

// endpointRecords appends an address record for every endpoint that match accepts, once per
// address, as many as rm has room for. The records come from one array, and their addresses are
// the packed bytes themselves (no plugin writes into an address): a reply with a thousand
// endpoints costs a few allocations, not two thousand. match sees every endpoint, room or not.
func (r *ServiceSet) endpointRecords(dst []dns.RR, qtype uint16, owner string, match func(object.Endpoint) bool, rm *room) []dns.RR {
	if qtype != dns.TypeA && qtype != dns.TypeAAAA {
		for _, sl := range r.slices {
			for i := range sl.Len() {
				match(sl.Endpoint(i))
			}
		}
		return dst
	}
	want4 := qtype == dns.TypeA
	n := 0
	for _, sl := range r.slices {
		for i := range sl.Len() {
			if e := sl.Endpoint(i); match(e) && e.Addr.Is4() == want4 {
				n++
			}
		}
	}
	if n == 0 {
		return dst
	}
	n = min(n, rm.left) // the arrays never grow: the records point into them
	var seen map[netip.Addr]bool
	if r.dupes {
		seen = map[netip.Addr]bool{}
	}
	dst = slices.Grow(dst, n)
	var as []dns.A
	var aaaas []dns.AAAA
	if want4 {
		as = make([]dns.A, 0, n)
	} else {
		aaaas = make([]dns.AAAA, 0, n)
	}
	for _, sl := range r.slices {
		for i := range sl.Len() {
			e := sl.Endpoint(i)
			if e.Addr.Is4() != want4 || !match(e) {
				continue
			}
			if seen != nil {
				if seen[e.Addr] {
					continue
				}
				seen[e.Addr] = true
			}
			if !rm.take() {
				return dst
			}
			if want4 {
				as = append(as, dns.A{Hdr: hdr(owner, dns.TypeA, r.ttl), A: sl.IP(i)})
				dst = append(dst, &as[len(as)-1])
			} else {
				aaaas = append(aaaas, dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, r.ttl), AAAA: sl.IP(i)})
				dst = append(dst, &aaaas[len(aaaas)-1])
			}
		}
	}
	return dst
}

// appendAddr appends an A record for an IPv4 address when qtype is A, an AAAA record for an IPv6
// address when qtype is AAAA, and nothing otherwise.
func appendAddr(dst []dns.RR, qtype uint16, owner string, ip netip.Addr, ttl uint32) []dns.RR {
	switch {
	case qtype == dns.TypeA && ip.Is4():
		a := ip.As4()
		return append(dst, &dns.A{Hdr: hdr(owner, dns.TypeA, ttl), A: net.IP(a[:])})
	case qtype == dns.TypeAAAA && ip.Is6():
		a := ip.As16()
		return append(dst, &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, ttl), AAAA: net.IP(a[:])})
	}
	return dst
}

// AddressOf is the address of an A or AAAA record.
func AddressOf(rr dns.RR) (netip.Addr, bool) {
	switch a := rr.(type) {
	case *dns.A:
		return netip.AddrFromSlice(a.A.To4())
	case *dns.AAAA:
		return netip.AddrFromSlice(a.AAAA)
	}
	return netip.Addr{}, false
}

// typeOf is the address record type of ip.
func typeOf(ip netip.Addr) uint16 {
	if ip.Is4() {
		return dns.TypeA
	}
	return dns.TypeAAAA
}

func hdr(name string, t uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}

// AppendCopies appends copies of src to dst, renamed to owner unless owner is "". Only the few
// records held ready (apex, dns-version, ns.dns) come here, and they are never handed out: later
// plugins reorder and rename what they get.
func AppendCopies(dst, src []dns.RR, owner string) []dns.RR {
	for _, rr := range src {
		c := dns.Copy(rr)
		if owner != "" {
			c.Header().Name = owner
		}
		dst = append(dst, c)
	}
	return dst
}
