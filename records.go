package kubetree

import (
	"net"
	"net/netip"
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
	Slices          []endpointSlice
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

type endpointSlice struct {
	Ports     []port // named ports only
	Endpoints []endpoint
}

// endpoint is one ready endpoint; not-ready endpoints never reach the model.
type endpoint struct {
	Addrs    []netip.Addr
	Hostname string // the endpoint's hostname, or the pod name with endpoint_pod_names; may be ""
}

// readyAddrs counts the ready addresses, for ignore empty_service.
func (s *service) readyAddrs() int {
	n := 0
	for _, sl := range s.Slices {
		for _, ep := range sl.Endpoints {
			n += len(ep.Addrs)
		}
	}
	return n
}

// ptrTarget is one reverse record a service owns: addr points at name. clusterIP wins over
// endpoint names for the same address, as in the in-tree plugin.
type ptrTarget struct {
	Addr      netip.Addr
	Name      string
	ClusterIP bool
}

// build returns the subtree of names the service owns in zone (rooted at <svc>.<ns>.svc.<zone>),
// or nil when the service has no name there (a headless service without ready endpoints, an empty
// service under ignore empty_service). It also returns the reverse records it owns.
func (k *Kubetree) build(s *service, zone string) (*Node, []ptrTarget) {
	b := builder{ttl: k.cfg.ttl, base: s.Name + "." + s.Namespace + ".svc." + zone, root: &Node{},
		hosts: map[string]*Node{}, srvSeen: map[srvKey]bool{}, svcAddrs: map[netip.Addr]bool{}}
	svc := b.root.Records()

	switch s.Kind {
	case externalName:
		if s.ExternalName == "" {
			return nil, nil
		}
		svc.CNAME = []dns.RR{&dns.CNAME{Hdr: hdr(b.base, dns.TypeCNAME, b.ttl), Target: s.ExternalName}}
		return b.root, nil
	case clusterIP:
		if k.cfg.ignoreEmpty && s.readyAddrs() == 0 {
			return nil, nil
		}
		for _, ip := range s.ClusterIPs {
			svc.addAddr(b.base, ip, b.ttl)
			b.ptrs = append(b.ptrs, ptrTarget{Addr: ip, Name: b.base, ClusterIP: true})
		}
		for _, p := range s.Ports {
			b.srv(svc, b.base, p.Port)
			b.srv(b.portNode(p), b.base, p.Port)
		}
	}

	// Per-endpoint names exist for every service with endpoints; the service name itself answers
	// with the endpoints only when it is headless.
	for _, sl := range s.Slices {
		for _, ep := range sl.Endpoints {
			for _, ip := range ep.Addrs {
				target := b.endpoint(ep.Hostname, ip)
				if s.Kind != headless {
					continue
				}
				if !b.svcAddrs[ip] {
					b.svcAddrs[ip] = true
					svc.addAddr(b.base, ip, b.ttl)
				}
				for _, p := range sl.Ports {
					b.srv(svc, target, p.Port)
					b.srv(b.portNode(p), target, p.Port)
				}
			}
		}
	}
	if s.Kind == headless && len(svc.A)+len(svc.AAAA) == 0 {
		return nil, nil
	}
	b.finish()
	return b.root, b.ptrs
}

// builder collects one service's records in one zone.
type builder struct {
	ttl     uint32
	base    string // <svc>.<ns>.svc.<zone>
	root    *Node
	hosts   map[string]*Node // per-endpoint names by label
	srvSeen map[srvKey]bool
	srvSets []*RRSets
	ptrs    []ptrTarget
	// svcAddrs de-duplicates a headless service's addresses across its slices.
	svcAddrs map[netip.Addr]bool
}

type srvKey struct {
	set    *RRSets
	target string
	port   uint16
}

// endpoint adds ip under the endpoint's name (its hostname, else the dashed address) and returns
// that name.
func (b *builder) endpoint(hostname string, ip netip.Addr) string {
	label := hostname
	if label == "" {
		label = dashed(ip)
	}
	n := b.hosts[label]
	if n == nil {
		n = b.root.Child(label)
		b.hosts[label] = n
	}
	name := label + "." + b.base
	if r := n.Records(); !hasAddr(r, ip) {
		r.addAddr(name, ip, b.ttl)
		b.ptrs = append(b.ptrs, ptrTarget{Addr: ip, Name: name})
	}
	return name
}

func (b *builder) portNode(p port) *RRSets {
	// _<port>._<proto>.<svc>: walking down from the service, the protocol comes first.
	return b.root.Child("_" + p.Protocol).Child("_" + p.Name).Records()
}

// srv adds one SRV record to set, once per target and port. Records are never shared between sets:
// each set spreads its own weights.
func (b *builder) srv(set *RRSets, target string, port uint16) {
	key := srvKey{set, target, port}
	if b.srvSeen[key] {
		return
	}
	if len(set.SRV) == 0 {
		b.srvSets = append(b.srvSets, set)
	}
	b.srvSeen[key] = true
	set.SRV = append(set.SRV, &dns.SRV{Hdr: hdr("", dns.TypeSRV, b.ttl), Port: port, Target: target})
}

// finish fills the additional section of every SRV set with its targets' addresses and spreads the
// weights.
func (b *builder) finish() {
	svc := b.root.rrs
	for _, set := range b.srvSets {
		seen := map[string]bool{}
		for _, rr := range set.SRV {
			target := rr.(*dns.SRV).Target
			if seen[target] {
				continue
			}
			seen[target] = true
			addrs := svc
			if target != b.base {
				addrs = b.hosts[firstLabel(target)].rrs
			}
			set.Extra = append(append(set.Extra, addrs.A...), addrs.AAAA...)
		}
		setWeights(set.SRV)
	}
}

func (r *RRSets) addAddr(name string, ip netip.Addr, ttl uint32) {
	if ip.Is4() {
		a := ip.As4()
		r.A = append(r.A, &dns.A{Hdr: hdr(name, dns.TypeA, ttl), A: net.IP(a[:])})
		return
	}
	a := ip.As16()
	r.AAAA = append(r.AAAA, &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA, ttl), AAAA: net.IP(a[:])})
}

func hasAddr(r *RRSets, ip netip.Addr) bool {
	for _, rr := range r.A {
		if a, ok := netip.AddrFromSlice(rr.(*dns.A).A); ok && a.Unmap() == ip {
			return true
		}
	}
	for _, rr := range r.AAAA {
		if a, ok := netip.AddrFromSlice(rr.(*dns.AAAA).AAAA); ok && a == ip {
			return true
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

func firstLabel(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return name
}

// dashed is the name an endpoint without a hostname gets: 10-0-0-1, or for IPv6 the compressed
// form with dashes (fd00--1), a trailing dash completed with 0, as the in-tree plugin does.
func dashed(ip netip.Addr) string {
	if ip.Is4() {
		return strings.ReplaceAll(ip.String(), ".", "-")
	}
	s := strings.ReplaceAll(ip.String(), ":", "-")
	if strings.HasSuffix(s, "-") {
		s += "0"
	}
	return s
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
