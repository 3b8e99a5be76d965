package explain

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// Who may read what. A caller on loopback (the node, kubectl port-forward) reads everything. Any
// other is authorized namespace by namespace: an explanation is served only if the caller may get
// kubetree's names in every namespace it tells of (the client pod's, the names of its records and
// the objects they came from); a dump leaves out the names of the namespaces whose names the caller
// may not list. What tells of no namespace (the zone's own records, a name outside the zones asked
// as no pod) needs the permission cluster-wide.

// access is what one request's caller may read.
type access struct {
	auth   Authorizer // nil: a caller on loopback, who may read everything
	ctx    context.Context
	source netip.Addr
	token  string
	verb   string // get (explain) or list (dump)
	seen   map[string]decided
}

type decided struct {
	status int
	why    string
}

// may reports whether the caller may read the names of namespace ns ("": of every namespace):
// status 0 when it may, else the HTTP status to answer, and why. One request asks once a namespace.
func (a *access) may(ns string) (int, string) {
	if a.auth == nil {
		return 0, ""
	}
	if d, ok := a.seen[ns]; ok {
		return d.status, d.why
	}
	status, why := a.auth.Authorize(a.ctx, a.source, a.token, a.verb, ns)
	a.seen[ns] = decided{status, why}
	return status, why
}

// mayAll reports whether the caller may read the names of every namespace of nss: cluster-wide
// when nss is empty, or when it may cluster-wide (one review instead of one a namespace).
func (a *access) mayAll(nss []string) (int, string) {
	if status, why := a.may(""); status == 0 || len(nss) == 0 {
		return status, why
	}
	for _, ns := range nss {
		if status, why := a.may(ns); status != 0 {
			return status, why
		}
	}
	return 0, ""
}

// namespaceOf is the namespace a name of zones belongs to: <...>.<ns>.svc.<zone> or
// <...>.<ns>.pod.<zone> (lower case); "" for any other name.
func namespaceOf(zones []string, name string) string {
	i := tree.MatchZone(zones, name)
	if i < 0 {
		return ""
	}
	labels := dns.SplitDomainName(strings.ToLower(name[:len(name)-len(zones[i])]))
	n := len(labels)
	if n < 2 || labels[n-1] != "svc" && labels[n-1] != "pod" {
		return ""
	}
	return labels[n-2]
}

// told are the namespaces explanation x tells of: its client pod's, its name's (unless isolation
// hid the name: the answer then says nothing of it), its records' names and targets', and its
// objects'.
func (e *Explainer) told(x *explainapi.Explanation) []string {
	var nss []string
	add := func(ns string) {
		if ns != "" && !slices.Contains(nss, ns) {
			nss = append(nss, ns)
		}
	}
	if ns, _, ok := strings.Cut(x.Client.Pod, "/"); ok {
		add(ns)
	}
	if x.Reason != explainapi.ReasonIsolated {
		add(namespaceOf(e.zones, x.Name))
	}
	for _, rrs := range [][]string{x.Answer, x.Ns, x.Extra} {
		for _, rr := range rrs {
			if f := strings.Fields(rr); len(f) > 0 {
				add(namespaceOf(e.zones, f[0]))        // the owner
				add(namespaceOf(e.zones, f[len(f)-1])) // a CNAME's, PTR's or SRV's target
			}
		}
	}
	for _, o := range x.From {
		add(strings.ToLower(o.Namespace))
	}
	return nss
}

// clientNamespace is the namespace of the pod at client, "" for none: the namespace an explanation
// as that client is asked for before it is made.
func (e *Explainer) clientNamespace(client netip.Addr) string {
	if e.Answerer.Pods == nil {
		return ""
	}
	if p := e.Answerer.Pods.ClientAt(client); p != nil {
		return p.Namespace
	}
	return ""
}
