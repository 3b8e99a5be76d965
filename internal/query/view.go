package query

import (
	"context"

	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// view is what one query's client may resolve (isolate), and which endpoints it is sent (topology).
// The zero view resolves everything and gets every endpoint: both options off, the self-probe, or
// an unidentified client under isolate allow.
type view struct {
	iso       *Isolation
	namespace string // the client pod's namespace; "" for an unidentified client
	// internal is explain's query, which isolation does not count but tells of (when isInternal).
	internal   internalQuery
	isInternal bool
	// topology is the client pod's node and its topology zone, for topology's answers; the zero Client,
	// which gets every endpoint, without topology or for a client that is no known pod.
	topology records.Client
}

// viewOf is the view of the client that sent r: one lookup of the client pod serves isolation
// and topology. Explain's query gets the view of the client it names; the self-probe's resolves
// everything. A reply that a cache will keep for others (cached.go) gets every client's view: the
// open namespaces' names, every endpoint.
func (a *Answerer) viewOf(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) view {
	internal, isInternal := internalOf(ctx)
	isolating := a.Isolation != nil && !internal.unisolated
	if !isolating && a.Nodes == nil {
		return view{}
	}
	v := view{internal: internal, isInternal: isInternal}
	if !isInternal && feedsCache(w) {
		if isolating {
			v.iso = a.Isolation
		}
		return v
	}
	p := a.ClientPod(request.Request{W: w, Req: r})
	if p != nil && a.Nodes != nil {
		node := p.Identity.Node()
		v.topology = records.Client{Node: node, TopologyZone: a.Nodes.Zone(node)}
	}
	switch {
	case !isolating:
	case p != nil:
		v.iso, v.namespace = a.Isolation, p.Identity.Namespace
	case !a.Isolation.opts.AllowUnidentified:
		v.iso = a.Isolation
	}
	return v
}

// allows reports whether the client may resolve the names of service svc in namespace ns ("" for
// a name that is not a service's, such as <ns>.svc or a pod name), in the query's case.
func (v view) allows(ns, svc string) bool {
	switch {
	case v.iso == nil:
		return true
	case v.namespace != "" && tree.EqualFold(ns, v.namespace):
		return true
	case tree.EqualFold(ns, apiServiceNamespace) && tree.EqualFold(svc, apiServiceName):
		return true
	}
	return v.iso.isOpen(ns)
}

// allowsName reports whether the client may resolve qname, a name in forward zone: the names of
// a namespace are those that end in <ns>.svc.<zone> or <ns>.pod.<zone>; the apex, dns-version,
// ns.dns, svc.<zone> and pod.<zone> are every client's.
func (v view) allowsName(qname, zone string) bool {
	if v.iso == nil {
		return true
	}
	ns, svc, ok := namespaceOf(qname, zone)
	return !ok || v.allows(ns, svc)
}

// hid counts a client's query whose answer isolation changed, or tells explain's.
func (v view) hid() {
	switch {
	case v.isInternal:
		if v.internal.hidden != nil {
			*v.internal.hidden = true
		}
	case v.namespace != "":
		v.iso.hidden.pod.Inc()
	default:
		v.iso.hidden.unidentified.Inc()
	}
}

// keepPTR leaves out of a PTR answer's owners the services the client may not resolve, and
// reports whether it left any out.
func (v view) keepPTR(owners records.PTROwners) (records.PTROwners, bool) {
	if v.iso == nil {
		return owners, false
	}
	return owners.Keep(v.allows)
}
