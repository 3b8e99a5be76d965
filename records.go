package kubetree

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Every record kubetree serves is made here. Services are built into svcRecords when the cluster
// changes; the records themselves are made per reply from those. The few names that are not a
// service's (the apex, dns-version, ns.dns) hold finished records, and pods' are made per query.

// builder makes record sets and records with the Corefile's settings.
type builder struct {
	ttl         uint32
	ignoreEmpty bool
	nameserver  string   // ns.dns.<the first forward zone>: the SOA and NS target of reverse zones
	clusterset  []string // the multicluster zones
	zonal       bool     // headless services answer zone-scoped names, outside multicluster zones
}

// svcRecords is everything DNS answers for one service in one zone. It is built when the service
// or one of its slices changes and never changed afterwards. The records themselves are made per
// reply from it: a reply needs its own copies anyway, and holding finished records for every
// endpoint would cost several times the memory.
type svcRecords struct {
	name string // <svc>.<ns>.svc.<zone>
	ttl  uint32
	kind serviceKind
	// multicluster says the set is a ServiceImport's: its endpoints are named <hostname>.<cluster>.
	multicluster bool
	// zonal says the set answers <zone>.pin|prefer._zone.<svc> (a headless service, zonal set).
	zonal bool
	ips   []netip.Addr // cluster IPs
	ports []port       // named service ports, for a ClusterIP service's SRV records
	cname string       // an ExternalName service's target
	// outside holds the external addresses that kubetree_external serves, shared with the model;
	// nil for most services (the pointer fits in the set's allocation size class: free).
	outside *outside
	slices  []*endpointSlice // ready endpoints, shared with the informer store
	// dupes says that an address or a hostname appears more than once across the slices (an
	// endpoint moving between slices, or dual stack), so answers must be de-duplicated.
	dupes bool
	ptrID uint32 // the service's number in the reverse index, set before it is published
}

func (*svcRecords) answersBelow() bool { return true }

// rrsets are the finished records of a name that is not a service's. Once published they are never
// modified: replies get copies.
type rrsets struct {
	A, AAAA, TXT, NS, SOA []dns.RR
	Glue                  []dns.RR // the addresses of the NS targets, for the additional section
}

func (*rrsets) answersBelow() bool { return false }

// of returns the records of one type; ANY gets none, so that it reveals nothing.
func (s *rrsets) of(qtype uint16) []dns.RR {
	switch qtype {
	case dns.TypeA:
		return s.A
	case dns.TypeAAAA:
		return s.AAAA
	case dns.TypeTXT:
		return s.TXT
	case dns.TypeNS:
		return s.NS
	case dns.TypeSOA:
		return s.SOA
	}
	return nil
}

// build returns the records of the service in zone, or nil when the service has no name there (a
// headless service without ready endpoints, an empty service under ignore empty_service).
func (b *builder) service(s *service, zone string) *svcRecords {
	r := &svcRecords{name: s.Name + "." + s.Namespace + ".svc." + zone, ttl: b.ttl, kind: s.Kind,
		multicluster: slices.Contains(b.clusterset, zone), outside: s.Outside}
	r.zonal = b.zonal && !r.multicluster && s.Kind == headless
	switch s.Kind {
	case externalName:
		if s.externalName() == "" {
			return nil
		}
		r.cname = s.externalName()
		return r
	case clusterIP:
		if b.ignoreEmpty && s.readyAddrs() == 0 {
			return nil
		}
		r.ips, r.ports = s.ClusterIPs, s.Ports
	case headless:
		if s.readyAddrs() == 0 {
			return nil
		}
		r.ports = s.Ports // for SRV records of external IPs only; the model's own array
	}
	for _, sl := range s.Slices {
		if sl.Len() > 0 {
			r.slices = append(r.slices, sl)
		}
	}
	r.dupes = hasDuplicates(r.slices)
	return r
}

func hasDuplicates(slices []*endpointSlice) bool {
	n := 0
	for _, sl := range slices {
		n += sl.Len()
	}
	if n < 2 {
		return false
	}
	seen := make(map[netip.Addr]bool, n)
	names := map[string]bool{}
	for _, sl := range slices {
		for i := range sl.Len() {
			e := sl.endpoint(i)
			if seen[e.Addr] {
				return true
			}
			seen[e.Addr] = true
			if e.Hostname != "" {
				if names[e.Hostname] && len(slices) > 1 {
					return true
				}
				names[e.Hostname] = true
			}
		}
	}
	return false
}

// addresses appends the service's A or AAAA records, owned by owner: the cluster IPs, or for a
// headless service every ready endpoint address.
func (r *svcRecords) addresses(dst []dns.RR, qtype uint16, owner string) []dns.RR {
	if r.kind != headless {
		for _, ip := range r.ips {
			dst = appendAddr(dst, qtype, owner, ip, r.ttl)
		}
		return dst
	}
	return r.endpointRecords(dst, qtype, owner, func(endpoint) bool { return true })
}

// endpointAddresses appends the A or AAAA records of the endpoints named label; found says
// whether any endpoint has that name, whatever its address family.
func (r *svcRecords) endpointAddresses(dst []dns.RR, label endpointLabel, qtype uint16, owner string) (_ []dns.RR, found bool) {
	dst = r.endpointRecords(dst, qtype, owner, func(e endpoint) bool {
		if label.names(e) {
			found = true
			return true
		}
		return false
	})
	return dst, found
}

// endpointRecords appends an address record for every endpoint that match accepts, once per
// address. The records come from one array, and their addresses are the packed bytes themselves
// (no plugin writes into an address): a reply with a thousand endpoints costs a few allocations,
// not two thousand.
func (r *svcRecords) endpointRecords(dst []dns.RR, qtype uint16, owner string, match func(endpoint) bool) []dns.RR {
	if qtype != dns.TypeA && qtype != dns.TypeAAAA {
		for _, sl := range r.slices {
			for i := range sl.Len() {
				match(sl.endpoint(i))
			}
		}
		return dst
	}
	var seen map[netip.Addr]bool
	if r.dupes {
		seen = map[netip.Addr]bool{}
	}
	want4 := qtype == dns.TypeA
	n := 0
	for _, sl := range r.slices {
		for i := range sl.Len() {
			if e := sl.endpoint(i); match(e) && e.Addr.Is4() == want4 {
				n++
			}
		}
	}
	if n == 0 {
		return dst
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
			e := sl.endpoint(i)
			if e.Addr.Is4() != want4 || !match(e) {
				continue
			}
			if seen != nil {
				if seen[e.Addr] {
					continue
				}
				seen[e.Addr] = true
			}
			if want4 {
				as = append(as, dns.A{Hdr: hdr(owner, dns.TypeA, r.ttl), A: sl.ip(i)})
				dst = append(dst, &as[len(as)-1])
			} else {
				aaaas = append(aaaas, dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, r.ttl), AAAA: sl.ip(i)})
				dst = append(dst, &aaaas[len(aaaas)-1])
			}
		}
	}
	return dst
}

// hasSRV reports whether _<name>._<protocol> names an SRV set of the service, without making it.
func (r *svcRecords) hasSRV(name, protocol string) bool {
	found := false
	r.eachPort(func(p port) bool {
		found = equalFoldASCII(name, p.Name) && equalFoldASCII(protocol, p.Protocol)
		return !found
	})
	return found
}

// hasCluster reports whether some endpoint is in the source cluster named label, so that
// <cluster>.<svc> exists in a multicluster zone.
func (r *svcRecords) hasCluster(label string) bool {
	for _, sl := range r.slices {
		if equalFoldASCII(label, sl.cluster()) {
			return true
		}
	}
	return false
}

// hasProtocol reports whether some named port uses protocol (the label after the underscore), so
// that _<proto>.<svc> exists.
func (r *svcRecords) hasProtocol(protocol string) bool {
	found := false
	r.eachPort(func(p port) bool { found = equalFoldASCII(protocol, p.Protocol); return !found })
	return found
}

// eachPort calls f with every named port that has an SRV record, until f returns false.
func (r *svcRecords) eachPort(f func(port) bool) {
	if r.kind == clusterIP {
		for _, p := range r.ports {
			if !f(p) {
				return
			}
		}
		return
	}
	if r.kind != headless {
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
// owner, and their targets' address records to extra. A ClusterIP service's records target the
// service; a headless service's, each endpoint that keep accepts (nil: every one). Weight 100 is
// spread evenly, as in the in-tree plugin.
func (r *svcRecords) srv(answer, extra []dns.RR, name, protocol, owner string, keep func(endpoint) bool) ([]dns.RR, []dns.RR) {
	first := len(answer)
	match := func(p port) bool {
		return name == "" || equalFoldASCII(name, p.Name) && equalFoldASCII(protocol, p.Protocol)
	}
	switch r.kind {
	case clusterIP:
		for _, p := range r.ports {
			if match(p) {
				answer = append(answer, &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, r.ttl), Port: p.Port, Target: r.name})
			}
		}
		if len(answer) > first {
			extra = r.addresses(extra, dns.TypeA, r.name)
			extra = r.addresses(extra, dns.TypeAAAA, r.name)
		}
	case headless:
		type target struct {
			name string
			port uint16
		}
		seen := map[target]bool{}
		targets := map[string]bool{}
		var labels []string // the targets' labels, in the order of the answer
		for _, sl := range r.slices {
			for _, p := range sl.Ports {
				if !match(p) {
					continue
				}
				for i := range sl.Len() {
					e := sl.endpoint(i)
					if keep != nil && !keep(e) {
						continue
					}
					label := e.label()
					t := target{label + "." + r.name, p.Port}
					if seen[t] {
						continue
					}
					seen[t] = true
					answer = append(answer, &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, r.ttl), Port: p.Port, Target: t.name})
					if !targets[label] {
						targets[label] = true
						labels = append(labels, label)
					}
				}
			}
		}
		extra = r.targetAddresses(extra, labels, keep)
	}
	setWeights(answer[first:])
	return answer, extra
}

// targetAddresses appends the A and then the AAAA records of each SRV target, named by its label
// below the service, as endpointAddresses would for each, but in one pass over the endpoints: a
// pass per target made an SRV answer quadratic in the endpoints (100 ms for a headless service of
// 1,000, seconds for a few thousand). Only the addresses of endpoints keep accepts count (nil: all).
func (r *svcRecords) targetAddresses(dst []dns.RR, labels []string, keep func(endpoint) bool) []dns.RR {
	if len(labels) == 0 {
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
			e := sl.endpoint(i)
			if keep != nil && !keep(e) {
				continue
			}
			label := e.label()
			if locs, ok := named[label]; ok {
				named[label] = append(locs, loc{si, i})
			}
		}
	}
	for _, label := range labels {
		owner := label + "." + r.name
		for _, want4 := range []bool{true, false} {
			var seen map[netip.Addr]bool
			if r.dupes {
				seen = map[netip.Addr]bool{}
			}
			for _, l := range named[label] {
				sl := r.slices[l.slice]
				a := sl.endpoint(l.i).Addr
				if a.Is4() != want4 || seen[a] {
					continue
				}
				if seen != nil {
					seen[a] = true
				}
				if want4 {
					dst = append(dst, &dns.A{Hdr: hdr(owner, dns.TypeA, r.ttl), A: sl.ip(l.i)})
				} else {
					dst = append(dst, &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, r.ttl), AAAA: sl.ip(l.i)})
				}
			}
		}
	}
	return dst
}

// endpointSRV answers SRV at an endpoint's own name, as the in-tree plugin does: one record per
// named port of the endpoint's slices, targeting the endpoint, its addresses in extra.
func (r *svcRecords) endpointSRV(label endpointLabel, owner string) (answer, extra []dns.RR, found bool) {
	target := ""
	ports := map[uint16]bool{}
	for _, sl := range r.slices {
		for i := range sl.Len() {
			e := sl.endpoint(i)
			if !label.names(e) {
				continue
			}
			found, target = true, e.label()+"."+r.name
			for _, p := range sl.Ports {
				if !ports[p.Port] {
					ports[p.Port] = true
					answer = append(answer, &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, r.ttl), Port: p.Port, Target: target})
				}
			}
		}
	}
	if len(answer) > 0 {
		extra, _ = r.endpointAddresses(nil, label, dns.TypeA, target)
		extra, _ = r.endpointAddresses(extra, label, dns.TypeAAAA, target)
	}
	setWeights(answer)
	return answer, extra, found
}

// Zone-scoped names, with zonal: <zone>.pin._zone.<svc>... answers the headless service's
// endpoints in that topology zone (NODATA when there are none), <zone>.prefer._zone.<svc>... those,
// or every endpoint when there are none. The zone may span labels (a zone label value may hold dots).
const (
	zoneLabel  = "_zone"
	zonePin    = "pin"
	zonePrefer = "prefer"
)

// zoneScoped answers a zone-scoped name: rest is what the query has below the service (in its case,
// with its trailing dot). exists is false when rest is not a zone-scoped name.
func (r *svcRecords) zoneScoped(owner, rest string, qtype uint16) (answer, extra []dns.RR, exists bool) {
	rest = rest[:len(rest)-1]
	cut := strings.LastIndexByte(rest, '.')
	if cut < 0 || !equalFoldASCII(rest[cut+1:], zoneLabel) {
		return nil, nil, false
	}
	rest = rest[:cut]
	cut = strings.LastIndexByte(rest, '.')
	if cut <= 0 {
		return nil, nil, false
	}
	zone, directive := rest[:cut], rest[cut+1:]
	prefer := equalFoldASCII(directive, zonePrefer)
	if !prefer && !equalFoldASCII(directive, zonePin) {
		return nil, nil, false
	}
	keep := func(e endpoint) bool { return e.Zone != "" && equalFoldASCII(zone, e.Zone) }
	if prefer && !r.anyEndpoint(keep) {
		keep = nil
	}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA:
		if keep == nil {
			keep = func(endpoint) bool { return true }
		}
		answer = r.endpointRecords(nil, qtype, owner, keep)
	case dns.TypeSRV:
		answer, extra = r.srv(nil, nil, "", "", owner, keep)
	}
	return answer, extra, true
}

// anyEndpoint reports whether match accepts some endpoint.
func (r *svcRecords) anyEndpoint(match func(endpoint) bool) bool {
	for _, sl := range r.slices {
		for i := range sl.Len() {
			if match(sl.endpoint(i)) {
				return true
			}
		}
	}
	return false
}

// setWeights spreads weight 100 evenly over an SRV set at one priority, as the in-tree plugin does.
func setWeights(srvs []dns.RR) {
	if len(srvs) == 0 {
		return
	}
	w := uint16(100 / len(srvs))
	if w == 0 {
		w = 1
	}
	for _, rr := range srvs {
		rr.(*dns.SRV).Weight = w
	}
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

// endpointAt returns the endpoint address at position at, counted across the slices, as the
// reverse index counts them.
func (r *svcRecords) endpointAt(at uint32) endpoint {
	i := int(at)
	for _, sl := range r.slices {
		if i < sl.Len() {
			return sl.endpoint(i)
		}
		i -= sl.Len()
	}
	panic("kubetree: PTR entry past its service's endpoints")
}

// SOA timers of every zone we serve; the minimum (negative caching) TTL is the Corefile's ttl.
const (
	soaRefresh = 7200
	soaRetry   = 1800
	soaExpire  = 86400
	soaMaxTTL  = 300 // the SOA's own TTL, at most
)

// dnsSchemaVersion is the version of the Kubernetes DNS specification served at dns-version.<zone>.
const dnsSchemaVersion = "1.1.0"

// nameserver is one of the zone's nameservers: a name and one of its addresses.
type nameserver struct {
	name string
	addr netip.Addr
}

// nameservers are the nameservers of zone, as the in-tree plugin finds them: each service that has
// one of this server's addresses among its ready endpoints, by its cluster IPs (a headless service
// by its endpoints in the slices holding such an address, under their endpoint names); without
// such a service, this server's own addresses under ns.dns.<zone>.
func (b *builder) nameservers(zone string, services map[string]*service, local []netip.Addr) []nameserver {
	var out []nameserver
	for _, key := range slices.Sorted(maps.Keys(services)) {
		s := services[key]
		name := s.Name + "." + s.Namespace + ".svc." + zone
		if s.Kind != headless {
			for _, ip := range s.ClusterIPs {
				out = append(out, nameserver{name, ip})
			}
			continue
		}
		for _, sl := range s.Slices {
			if sl.indexOf(local) < 0 {
				continue
			}
			for i := range sl.Len() {
				e := sl.endpoint(i)
				out = append(out, nameserver{e.label() + "." + name, e.Addr})
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, ip := range local {
		out = append(out, nameserver{"ns.dns." + zone, ip})
	}
	return out
}

// apex returns the SOA of zone with serial, and its NS records with their addresses as glue. A zone
// whose nameservers are not known yet names ns.dns.<zone>, without glue.
func (b *builder) apex(zone string, serial uint32, nss []nameserver) *rrsets {
	mname := "ns.dns." + zone
	if isReverseZone(zone) {
		mname = b.nameserver
	}
	s := &rrsets{SOA: []dns.RR{&dns.SOA{
		Hdr: hdr(zone, dns.TypeSOA, min(b.ttl, soaMaxTTL)), Ns: mname, Mbox: "hostmaster." + zone,
		Serial: serial, Refresh: soaRefresh, Retry: soaRetry, Expire: soaExpire, Minttl: b.ttl,
	}}}
	for _, ns := range nss {
		if !slices.ContainsFunc(s.NS, func(rr dns.RR) bool { return rr.(*dns.NS).Ns == ns.name }) {
			s.NS = append(s.NS, &dns.NS{Hdr: hdr(zone, dns.TypeNS, b.ttl), Ns: ns.name})
		}
		s.Glue = appendAddr(s.Glue, typeOf(ns.addr), ns.name, ns.addr, b.ttl)
	}
	if len(s.NS) == 0 {
		s.NS = []dns.RR{&dns.NS{Hdr: hdr(zone, dns.TypeNS, b.ttl), Ns: mname}}
	}
	return s
}

// dnsVersionTTL is dns-version's TTL, 8 hours as in the in-tree plugin, not the ttl option: the
// schema version never changes while the server runs.
const dnsVersionTTL = 28800

// dnsVersion returns the dns-version.<zone> TXT record.
func (b *builder) dnsVersion(zone string) *rrsets {
	return &rrsets{TXT: []dns.RR{&dns.TXT{Hdr: hdr("dns-version."+zone, dns.TypeTXT, dnsVersionTTL), Txt: []string{dnsSchemaVersion}}}}
}

// nameserverAddresses returns the A and AAAA records of ns.dns.<zone>: the addresses of its
// nameservers.
func (b *builder) nameserverAddresses(zone string, nss []nameserver) *rrsets {
	s := &rrsets{}
	name := "ns.dns." + zone
	for _, ns := range nss {
		if ns.addr.Is4() {
			s.A = appendAddr(s.A, dns.TypeA, name, ns.addr, b.ttl)
		} else {
			s.AAAA = appendAddr(s.AAAA, dns.TypeAAAA, name, ns.addr, b.ttl)
		}
	}
	return s
}

// ptr returns the PTR records of an address's owners, owned by owner.
func (b *builder) ptr(owner string, owners ptrOwners) []dns.RR {
	return b.ptrRecords(owner, ptrNames(owners))
}

// ptrRecords returns PTR records owned by owner that point at names.
func (b *builder) ptrRecords(owner string, names []string) []dns.RR {
	out := make([]dns.RR, 0, len(names))
	for _, name := range names {
		out = append(out, &dns.PTR{Hdr: hdr(owner, dns.TypePTR, b.ttl), Ptr: name})
	}
	return out
}

// podAddress returns the record of a pod's address, owned by owner, when qtype asks for its family.
func (b *builder) podAddress(owner string, addr netip.Addr, qtype uint16) []dns.RR {
	switch {
	case addr.Is4() && qtype == dns.TypeA:
		return []dns.RR{&dns.A{Hdr: hdr(owner, dns.TypeA, b.ttl), A: addr.AsSlice()}}
	case addr.Is6() && qtype == dns.TypeAAAA:
		return []dns.RR{&dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, b.ttl), AAAA: addr.AsSlice()}}
	}
	return nil
}

// extQuery is a query for a name below a service in a kubetree_external zone, split as the
// in-tree plugin splits it: <svc>.<ns>, <endpoint>.<svc>.<ns> or <port>.<protocol>.<svc>.<ns>
// (underscores stripped), with the settings of the kubetree_external stanza.
type extQuery struct {
	owner          string // the query name, as asked
	target         string // <svc>.<ns>.<zone>, lower case: the SRV target of an external IP
	endpoint       string // the endpoint label, or ""
	port, protocol string // "" for any
	qtype          uint16
	ttl            uint32 // kubetree_external's: address records; SRV and CNAME carry kubetree's, as in-tree
	headless       bool
}

// ports reports how many of ports the query's port and protocol match: a name without them matches
// every port, and one that has none stands for one unnamed port (the in-tree plugin's sentinel).
func (q *extQuery) ports(ports []port) int {
	if q.port == "" && q.protocol == "" {
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

func (q *extQuery) matches(p port) bool {
	return (q.port == "" || equalFoldASCII(q.port, p.Name)) && (q.protocol == "" || equalFoldASCII(q.protocol, p.Protocol))
}

// external makes the records k8s_external serves for q from this service, as the in-tree
// plugin's External finds them: with headless, the endpoints of a service without external
// addresses (of a headless service at its own name and below, of any service at an endpoint's
// name); otherwise every external address, at the service's name and at any name one or two labels
// below it. hosts are the load balancer hostnames whose addresses the caller looks up (after each
// CNAME for A and AAAA, in the additional section for SRV). found is false for a name error.
func (r *svcRecords) external(q *extQuery) (answer, extra []dns.RR, hosts []string, found bool) {
	var ext []externalAddr
	if r.outside != nil {
		ext = r.outside.External
	}
	if q.headless && len(ext) == 0 && (r.kind == headless || q.endpoint != "") {
		answer, extra, found = r.externalEndpoints(q)
		return answer, extra, nil, found
	}
	matched := q.ports(r.ports)
	if len(ext) == 0 || matched == 0 {
		return nil, nil, nil, false
	}
	switch q.qtype {
	case dns.TypeA, dns.TypeAAAA:
		for i, e := range ext {
			switch {
			case e.Host != "":
				if !slices.Contains(hosts, e.Host) {
					answer = append(answer, &dns.CNAME{Hdr: hdr(q.owner, dns.TypeCNAME, r.ttl), Target: e.Host})
					hosts = append(hosts, e.Host)
				}
			case !seenAddr(ext[:i], e.Addr):
				answer = appendAddr(answer, q.qtype, q.owner, e.Addr, q.ttl)
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
				target := q.target
				if e.Host != "" {
					target = e.Host
				}
				if !hasSRV(answer, target, p.Port) {
					answer = append(answer, &dns.SRV{Hdr: hdr(q.owner, dns.TypeSRV, r.ttl), Weight: weight, Port: p.Port, Target: target})
				}
				switch {
				case !first:
				case e.Host != "":
					if !slices.Contains(hosts, e.Host) {
						hosts = append(hosts, e.Host)
					}
				case !seenAddr(ext[:i], e.Addr):
					extra = appendAddr(extra, dns.TypeA, target, e.Addr, q.ttl)
					extra = appendAddr(extra, dns.TypeAAAA, target, e.Addr, q.ttl)
				}
			}
			first = false
		}
	}
	return answer, extra, hosts, true
}

// externalEndpoints makes the records of q from the service's ready endpoints.
func (r *svcRecords) externalEndpoints(q *extQuery) (answer, extra []dns.RR, found bool) {
	label := parseEndpointLabel(q.endpoint)
	pairs := 0 // endpoint and port pairs, which the in-tree plugin's SRV weights count
	var buf [4]*endpointSlice
	matching := buf[:0]
	for _, sl := range r.slices {
		ports := q.ports(sl.Ports)
		if ports == 0 {
			continue
		}
		n := 0
		for i := range sl.Len() {
			if q.endpoint == "" || label.names(sl.endpoint(i)) {
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
	named := func(e endpoint) bool { return q.endpoint == "" || label.names(e) }
	switch q.qtype {
	case dns.TypeA, dns.TypeAAAA:
		sub := *r
		sub.slices, sub.ttl = matching, q.ttl
		answer = sub.endpointRecords(nil, q.qtype, q.owner, named)
	case dns.TypeSRV:
		weight := srvWeight(pairs)
		type address struct {
			target string
			addr   netip.Addr
		}
		seen := map[address]bool{}
		type service struct {
			target string
			port   uint16
		}
		srvs := map[service]bool{}
		for _, sl := range matching {
			for i := range sl.Len() {
				e := sl.endpoint(i)
				if !named(e) {
					continue
				}
				target := e.label() + "." + q.target
				served := false
				for _, p := range sl.Ports {
					if !q.matches(p) {
						continue
					}
					served = true
					if t := (service{target, p.Port}); !srvs[t] {
						srvs[t] = true
						answer = append(answer, &dns.SRV{Hdr: hdr(q.owner, dns.TypeSRV, r.ttl), Weight: weight, Port: p.Port, Target: target})
					}
				}
				if a := (address{target, e.Addr}); served && !seen[a] {
					seen[a] = true
					extra = appendAddr(extra, dns.TypeA, target, e.Addr, q.ttl)
					extra = appendAddr(extra, dns.TypeAAAA, target, e.Addr, q.ttl)
				}
			}
		}
	}
	return answer, extra, true
}

// srvWeight is the in-tree plugin's weight for an SRV set made of n candidates: 100 spread over
// all of them, duplicates included, at least 1.
func srvWeight(n int) uint16 {
	return uint16(max(100/n, 1))
}

func hasSRV(rrs []dns.RR, target string, port uint16) bool {
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SRV); ok && s.Port == port && s.Target == target {
			return true
		}
	}
	return false
}

func seenAddr(ext []externalAddr, addr netip.Addr) bool {
	for _, e := range ext {
		if e.Host == "" && e.Addr == addr {
			return true
		}
	}
	return false
}

// externalSOA is the SOA of a kubetree_external zone, as k8s_external writes it: its nameserver
// (ns1.<apex>.<zone>), its mailbox (hostmaster.<apex>.<zone>), the cluster's serial.
func externalSOA(zone, nameserver, hostmaster string, ttl, serial uint32) *dns.SOA {
	return &dns.SOA{Hdr: hdr(zone, dns.TypeSOA, ttl), Ns: nameserver, Mbox: hostmaster,
		Serial: serial, Refresh: soaRefresh, Retry: soaRetry, Expire: soaExpire, Minttl: ttl}
}

// externalNS is the NS record of a kubetree_external zone.
func externalNS(zone, nameserver string, ttl uint32) *dns.NS {
	return &dns.NS{Hdr: hdr(zone, dns.TypeNS, ttl), Ns: nameserver}
}

// dnsBehind is what the applier knows of the cluster DNS services this server is behind (those
// with one of its local addresses among their ready endpoints), published as one immutable value.
type dnsBehind struct {
	services []*service
	local    []netip.Addr
}

// externalNameservers appends what the in-tree plugin gives k8s_external as the addresses of its
// nameserver: of each service this server is behind, its external IPs, or with endpoints (the
// headless option) a headless service's endpoints in the slices that hold this server. They are of
// type qtype, owned by owner with ttl, each address once. found is false when this server is behind
// no service: then it is the server's own addresses that count.
func (b *dnsBehind) externalNameservers(dst []dns.RR, qtype uint16, owner string, ttl uint32, endpoints bool) (_ []dns.RR, found bool) {
	if b == nil || len(b.services) == 0 {
		return dst, false
	}
	var seen []netip.Addr
	add := func(addr netip.Addr) {
		if !slices.Contains(seen, addr) {
			seen = append(seen, addr)
			dst = appendAddr(dst, qtype, owner, addr, ttl)
		}
	}
	for _, s := range b.services {
		if endpoints && s.Kind == headless {
			for _, sl := range s.Slices {
				if sl.indexOf(b.local) < 0 {
					continue
				}
				for i := range sl.Len() {
					add(sl.endpoint(i).Addr)
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

// hasExternalNames reports whether the service has names in a kubetree_external zone of its own,
// as the in-tree plugin lists them for k8s_external's transfer: external addresses, or with
// headless, a headless service's endpoints.
func (r *svcRecords) hasExternalNames(headlessOption bool) bool {
	return r.outside != nil && len(r.outside.External) > 0 || headlessOption && r.kind == headless && len(r.slices) > 0
}

// externalTransfer appends the records a kubetree_external zone transfer carries for the service,
// whose name there is base: what queries for its names answer, A, AAAA and SRV at its own name,
// SRV at _<port>._<proto> of each named port, and for a headless service's endpoints (with
// headless) A, AAAA and SRV at each endpoint's name. A load balancer hostname is its CNAME: its
// addresses are another zone's.
func (r *svcRecords) externalTransfer(dst []dns.RR, base string, ttl uint32, headlessOption bool) []dns.RR {
	ask := func(owner, endpoint, port, protocol string, qtypes ...uint16) {
		for _, qtype := range qtypes {
			q := &extQuery{owner: owner, target: base, endpoint: endpoint, port: port, protocol: protocol,
				qtype: qtype, ttl: ttl, headless: headlessOption}
			answer, _, _, _ := r.external(q)
			for _, rr := range answer {
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
	endpoints := headlessOption && (r.outside == nil || len(r.outside.External) == 0)
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
	known := map[string]bool{}
	for _, sl := range r.slices {
		for i := range sl.Len() {
			if l := sl.endpoint(i).label(); !known[l] {
				known[l] = true
				ask(l+"."+base, l, "", "", dns.TypeA, dns.TypeAAAA, dns.TypeSRV)
			}
		}
	}
	return dst
}

// externalPTR returns the PTR records of an external IP, owned by owner: each service with it
// ("<svc>.<ns>"), named in zone, as k8s_external names them.
func externalPTR(owner string, services []string, zone string, ttl uint32) []dns.RR {
	out := make([]dns.RR, 0, len(services))
	for _, s := range services {
		out = append(out, &dns.PTR{Hdr: hdr(owner, dns.TypePTR, ttl), Ptr: s + "." + zone})
	}
	return out
}
