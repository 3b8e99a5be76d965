package kubetree

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// service is what DNS needs of a Service and its EndpointSlices; watch.go fills it from API
// objects, so that building records does not depend on client-go.
type service struct {
	Namespace, Name string
	Kind            serviceKind
	ClusterIPs      []netip.Addr
	Ports           []port // named ports only: unnamed ports get no SRV records
	ExternalName    string // lower case, fully qualified
	Slices          []*endpointSlice
}

type serviceKind uint8

const (
	clusterIP serviceKind = iota
	headless
	externalName
)

type port struct {
	Name     string // lower case DNS label
	Protocol string // "tcp", "udp" or "sctp"
	Port     uint16
}

// endpointSlice holds the ready endpoints of one EndpointSlice. The informer store keeps it and
// records share it: nobody changes it once it is stored. It holds every endpoint of the cluster, so
// it is packed: an EndpointSlice has one address family, 4 or 16 bytes an address, and hostnames
// only when some endpoint has one.
type endpointSlice struct {
	Ports     []port // named ports only
	addrs     []byte
	v6        bool
	hostnames []string // one per address, or nil
}

// newEndpointSlice packs endpoints.
func newEndpointSlice(ports []port, eps []endpoint) *endpointSlice {
	s := &endpointSlice{Ports: ports}
	for _, e := range eps {
		s.v6 = s.v6 || !e.Addr.Is4()
	}
	size := 4
	if s.v6 {
		size = 16
	}
	s.addrs = make([]byte, 0, size*len(eps))
	for i, e := range eps {
		if s.v6 {
			b := e.Addr.As16()
			s.addrs = append(s.addrs, b[:]...)
		} else {
			b := e.Addr.As4()
			s.addrs = append(s.addrs, b[:]...)
		}
		if e.Hostname != "" && s.hostnames == nil {
			s.hostnames = make([]string, len(eps))
		}
		if s.hostnames != nil {
			s.hostnames[i] = e.Hostname
		}
	}
	if len(s.addrs) == 0 {
		s.addrs = nil
	}
	return s
}

// Len is the number of endpoint addresses.
func (s *endpointSlice) Len() int {
	if s.v6 {
		return len(s.addrs) / 16
	}
	return len(s.addrs) / 4
}

// endpoint returns the i-th endpoint address and its hostname.
func (s *endpointSlice) endpoint(i int) endpoint {
	var e endpoint
	if s.v6 {
		// IPv4-mapped addresses never get here (parseIP refuses them), so an IPv4 address packed
		// as 16 bytes in a mixed slice comes back as IPv4.
		e.Addr = netip.AddrFrom16([16]byte(s.addrs[16*i : 16*i+16])).Unmap()
	} else {
		e.Addr = netip.AddrFrom4([4]byte(s.addrs[4*i : 4*i+4]))
	}
	if s.hostnames != nil {
		e.Hostname = s.hostnames[i]
	}
	return e
}

// ip returns the i-th address as the packed bytes themselves, capped so that an append copies.
func (s *endpointSlice) ip(i int) net.IP {
	if !s.v6 {
		return net.IP(s.addrs[4*i : 4*i+4 : 4*i+4])
	}
	ip := net.IP(s.addrs[16*i : 16*i+16 : 16*i+16])
	if v4 := ip.To4(); v4 != nil { // an IPv4 address in a mixed slice (parseIP refuses real 4-in-6)
		return v4
	}
	return ip
}

// endpoints unpacks the slice, for tests and diagnostics.
func (s *endpointSlice) endpoints() []endpoint {
	out := make([]endpoint, 0, s.Len())
	for i := range s.Len() {
		out = append(out, s.endpoint(i))
	}
	return out
}

// endpoint is one ready address of an endpoint; not-ready endpoints never reach the model, and an
// endpoint with two addresses is two of these with the same hostname.
type endpoint struct {
	Addr     netip.Addr
	Hostname string // the endpoint's hostname, or the pod name with endpoint_pod_names; may be ""
}

// label is the endpoint's name below its service: its hostname, else its address with dashes.
func (e endpoint) label() string {
	if e.Hostname != "" {
		return e.Hostname
	}
	return dashed(e.Addr)
}

// is reports whether label (in any case) names the endpoint. It does not allocate.
func (e endpoint) is(label string) bool {
	if e.Hostname != "" {
		return equalFoldASCII(label, e.Hostname)
	}
	var buf [48]byte
	return equalFoldASCII(label, string(appendDashed(buf[:0], e.Addr)))
}

// readyAddrs counts the ready addresses, for ignore empty_service.
func (s *service) readyAddrs() int {
	n := 0
	for _, sl := range s.Slices {
		n += sl.Len()
	}
	return n
}

// svcRecords is everything DNS answers for one service in one zone. It is built when the service
// or one of its slices changes and never changed afterwards. The records themselves are made per
// reply from it: a reply needs its own copies anyway, and holding finished records for every
// endpoint would cost several times the memory.
type svcRecords struct {
	name   string // <svc>.<ns>.svc.<zone>
	ttl    uint32
	kind   serviceKind
	ips    []netip.Addr     // cluster IPs
	ports  []port           // named service ports, for a ClusterIP service's SRV records
	cname  string           // an ExternalName service's target
	slices []*endpointSlice // ready endpoints, shared with the informer store
	// dupes says that an address or a hostname appears more than once across the slices (an
	// endpoint moving between slices, or dual stack), so answers must be de-duplicated.
	dupes bool
	ptrID uint32 // the service's number in the reverse index
}

// build returns the records of the service in zone, or nil when the service has no name there (a
// headless service without ready endpoints, an empty service under ignore empty_service).
func (k *Kubetree) build(s *service, zone string) *svcRecords {
	r := &svcRecords{name: s.Name + "." + s.Namespace + ".svc." + zone, ttl: k.cfg.ttl, kind: s.Kind}
	switch s.Kind {
	case externalName:
		if s.ExternalName == "" {
			return nil
		}
		r.cname = s.ExternalName
		return r
	case clusterIP:
		if k.cfg.ignoreEmpty && s.readyAddrs() == 0 {
			return nil
		}
		r.ips, r.ports = s.ClusterIPs, s.Ports
	case headless:
		if s.readyAddrs() == 0 {
			return nil
		}
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
func (r *svcRecords) endpointAddresses(dst []dns.RR, label string, qtype uint16, owner string) (_ []dns.RR, found bool) {
	dst = r.endpointRecords(dst, qtype, owner, func(e endpoint) bool {
		if e.is(label) {
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
// service; a headless service's, each endpoint. Weight 100 is spread evenly, as in the in-tree plugin.
func (r *svcRecords) srv(answer, extra []dns.RR, name, protocol, owner string) ([]dns.RR, []dns.RR) {
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
		extra = r.targetAddresses(extra, labels)
	}
	setWeights(answer[first:])
	return answer, extra
}

// targetAddresses appends the A and then the AAAA records of each SRV target, named by its label
// below the service, as endpointAddresses would for each, but in one pass over the endpoints: a
// pass per target made an SRV answer quadratic in the endpoints (100 ms for a headless service of
// 1,000, seconds for a few thousand).
func (r *svcRecords) targetAddresses(dst []dns.RR, labels []string) []dns.RR {
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
			label := sl.endpoint(i).label()
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
func (r *svcRecords) endpointSRV(label, owner string) (answer, extra []dns.RR, found bool) {
	target := ""
	ports := map[uint16]bool{}
	for _, sl := range r.slices {
		for i := range sl.Len() {
			e := sl.endpoint(i)
			if !e.is(label) {
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

// dashed is the name an endpoint without a hostname gets: 10-0-0-1, or for IPv6 the compressed
// form with dashes (fd00--1), a trailing dash completed with 0, as the in-tree plugin does.
func dashed(ip netip.Addr) string {
	var buf [48]byte
	return string(appendDashed(buf[:0], ip))
}

func appendDashed(dst []byte, ip netip.Addr) []byte {
	start := len(dst)
	dst = ip.AppendTo(dst)
	for i := start; i < len(dst); i++ {
		if dst[i] == '.' || dst[i] == ':' {
			dst[i] = '-'
		}
	}
	if dst[len(dst)-1] == '-' {
		dst = append(dst, '0')
	}
	return dst
}

func hdr(name string, t uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}

// apex returns the records every zone has at its apex: SOA and NS, and for forward zones the
// dns-version TXT record and the svc and pod names.
func (k *Kubetree) apex(zone string) *Node {
	n := &Node{rrs: k.apexRecords(zone, uint32(time.Now().Unix()))}
	if isReverse(zone) {
		return n
	}
	n.Child("dns-version").Records().TXT = []dns.RR{&dns.TXT{Hdr: hdr("dns-version."+zone, dns.TypeTXT, k.cfg.ttl), Txt: []string{"1.1.0"}}}
	n.Child("svc").rrs = present
	n.Child("pod").rrs = present
	n.Child("dns").Child("ns").rrs = present
	return n
}

func (k *Kubetree) apexRecords(zone string, serial uint32) *RRSets {
	ttl := k.cfg.ttl
	ns := "ns.dns." + k.forward[0]
	if !isReverse(zone) {
		ns = "ns.dns." + zone
	}
	return &RRSets{
		SOA: []dns.RR{&dns.SOA{
			Hdr: hdr(zone, dns.TypeSOA, min(ttl, 300)), Ns: ns, Mbox: "hostmaster." + zone,
			Serial: serial, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: ttl,
		}},
		NS: []dns.RR{&dns.NS{Hdr: hdr(zone, dns.TypeNS, ttl), Ns: ns}},
	}
}

func isReverse(zone string) bool {
	return strings.HasSuffix(zone, "in-addr.arpa.") || strings.HasSuffix(zone, "ip6.arpa.")
}
