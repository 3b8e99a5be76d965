package kubetree

import (
	"net"
	"net/netip"
	"slices"
	"strings"
)

// The model: what DNS needs of the cluster, and nothing else. It holds every endpoint of the
// cluster, so it is packed; nothing changes a model value once it is stored.

// service is what DNS needs of a Service and its EndpointSlices. objects.go makes it from API
// objects (assemble), so that building records does not depend on client-go.
type service struct {
	Namespace, Name string
	Kind            serviceKind
	ClusterIPs      []netip.Addr
	Ports           []port // named ports only: unnamed ports get no SRV records
	Slices          []*endpointSlice
	Outside         *outside // nil for most services
}

// outside is what a service has outside the cluster: an ExternalName service's target, or the
// external addresses of a ClusterIP or headless service (spec.externalIPs and the load balancer's
// ingress), which kubetree_external serves. Most services have none, so it hangs off a pointer that
// is nil for them: it costs them nothing (the service stays in its allocation size class).
type outside struct {
	ExternalName string // lower case, fully qualified
	// External lists spec.externalIPs, then the load balancer ingress, in the order of the
	// Service, as the in-tree plugin does: an ingress is its IP, or its hostname (lower case,
	// fully qualified) when it has no IP. Duplicates are kept, because the in-tree plugin counts
	// them when it weighs SRV records.
	External []externalAddr
}

// externalAddr is one external address of a service: an IP, or a host name (Addr invalid).
type externalAddr struct {
	Addr netip.Addr
	Host string
}

// externalName returns an ExternalName service's target, or "".
func (s *service) externalName() string {
	if s.Outside == nil {
		return ""
	}
	return s.Outside.ExternalName
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

// hasEndpointAt reports whether one of addrs is a ready endpoint of the service.
func (s *service) hasEndpointAt(addrs []netip.Addr) bool {
	for _, sl := range s.Slices {
		if sl.indexOf(addrs) >= 0 {
			return true
		}
	}
	return false
}

// indexOf returns the index of the first endpoint at one of addrs, or -1.
func (s *endpointSlice) indexOf(addrs []netip.Addr) int {
	if len(addrs) == 0 {
		return -1
	}
	for i := range s.Len() {
		if slices.Contains(addrs, s.endpoint(i).Addr) {
			return i
		}
	}
	return -1
}

// readyAddrs counts the ready addresses, for ignore empty_service.
func (s *service) readyAddrs() int {
	n := 0
	for _, sl := range s.Slices {
		n += sl.Len()
	}
	return n
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

// endpointLabel is a query's label below a service, read once per query: an endpoint with a
// hostname is named by it, one without by its address with dashes, which addr holds when the label
// is one (in its only spelling: 10-0-0-01 names nothing).
type endpointLabel struct {
	text string // in the query's case
	addr netip.Addr
}

func parseEndpointLabel(label string) endpointLabel {
	l := endpointLabel{text: label}
	if len(label) > 47 || len(label) == 0 {
		return l
	}
	var buf [48]byte
	text := lowerInto(buf[:0], label)
	sep := byte(':')
	if !strings.Contains(label, "--") && strings.Count(label, "-") == 3 {
		sep = '.'
	}
	for i, c := range text {
		if c == '-' {
			text[i] = sep
		}
	}
	ip, ok := parseIP(string(text))
	if !ok {
		return l
	}
	var again [48]byte
	if equalFoldASCII(label, string(appendDashed(again[:0], ip))) {
		l.addr = ip
	}
	return l
}

// names reports whether the label names e.
func (l endpointLabel) names(e endpoint) bool {
	if e.Hostname != "" {
		return equalFoldASCII(l.text, e.Hostname)
	}
	return l.addr.IsValid() && l.addr == e.Addr
}
