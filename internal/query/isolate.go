package query

import (
	"strings"
	"sync"

	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/prometheus/client_golang/prometheus"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespace isolation (the isolate option): a client pod resolves the names of its own namespace
// and of the open ones (isolate's list, default `default`, and those isolate_labels selects);
// any other name of a namespace is answered to it as a name that does not exist. The client is
// the one pods verified names (ClientPod: the pod with the query's source address, or the
// address in the client-subnet option of a client_subnet_from source), as autopath and metadata
// name it.

// IsolateOptions are what the isolate and isolate_labels options say.
type IsolateOptions struct {
	// AllowUnidentified is `isolate allow`: a client that is no known pod resolves everything.
	// Under `isolate refuse` it resolves the open namespaces only.
	AllowUnidentified bool
	Open              []string            // namespaces every client resolves, lower case
	Labels            *meta.LabelSelector // isolate_labels: namespaces with these labels are open too
}

// DefaultOpenNamespaces are open to every client unless isolate lists its own.
var DefaultOpenNamespaces = []string{"default"}

// The kubernetes Service in default is the API server's, which every pod is told of in its
// environment (KUBERNETES_SERVICE_HOST): hiding its name would hide nothing, and break clients
// that verify the API server's certificate by that name.
const (
	apiServiceNamespace = "default"
	apiServiceName      = "kubernetes"
)

// Isolation is the isolate option at work; nil without it.
type Isolation struct {
	opts *IsolateOptions
	mu   sync.RWMutex
	// labelled are the namespaces isolate_labels selects, as the watcher last saw them; written by
	// the applier.
	labelled map[string]bool
	hidden   isolationCounters
}

// isolationCounters count the queries isolation changed, by client: a pod, or an unidentified
// client under isolate refuse.
type isolationCounters struct{ pod, unidentified prometheus.Counter }

// NewIsolation starts isolating as o says, counting what it hides in m's series.
func NewIsolation(o *IsolateOptions, m *metrics.ServerBlock) *Isolation {
	return &Isolation{opts: o, labelled: map[string]bool{},
		hidden: isolationCounters{pod: m.Isolated("pod"), unidentified: m.Isolated("unidentified")}}
}

// SetLabelled records whether isolate_labels selects namespace ns.
func (x *Isolation) SetLabelled(ns string, labelled bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if labelled {
		x.labelled[ns] = true
	} else {
		delete(x.labelled, ns)
	}
}

// isOpen reports whether every client may resolve namespace ns (in the query's case).
func (x *Isolation) isOpen(ns string) bool {
	for _, o := range x.opts.Open {
		if tree.EqualFold(ns, o) {
			return true
		}
	}
	if x.opts.Labels == nil {
		return false
	}
	if tree.HasUpper(ns) {
		ns = strings.ToLower(ns)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.labelled[ns]
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
