package watcher

import (
	"strings"

	"github.com/kubetree/kubetree/internal/informer"
	"github.com/kubetree/kubetree/internal/object"

	"k8s.io/client-go/tools/cache"
)

// Applying queued keys: the stores' events queue keys, and what the stores hold of each key is
// handed to the applier, one key at a time. Until the first sync a worker of its own applies
// them, beside the goroutines that decode the lists (two cores build the tree faster than one).
// After it, the goroutine whose event queued a key applies it: events then come one at a time, and
// waking a worker for each cost more CPU than applying it.

// workQueue is the watcher's queue (an informer.KeyQueue) as the handlers and whoever applies keys
// use it; tests wrap it.
type workQueue interface {
	Add(key string)
	Get() (key string, shutdown bool)
	TryGet() (key string, ok bool)
	Done(key string)
	Len() int
	ShutDown()
}

// work applies queued keys until the first full state is published (or the queue shuts down),
// then leaves the queue to applyQueued.
func (w *Watcher) work() {
	for !w.opts.Synced.Load() {
		key, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		w.applying.Lock()
		w.handle(key)
		w.queue.Done(key)
		w.applying.Unlock()
	}
	w.drain()
}

// applyQueued applies what an event queued, once the worker has left the queue.
func (w *Watcher) applyQueued() {
	if w.opts.Synced.Load() {
		w.drain()
	}
}

// drain applies queued keys until none is left, unless another goroutine is applying: that one
// looks at the queue again after it lets go, and applies what was queued meanwhile.
func (w *Watcher) drain() {
	for w.applying.TryLock() {
		for {
			key, ok := w.queue.TryGet()
			if !ok {
				break
			}
			w.handle(key)
			w.queue.Done(key)
		}
		w.applying.Unlock()
		if w.queue.Len() == 0 {
			return
		}
	}
}

// handle applies one key; the applier takes its own lock for each write, and moves the SOA serial
// after a service's (a namespace's <ns>.svc and <ns>.pod names are not zone transfers' records).
func (w *Watcher) handle(key string) {
	switch {
	case key == syncBarrier && w.queue.Len() > 0:
		// Whatever is queued now was queued before the worker took the barrier: some of it may be
		// the initial lists' (see syncSettled). Ready once that is applied too.
		w.queue.Add(syncSettled)
	case key == syncBarrier, key == syncSettled:
		if !w.opts.Synced.Swap(true) {
			close(w.syncCh)
			w.built()
		}
		w.metrics.SetSynced(true)
	case strings.HasPrefix(key, nsPrefix):
		w.syncNamespace(strings.TrimPrefix(key, nsPrefix))
	case strings.HasPrefix(key, importPrefix):
		w.syncImport(strings.TrimPrefix(key, importPrefix))
	default:
		w.syncService(key)
	}
}

// syncNamespace publishes or removes the namespace's names, and applies its services: a service is
// served only while its namespace exists and is exposed. The services are applied here rather than
// queued: queued, they could land behind the sync barrier, and Ready would be reported while they
// still answered NXDOMAIN.
func (w *Watcher) syncNamespace(ns string) {
	w.applier.ApplyNamespace(ns, w.namespaceServed(ns))
	keys, _ := w.services.GetIndexer().IndexKeys(cache.NamespaceIndex, ns)
	for _, key := range keys {
		w.syncService(key)
	}
	if w.imports != nil {
		keys, _ = w.imports.GetIndexer().IndexKeys(cache.NamespaceIndex, ns)
		for _, key := range keys {
			w.syncImport(key)
		}
	}
}

// syncImport hands the applier what the stores hold of one ServiceImport and its slices.
func (w *Watcher) syncImport(key string) {
	ns, _, _ := strings.Cut(key, "/")
	w.applier.ApplyImport(key, serviceAt(w.imports, key), w.mcIndex.Of(key), w.namespaceServed(ns))
}

// serviceAt is what an informer of Services or ServiceImports holds under key; nil for none.
func serviceAt(inf *informer.Informer, key string) *object.StoredService {
	obj, _, _ := inf.GetStore().GetByKey(key)
	svc, _ := obj.(*object.StoredService)
	return svc
}

// namespaceServed reports whether a namespace exists and the Corefile lets it be served.
func (w *Watcher) namespaceServed(ns string) bool {
	if !w.opts.allowsNamespace(ns) {
		return false
	}
	_, exists, _ := w.namespaces.GetStore().GetByKey(ns)
	return exists
}

// syncService hands the applier what the stores hold of one service and its slices.
func (w *Watcher) syncService(key string) {
	ns, _, _ := strings.Cut(key, "/")
	svc := serviceAt(w.services, key)
	if svc == nil && !w.services.Listed() {
		// A slice of the first lists came before the services were listed: nothing of the
		// service was published, and the services' list queues it again once it is stored.
		return
	}
	var sls []*object.StoredSlice
	if w.slices != nil {
		sls = w.sliceIndex.Of(key)
	}
	served := w.namespaceServed(ns)
	w.applier.ApplyService(key, svc, sls, served)
	w.triggeredMu.Lock()
	triggered, ok := w.triggered[key]
	delete(w.triggered, key)
	w.triggeredMu.Unlock()
	if ok && served && svc != nil && svc.Model != nil {
		w.metrics.Programmed(serviceKind(svc.Model), inTreeServiceKind(svc.Model, triggered.bySlice), triggered.at)
	}
}

// serviceKind is the service_kind of kubetree's DNS programming latency, by the SLI's definition:
// the in-tree plugin's kinds (cluster_ip, headless_with_selector, headless_without_selector) by
// the service's type and selector, and external_name.
func serviceKind(s *object.Service) string {
	switch {
	case s.Kind == object.ExternalName:
		return "external_name"
	case s.Kind == object.ClusterIP:
		return "cluster_ip"
	case s.Selector:
		return "headless_with_selector"
	}
	return "headless_without_selector"
}

// inTreeServiceKind is the service_kind the in-tree plugin would observe the same change under in
// its own series, coredns_kubernetes_dns_programming_duration_seconds, or "" for a change it does
// not observe. Its rule (plugin/kubernetes/object/metrics.go): only an EndpointSlice with a trigger
// time is observed, as headless_with_selector when its service is headless (with a selector or
// not) and as cluster_ip otherwise; a service's creation is not.
func inTreeServiceKind(s *object.Service, bySlice bool) string {
	switch {
	case !bySlice:
		return ""
	case s.Kind == object.Headless:
		return "headless_with_selector"
	}
	return "cluster_ip"
}
