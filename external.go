package kubetree

import (
	"net/netip"
	"strings"

	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// What kubetree offers kubetree_external (the external package's Cluster interface), as the
// in-tree plugin offers k8s_external its Externaler: read-only views of what the applier has
// published. Services are read in the first zone they live in.

// NamespaceServed reports whether namespace ns (in any case) exists and is served.
func (k *Kubetree) NamespaceServed(ns string) bool {
	_, depth := k.tree.At(k.serviceZone(), "svc", ns)
	return depth == 2
}

// ServiceSet returns the records of service name in namespace ns (in any case), or nil.
func (k *Kubetree) ServiceSet(ns, name string) *records.ServiceSet {
	set, depth := k.tree.At(k.serviceZone(), "svc", ns, name)
	if depth < 3 {
		return nil
	}
	s, _ := set.(*records.ServiceSet)
	return s
}

// EachServiceSet calls f with every service's records and its namespace and name.
func (k *Kubetree) EachServiceSet(f func(ns, name string, set *records.ServiceSet)) {
	zone := k.serviceZone()
	suffix := ".svc." + zone
	k.tree.Each(zone, func(s tree.Set) {
		if r, ok := s.(*records.ServiceSet); ok {
			name, ns, _ := strings.Cut(strings.TrimSuffix(r.Name(), suffix), ".")
			f(ns, name, r)
		}
	})
}

// ExternalServicesAt returns the services ("<svc>.<ns>") that have the external IP addr.
func (k *Kubetree) ExternalServicesAt(addr netip.Addr) []string { return k.external.ServicesAt(addr) }

// ExternalNameservers appends the addresses of type qtype that k8s_external gives
// ns1.<apex>.<zone>, owned by owner with ttl, as the in-tree plugin finds them: when this server
// is an endpoint of services (the cluster's DNS service), their external IPs (with headless, a
// headless one's endpoints); otherwise the addresses this server answers on (ns.dns.<zone>'s).
func (k *Kubetree) ExternalNameservers(dst []dns.RR, owner string, ttl uint32, qtype uint16, headless bool) []dns.RR {
	if dst, found := k.behind.Load().ExternalNameservers(dst, qtype, owner, ttl, headless); found {
		return dst
	}
	set, _ := k.tree.At(k.forward[0], "dns", "ns")
	s, ok := set.(*records.FixedSet)
	if !ok {
		return dst
	}
	first := len(dst)
	dst = records.AppendCopies(dst, s.OfType(qtype), owner)
	for _, rr := range dst[first:] {
		rr.Header().Ttl = ttl
	}
	return dst
}

// Serial is the SOA serial of the cluster: the second of its last change.
func (k *Kubetree) Serial() uint32 {
	set, _ := k.tree.At(k.forward[0])
	if s, ok := set.(*records.FixedSet); ok && len(s.SOA) > 0 {
		return s.SOA[0].(*dns.SOA).Serial
	}
	return 0
}

// serviceZone is the zone whose service names kubetree_external reads, the first that services live
// in; "" (no names) for a stanza of multicluster zones only.
func (k *Kubetree) serviceZone() string {
	if len(k.svcZones) == 0 {
		return ""
	}
	return k.svcZones[0]
}
