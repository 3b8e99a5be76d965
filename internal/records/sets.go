package records

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
)

// The sets the tree holds, built when the cluster changes. A service is built into a ServiceSet,
// from which each reply's records are made (answer.go); the few names that are not a service's
// (the apex, dns-version, ns.dns) hold a FixedSet of finished records (apex.go); a namespace, svc
// and pod are NameOnly.

// Builder makes record sets and records with the Corefile's settings.
type Builder struct {
	TTL uint32
	// NegativeTTL is how long a miss may be cached: the SOA's MINIMUM, and the TTL of the SOA that
	// NXDOMAIN and NODATA answers carry (ApexSet).
	NegativeTTL uint32
	IgnoreEmpty bool
	Nameserver  string   // ns.dns.<the first forward zone>: the SOA and NS target of reverse zones
	Clusterset  []string // the multicluster zones
	Zonal       bool     // headless services answer zone-scoped names, outside multicluster zones
	// Topology: headless services answer each client pod the endpoints kube-proxy would send it
	// to, outside multicluster zones (topology.go)
	Topology bool
}

// ServiceSet is everything DNS answers for one service in one zone. It is built when the service
// or one of its slices changes and never changed afterwards. The records themselves are made per
// reply from it: a reply needs its own copies anyway, and holding finished records for every
// endpoint would cost several times the memory.
type ServiceSet struct {
	name string // <svc>.<ns>.svc.<zone>
	ttl  uint32
	kind object.Kind
	// multicluster says the set is a ServiceImport's: its endpoints are named <hostname>.<cluster>.
	multicluster bool
	// zonal says the set answers <zone>.pin|prefer._zone.<svc> (a headless service, zonal set).
	zonal bool
	// dupes says that an address or a hostname appears more than once across the slices (an
	// endpoint moving between slices, or dual stack), so answers must be de-duplicated.
	dupes  bool
	ips    []netip.Addr            // cluster IPs
	ports  []object.Port           // named service ports, for a ClusterIP service's SRV records
	slices []*object.EndpointSlice // ready endpoints, shared with the informer store
	// rare holds what few sets have; nil for most. A set is 112 bytes, an allocation size class
	// below the 128 it took with both pointers in it.
	rare  *rareParts
	ptrID uint32 // the service's number in the reverse index, set before it is published
}

// rareParts are the parts of a service set that most services do not have.
type rareParts struct {
	// outside holds an ExternalName service's target, or the external addresses that
	// kubetree_external serves, shared with the model.
	outside *object.Outside
	// topology is what a headless service's topology hints say (with topology).
	topology *serviceTopology
}

// outside is the service's target or external addresses (rareParts); nil for none.
func (r *ServiceSet) outside() *object.Outside {
	if r.rare == nil {
		return nil
	}
	return r.rare.outside
}

// externals are the external addresses kubetree_external serves for the service (rareParts).
func (r *ServiceSet) externals() []object.ExternalAddr {
	if o := r.outside(); o != nil {
		return o.External
	}
	return nil
}

// topology is what the service's topology hints say (rareParts); nil for none.
func (r *ServiceSet) topology() *serviceTopology {
	if r.rare == nil {
		return nil
	}
	return r.rare.topology
}

// target is an ExternalName service's target.
func (r *ServiceSet) target() string { return r.outside().ExternalName }

// AnswersBelow implements tree.Set: a service answers its endpoints' and its SRV names.
func (*ServiceSet) AnswersBelow() bool { return true }

// Name is the service's name in its zone, <svc>.<ns>.svc.<zone>.
func (r *ServiceSet) Name() string { return r.name }

// namespaceAndName returns the service's namespace and name, read from its name: the set keeps no more.
func (r *ServiceSet) namespaceAndName() (namespace, service string) {
	service, rest, _ := strings.Cut(r.name, ".")
	namespace, _, _ = strings.Cut(rest, ".")
	return namespace, service
}

// FixedSet holds the finished records of a name that is not a service's. Once published they are
// never modified: replies get copies.
type FixedSet struct {
	a, aaaa, txt, ns []dns.RR // read through OfType
	SOA              []dns.RR
	Glue             []dns.RR // the addresses of the NS targets, for the additional section
	// NegativeSOA is the apex's SOA as NXDOMAIN and NODATA answers carry it, with the negative TTL
	// as its own (ApexSet).
	NegativeSOA []dns.RR
	// nameserverAlias says the set is ns.dns.<zone>'s: the nameservers' addresses, which a
	// transfer carries as the apex's glue, under the nameservers' own names (TransferRecords).
	nameserverAlias bool
}

// AnswersBelow implements tree.Set.
func (*FixedSet) AnswersBelow() bool { return false }

// OfType returns the records of one type; ANY gets none, so that it reveals nothing.
func (s *FixedSet) OfType(qtype uint16) []dns.RR {
	switch qtype {
	case dns.TypeA:
		return s.a
	case dns.TypeAAAA:
		return s.aaaa
	case dns.TypeTXT:
		return s.txt
	case dns.TypeNS:
		return s.ns
	case dns.TypeSOA:
		return s.SOA
	}
	return nil
}

// BuildService builds the records of the service in zone, or returns nil when the service has no
// name there (a headless service without ready or serving-but-terminating endpoints, an empty
// service under ignore empty_service).
func (b *Builder) BuildService(s *object.Service, zone string) *ServiceSet {
	r := &ServiceSet{name: s.Name + "." + s.Namespace + ".svc." + zone, ttl: b.TTL, kind: s.Kind,
		multicluster: slices.Contains(b.Clusterset, zone)}
	if s.Outside != nil {
		r.rare = &rareParts{outside: s.Outside}
	}
	r.zonal = b.Zonal && !r.multicluster && s.Kind == object.Headless
	switch s.Kind {
	case object.ExternalName:
		if s.Target() == "" {
			return nil
		}
		return r
	case object.ClusterIP:
		if b.IgnoreEmpty && s.ReadyAddrs() == 0 {
			return nil
		}
		r.ips, r.ports = s.ClusterIPs, s.Ports
	case object.Headless:
		r.ports = s.Ports // for SRV records of external IPs only; the model's own array
		if s.ReadyAddrs() == 0 {
			// With serving_terminating, what kube-proxy would send traffic to: the endpoints that
			// are terminating but still serving (the model has none without it).
			if r.slices = s.ServingTerminating(); r.slices == nil {
				return nil
			}
			r.dupes = hasDuplicates(r.slices)
			return r
		}
	}
	for _, sl := range s.Slices {
		if sl.Len() > 0 {
			r.slices = append(r.slices, sl)
		}
	}
	r.dupes = hasDuplicates(r.slices)
	if b.Topology && !r.multicluster && s.Kind == object.Headless {
		if t := buildTopology(s.Distribution, r.slices); t != nil {
			if r.rare == nil {
				r.rare = &rareParts{}
			}
			r.rare.topology = t
		}
	}
	return r
}

// hasDuplicates reports whether an address appears twice across the slices, or, when there are
// several slices, a hostname twice.
func hasDuplicates(sls []*object.EndpointSlice) bool {
	n := 0
	for _, sl := range sls {
		n += sl.Len()
	}
	switch {
	case n < 2:
		return false
	case n <= smallService:
		return hasDuplicatesSmall(sls)
	}
	return hasDuplicatesLarge(sls, n)
}

func hasDuplicatesLarge(sls []*object.EndpointSlice, n int) bool {
	seen := make(map[netip.Addr]bool, n)
	names := map[string]bool{}
	for _, sl := range sls {
		for i := range sl.Len() {
			e := sl.Endpoint(i)
			if seen[e.Addr] {
				return true
			}
			seen[e.Addr] = true
			if e.Hostname != "" {
				if names[e.Hostname] && len(sls) > 1 {
					return true
				}
				names[e.Hostname] = true
			}
		}
	}
	return false
}

// smallService is the most endpoints hasDuplicates compares pair by pair: below it that is
// cheaper than making two maps, and most services are this small.
const smallService = 32

func hasDuplicatesSmall(sls []*object.EndpointSlice) bool {
	for si, sl := range sls {
		for i := range sl.Len() {
			e := sl.Endpoint(i)
			for i2 := i + 1; i2 < sl.Len(); i2++ {
				if sl.Addr(i2) == e.Addr || len(sls) > 1 && e.Hostname != "" && sl.Endpoint(i2).Hostname == e.Hostname {
					return true
				}
			}
			for _, other := range sls[si+1:] {
				for j := range other.Len() {
					if f := other.Endpoint(j); f.Addr == e.Addr || e.Hostname != "" && f.Hostname == e.Hostname {
						return true
					}
				}
			}
		}
	}
	return false
}

// NameOnly is the set of a name that exists without records of its own (a namespace, svc, pod).
// Unlike an empty non-terminal, which exists only for its children, it stays when they go.
type NameOnly struct{}

// AnswersBelow implements tree.Set.
func (NameOnly) AnswersBelow() bool { return false }
