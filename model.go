package kubetree

import (
	"net"
	"net/netip"
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
// only when some endpoint has one, all in one string (a string per endpoint took 16 bytes for its
// header alone, more than its address).
type endpointSlice struct {
	Ports    []port // named ports only
	addrs    []byte
	v6       bool
	names    string   // the hostnames, one after another
	nameEnds []uint32 // where each address's hostname ends in names; nil when none has one
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
	for _, e := range eps {
		if s.v6 {
			b := e.Addr.As16()
			s.addrs = append(s.addrs, b[:]...)
		} else {
			b := e.Addr.As4()
			s.addrs = append(s.addrs, b[:]...)
		}
		if e.Hostname != "" && s.nameEnds == nil {
			s.nameEnds = make([]uint32, len(eps))
		}
	}
	if s.nameEnds != nil {
		var names strings.Builder
		size := 0
		for _, e := range eps {
			size += len(e.Hostname)
		}
		names.Grow(size)
		for i, e := range eps {
			names.WriteString(e.Hostname)
			s.nameEnds[i] = uint32(names.Len())
		}
		s.names = names.String()
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
	if s.nameEnds != nil {
		start := uint32(0)
		if i > 0 {
			start = s.nameEnds[i-1]
		}
		e.Hostname = s.names[start:s.nameEnds[i]]
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
