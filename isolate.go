package kubetree

import (
	"context"
	"strings"
	"sync"

	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespace isolation (the isolate option): a client pod resolves the names of its own namespace
// and of the open ones (isolate's list, default `default`, and those isolate_labels selects);
// any other name of a namespace is answered to it as a name that does not exist. The client is
// the one pods verified names (clientPod: the pod with the query's source address, or the
// address in the client-subnet option of a client_subnet_from source), as autopath and metadata
// name it.

// isolateConfig is what the isolate and isolate_labels options say.
type isolateConfig struct {
	// allowUnidentified is `isolate allow`: a client that is no known pod resolves everything.
	// Under `isolate refuse` it resolves the open namespaces only.
	allowUnidentified bool
	open              []string            // namespaces every client resolves, lower case
	labels            *meta.LabelSelector // isolate_labels: namespaces with these labels are open too
}

// defaultOpenNamespaces are open to every client unless isolate lists its own.
var defaultOpenNamespaces = []string{"default"}

// The kubernetes Service in default is the API server's, which every pod is told of in its
// environment (KUBERNETES_SERVICE_HOST): hiding its name would hide nothing, and break clients
// that verify the API server's certificate by that name.
const (
	apiServiceNamespace = "default"
	apiServiceName      = "kubernetes"
)

// isolation is the isolate option at work; nil without it.
type isolation struct {
	cfg *isolateConfig
	mu  sync.RWMutex
	// labelled are the namespaces isolate_labels selects, as the watcher last saw them; written by
	// the applier.
	labelled map[string]bool
	hidden   isolationCounters
}

// isolationCounters count the queries isolation changed, by client: a pod, or an unidentified
// client under isolate refuse.
type isolationCounters struct{ pod, unidentified prometheus.Counter }

func newIsolation(cfg *isolateConfig, m *serverMetrics) *isolation {
	return &isolation{cfg: cfg, labelled: map[string]bool{},
		hidden: isolationCounters{pod: isolated.WithLabelValues(m.server, m.zones, "pod"),
			unidentified: isolated.WithLabelValues(m.server, m.zones, "unidentified")}}
}

// setLabelled records whether isolate_labels selects namespace ns.
func (x *isolation) setLabelled(ns string, labelled bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if labelled {
		x.labelled[ns] = true
	} else {
		delete(x.labelled, ns)
	}
}

// isOpen reports whether every client may resolve namespace ns (in the query's case).
func (x *isolation) isOpen(ns string) bool {
	for _, o := range x.cfg.open {
		if tree.EqualFold(ns, o) {
			return true
		}
	}
	if x.cfg.labels == nil {
		return false
	}
	if tree.HasUpper(ns) {
		ns = strings.ToLower(ns)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.labelled[ns]
}

// view is what one query's client may resolve. The zero view resolves everything: isolation off,
// the self-probe, or an unidentified client under isolate allow.
type view struct {
	iso       *isolation
	namespace string // the client pod's namespace; "" for an unidentified client
}

// viewOf is the view of the client that sent r.
func (k *Kubetree) viewOf(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) view {
	if k.isolation == nil || probing(ctx) {
		return view{}
	}
	p := k.clientPod(request.Request{W: w, Req: r})
	switch {
	case p != nil:
		return view{iso: k.isolation, namespace: p.Identity.Namespace}
	case k.isolation.cfg.allowUnidentified:
		return view{}
	}
	return view{iso: k.isolation}
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

// hid counts a query whose answer isolation changed.
func (v view) hid() {
	if v.namespace != "" {
		v.iso.hidden.pod.Inc()
	} else {
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

// namespaceOf reads the namespace (and the label below it: the service, for a service's name) out
// of qname in zone: <...><svc>.<ns>.svc.<zone> or <...><ns>.pod.<zone>, in the query's case. ok is
// false for a name of no namespace.
func namespaceOf(qname, zone string) (ns, svc string, ok bool) {
	rel := strings.TrimSuffix(qname[:len(qname)-len(zone)], ".")
	i := strings.LastIndexByte(rel, '.')
	if i < 0 {
		return "", "", false
	}
	kind := rel[i+1:]
	if !tree.EqualFold(kind, "svc") && !tree.EqualFold(kind, "pod") {
		return "", "", false
	}
	rel = rel[:i]
	i = strings.LastIndexByte(rel, '.')
	ns = rel[i+1:]
	if i >= 0 && tree.EqualFold(kind, "svc") {
		rel = rel[:i]
		svc = rel[strings.LastIndexByte(rel, '.')+1:]
	}
	return ns, svc, true
}
