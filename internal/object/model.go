package object

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"strings"
	"unique"
)

// The model: what DNS needs of the cluster, and nothing else. It holds every endpoint of the
// cluster, so it is packed; nothing changes a model value once it is stored.

// Service is what DNS needs of a Service and its EndpointSlices. The transforms (transform.go) make
// its parts from API objects and Assemble (assemble.go) puts them together, so that building
// records does not depend on client-go.
type Service struct {
	Namespace, Name string
	Kind            Kind
	// Distribution says how the service's endpoints are hinted for topology (with topology only).
	Distribution Distribution
	// Selector says the service selects its pods (spec.selector), so that the EndpointSlice
	// controller writes its slices; the DNS programming latency's service kind tells them apart.
	Selector bool
	// Created is when the service was created (Unix nanoseconds, 0 when unknown): the trigger time
	// of the change that gives it its names, as the EndpointSlice controller takes it.
	// Distribution, Selector and Created take bytes the service's allocation size class (128) left
	// over: they cost nothing.
	Created    int64
	ClusterIPs []netip.Addr
	Ports      []Port // named ports only: unnamed ports get no SRV records
	Slices     []*EndpointSlice
	Outside    *Outside // nil for most services
}

// Outside is what a service has outside the cluster: an ExternalName service's target, or the
// external addresses of a ClusterIP or headless service (spec.externalIPs and the load balancer's
// ingress), which kubetree_external serves. Most services have none, so it hangs off a pointer that
// is nil for them: it costs them nothing (the service stays in its allocation size class).
type Outside struct {
	ExternalName string // lower case, fully qualified
	// External lists spec.externalIPs, then the load balancer ingress, in the order of the
	// Service, as the in-tree plugin does: an ingress is its IP, or its hostname (lower case,
	// fully qualified) when it has no IP. Duplicates are kept, because the in-tree plugin counts
	// them when it weighs SRV records.
	External []ExternalAddr
}

// ExternalAddr is one external address of a service: an IP, or a host name (Addr invalid).
type ExternalAddr struct {
	Addr netip.Addr
	Host string
}

// Target returns an ExternalName service's target, or "".
func (s *Service) Target() string {
	if s.Outside == nil {
		return ""
	}
	return s.Outside.ExternalName
}

// Kind is what a Service is to DNS.
type Kind uint8

// The kinds of service: a virtual IP, the endpoints' own addresses, or a name elsewhere.
const (
	ClusterIP Kind = iota
	Headless
	ExternalName
)

// Port is a named port of a service or of an EndpointSlice: an SRV name.
type Port struct {
	Name     string // lower case DNS label
	Protocol string // "tcp", "udp" or "sctp"
	Port     uint16
}

// EndpointSlice holds the ready endpoints of one EndpointSlice (with serving_terminating, its
// serving-but-terminating ones apart). The informer store keeps it and records share it: nobody
// changes it once it is stored. It holds every endpoint of the cluster, so it is packed: an
// EndpointSlice has one address family, 4 or 16 bytes an address, and names only when some
// endpoint has a hostname (or a zone, with zonal, or a topology, with topology), the slice a
// source cluster, or serving-but-terminating endpoints.
type EndpointSlice struct {
	Ports []Port // named ports only
	addrs []byte
	v6    bool
	names *endpointNames // nil for most slices
}

// endpointNames is what a slice holds beyond its addresses; apart, so that a slice without any of
// it costs one pointer.
type endpointNames struct {
	// hostnames are the endpoints' hostnames, one after another (a string per endpoint took 16
	// bytes for its header alone, more than its address); hostnameEnds says where each address's
	// ends, nil when none has one.
	hostnames    string
	hostnameEnds []uint32
	// cluster is the source cluster of a multicluster slice: its endpoints are named
	// <hostname>.<cluster> below their ServiceImport.
	cluster string
	// zones are the distinct topology zones of the slice's endpoints (only with zonal), joined by
	// zoneSep and interned: slices of the same zones share one copy. zoneOf holds, per address,
	// 1 + its zone's place there, 0 for none; nil without zones.
	zones  unique.Handle[string]
	zoneOf []uint8
	// opted is what only an option keeps (topology, serving_terminating); nil without any. One
	// pointer for all of them, so that the names stay in their allocation size class.
	opted *optedFields
}

// optedFields is what a slice keeps only when an option asks for it.
type optedFields struct {
	// topology holds each address's topology (only with topology); nil without any.
	topology []unique.Handle[Topology]
	// terminating holds the slice's endpoints that are terminating but still serving, packed as a
	// slice of their own (only with serving_terminating); nil when it has none.
	terminating *EndpointSlice
}

// zoneSep joins a slice's zones; a zone is a label value, which cannot hold it.
const zoneSep = "/"

// maxZones bounds the distinct zones of one slice, as zoneOf counts them in a byte.
const maxZones = 255

// NewEndpointSlice packs endpoints; a multicluster slice gives each the slice's source cluster.
func NewEndpointSlice(ports []Port, eps []Endpoint) *EndpointSlice {
	s := &EndpointSlice{Ports: ports}
	for _, e := range eps {
		s.v6 = s.v6 || !e.Addr.Is4()
	}
	size := 4
	if s.v6 {
		size = 16
	}
	s.addrs = make([]byte, 0, size*len(eps))
	names := endpointNames{}
	var zones []string
	var topology []unique.Handle[Topology]
	for i, e := range eps {
		if e.Topology != (unique.Handle[Topology]{}) {
			if topology == nil {
				topology = make([]unique.Handle[Topology], len(eps))
			}
			topology[i] = e.Topology
		}
		if s.v6 {
			b := e.Addr.As16()
			s.addrs = append(s.addrs, b[:]...)
		} else {
			b := e.Addr.As4()
			s.addrs = append(s.addrs, b[:]...)
		}
		if e.Hostname != "" && names.hostnameEnds == nil {
			names.hostnameEnds = make([]uint32, len(eps))
		}
		if e.Cluster != "" {
			names.cluster = e.Cluster // one per slice: the caller gives every endpoint the slice's
		}
		if e.Zone == "" || strings.Contains(e.Zone, zoneSep) {
			continue
		}
		z := slices.Index(zones, e.Zone)
		if z < 0 && len(zones) < maxZones {
			zones = append(zones, e.Zone)
			z = len(zones) - 1
		}
		if z >= 0 {
			if names.zoneOf == nil {
				names.zoneOf = make([]uint8, len(eps))
			}
			names.zoneOf[i] = uint8(z + 1)
		}
	}
	if names.hostnameEnds != nil {
		var hostnames strings.Builder
		size := 0
		for _, e := range eps {
			size += len(e.Hostname)
		}
		hostnames.Grow(size)
		for i, e := range eps {
			hostnames.WriteString(e.Hostname)
			names.hostnameEnds[i] = uint32(hostnames.Len())
		}
		names.hostnames = hostnames.String()
	}
	if len(s.addrs) == 0 {
		s.addrs = nil
	}
	if zones != nil {
		names.zones = unique.Make(strings.Join(zones, zoneSep))
	}
	if topology != nil {
		names.opted = &optedFields{topology: topology}
	}
	if names.hostnameEnds != nil || names.cluster != "" || names.zoneOf != nil || names.opted != nil {
		s.names = &names
	}
	return s
}

// Equal reports whether two slices hold the same endpoints, names and ports (a nil slice holds
// none). It is what reflect.DeepEqual says of them, without reflection: every watch event of a
// slice is compared with the version stored, and reflection cost a tenth of the event.
func (s *EndpointSlice) Equal(o *EndpointSlice) bool {
	if s == o {
		return true
	}
	if s == nil || o == nil {
		return false
	}
	return s.v6 == o.v6 && slices.Equal(s.Ports, o.Ports) && bytes.Equal(s.addrs, o.addrs) && s.names.equal(o.names)
}

func (n *endpointNames) equal(o *endpointNames) bool {
	if n == nil || o == nil {
		return n == o
	}
	return n.hostnames == o.hostnames && slices.Equal(n.hostnameEnds, o.hostnameEnds) && n.cluster == o.cluster &&
		n.zones == o.zones && slices.Equal(n.zoneOf, o.zoneOf) && n.opted.equal(o.opted)
}

func (f *optedFields) equal(o *optedFields) bool {
	if f == nil || o == nil {
		return f == o
	}
	return slices.Equal(f.topology, o.topology) && f.terminating.Equal(o.terminating)
}

// setTerminating gives a slice being made its serving-but-terminating endpoints. They hang off
// the names, which most slices do not have: a slice without them costs nothing more, and the names
// stay in their allocation size class.
func (s *EndpointSlice) setTerminating(t *EndpointSlice) {
	if s.names == nil {
		s.names = &endpointNames{}
	}
	if s.names.opted == nil {
		s.names.opted = &optedFields{}
	}
	s.names.opted.terminating = t
}

// terminating returns the slice's endpoints that are terminating but still serving (kept with
// serving_terminating only); nil for none.
func (s *EndpointSlice) terminating() *EndpointSlice {
	if s.names == nil || s.names.opted == nil {
		return nil
	}
	return s.names.opted.terminating
}

// ServingTerminating returns the service's serving-but-terminating endpoints, slice by slice (kept
// with serving_terminating only): kube-proxy sends a service's traffic to them while none of its
// endpoints is ready.
func (s *Service) ServingTerminating() []*EndpointSlice {
	var out []*EndpointSlice
	for _, sl := range s.Slices {
		if t := sl.terminating(); t != nil && t.Len() > 0 {
			out = append(out, t)
		}
	}
	return out
}

// zoneAt returns the at-th (from 1) of the slice's zones.
func (n *endpointNames) zoneAt(at uint8) string {
	zones := n.zones.Value()
	for ; at > 1; at-- {
		_, zones, _ = strings.Cut(zones, zoneSep)
	}
	zone, _, _ := strings.Cut(zones, zoneSep)
	return zone
}

// Len is the number of endpoint addresses.
func (s *EndpointSlice) Len() int {
	if s.v6 {
		return len(s.addrs) / 16
	}
	return len(s.addrs) / 4
}

// Endpoint unpacks the i-th endpoint: its address, and what the slice keeps of it besides.
func (s *EndpointSlice) Endpoint(i int) Endpoint {
	e := Endpoint{Addr: s.Addr(i)}
	if n := s.names; n != nil {
		if n.hostnameEnds != nil {
			start := uint32(0)
			if i > 0 {
				start = n.hostnameEnds[i-1]
			}
			e.Hostname = n.hostnames[start:n.hostnameEnds[i]]
		}
		e.Cluster = n.cluster
		if n.zoneOf != nil && n.zoneOf[i] > 0 {
			e.Zone = n.zoneAt(n.zoneOf[i])
		}
		if n.opted != nil && n.opted.topology != nil {
			e.Topology = n.opted.topology[i]
		}
	}
	return e
}

// Addr returns the i-th endpoint address.
func (s *EndpointSlice) Addr(i int) netip.Addr {
	if s.v6 {
		// IPv4-mapped addresses never get here (ParseIP refuses them), so an IPv4 address packed
		// as 16 bytes in a mixed slice comes back as IPv4.
		return netip.AddrFrom16([16]byte(s.addrs[16*i : 16*i+16])).Unmap()
	}
	return netip.AddrFrom4([4]byte(s.addrs[4*i : 4*i+4]))
}

// SourceCluster is the slice's source cluster, "" outside multicluster.
func (s *EndpointSlice) SourceCluster() string {
	if s.names == nil {
		return ""
	}
	return s.names.cluster
}

// IP returns the i-th address as the packed bytes themselves, capped so that an append copies.
func (s *EndpointSlice) IP(i int) net.IP {
	if !s.v6 {
		return net.IP(s.addrs[4*i : 4*i+4 : 4*i+4])
	}
	ip := net.IP(s.addrs[16*i : 16*i+16 : 16*i+16])
	if v4 := ip.To4(); v4 != nil { // an IPv4 address in a mixed slice (ParseIP refuses real 4-in-6)
		return v4
	}
	return ip
}

// Endpoints unpacks the slice, for tests and diagnostics.
func (s *EndpointSlice) Endpoints() []Endpoint {
	out := make([]Endpoint, 0, s.Len())
	for i := range s.Len() {
		out = append(out, s.Endpoint(i))
	}
	return out
}

// Endpoint is one address of an endpoint that is ready, or (kept apart, with serving_terminating)
// serving but terminating; other not-ready endpoints never reach the model. An endpoint with two
// addresses is two of these with the same hostname.
type Endpoint struct {
	Addr     netip.Addr
	Hostname string // the endpoint's hostname, or the pod name with endpoint_pod_names; may be ""
	Cluster  string // the source cluster of a multicluster endpoint; "" otherwise
	Zone     string // the endpoint's topology zone, with zonal; may be ""
	// Topology is what kube-proxy's topology rules read of the endpoint (with topology; the zero
	// handle when it has none).
	Topology unique.Handle[Topology]
}

// HasEndpointAt reports whether one of addrs is a ready endpoint of the service.
func (s *Service) HasEndpointAt(addrs []netip.Addr) bool {
	for _, sl := range s.Slices {
		if sl.IndexOf(addrs) >= 0 {
			return true
		}
	}
	return false
}

// IndexOf returns the index of the first endpoint at one of addrs, or -1.
func (s *EndpointSlice) IndexOf(addrs []netip.Addr) int {
	if len(addrs) == 0 {
		return -1
	}
	for i := range s.Len() {
		if slices.Contains(addrs, s.Endpoint(i).Addr) {
			return i
		}
	}
	return -1
}

// ReadyAddrs counts the ready addresses.
func (s *Service) ReadyAddrs() int {
	n := 0
	for _, sl := range s.Slices {
		n += sl.Len()
	}
	return n
}
