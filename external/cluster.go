package external

import (
	"net/netip"

	"github.com/kubetree/kubetree/internal/records"

	"github.com/miekg/dns"
)

// Cluster is what kubetree_external reads of the server block's kubetree, as k8s_external reads
// the in-tree plugin through its Externaler: the services' record sets in the zone services live
// in, the services of an external IP, the nameserver's addresses, and the SOA serial. kubetree's
// *Kubetree implements it; kubetree_external finds it at startup by the directive's name.
type Cluster interface {
	// Synced reports whether the first full state from the API server is being served, whatever
	// kubetree's self-probe finds (its Ready says both).
	Synced() bool
	// NamespaceServed reports whether namespace ns (in any case) exists and is served.
	NamespaceServed(ns string) bool
	// ServiceSet returns the records of service name in namespace ns (in any case), or nil.
	ServiceSet(ns, name string) *records.ServiceSet
	// EachServiceSet calls f with every service's records and its namespace and name.
	EachServiceSet(f func(ns, name string, set *records.ServiceSet))
	// ExternalServicesAt returns the services ("<svc>.<ns>") that have the external IP addr.
	ExternalServicesAt(addr netip.Addr) []string
	// ExternalNameservers appends the addresses of type qtype that k8s_external gives its
	// nameserver, owned by owner with ttl (with headless, a headless DNS service's endpoints).
	ExternalNameservers(dst []dns.RR, owner string, ttl uint32, qtype uint16, headless bool) []dns.RR
	// Serial is the SOA serial of the cluster.
	Serial() uint32
}
