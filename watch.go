package kubetree

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/typed/apis/v1alpha1"
)

// Queue keys: a service is "ns/name" (its store key), a namespace "namespace:name", and the sync
// barrier a key no object can have.
const (
	nsPrefix     = "namespace:"
	importPrefix = "import:" // a ServiceImport, "import:ns/name"
	syncBarrier  = "sync:barrier"
	// syncSettled follows the barrier when keys were queued behind it: a key whose initial object
	// arrived while the worker was applying it is queued again only when the worker is done with
	// it, which can be after the barrier.
	syncSettled = "sync:settled"
	serialKey   = "serial:move" // the SOA serial is due to move
)

// watcher owns the client-go side: three informers feed one queue of keys, and a single worker
// hands each key's stored objects to the applier. One worker keeps the order of updates simple; a
// build is cheap.
type watcher struct {
	cfg        *config
	applier    *applier
	synced     *atomic.Bool // the plugin's: set once the first full state is published
	metrics    *serverMetrics
	services   cache.SharedIndexInformer
	slices     cache.SharedIndexInformer // nil with noendpoints
	namespaces cache.SharedIndexInformer
	pods       cache.SharedIndexInformer // nil unless pods verified
	imports    cache.SharedIndexInformer // ServiceImports; nil without multicluster
	mcSlices   cache.SharedIndexInformer // EndpointSlices of ServiceImports; nil without multicluster
	mcIndex    sliceIndex                // the ServiceImports' slices
	podIndex   *podIndex
	queue      workqueue.TypedInterface[string]
	sliceIndex sliceIndex
	resources  []*watched // every informer, with what the audit needs

	// triggered holds, by service key, the earliest change of a slice that is not yet answered
	// (last-change-trigger-time, Unix ns), for the DNS programming latency.
	triggeredMu sync.Mutex
	triggered   map[string]int64

	serialDue   atomic.Bool // serialKey is due to be queued
	serialTimer *time.Timer // queues it; the worker's own, stopped with it

	stopCh  chan struct{}
	stopped sync.Once
	// built ends the watcher's part of the low GC percent of the first lists (relist.go): the
	// lists end at their bookmarks, but the tree is built from them after that.
	built  func()
	wg     sync.WaitGroup
	syncCh chan struct{} // closed when the first full state is in the tree
}

// newWatcher connects to the API server the Corefile names and watches it for k, writing through a.
func newWatcher(k *Kubetree, a *applier) (*watcher, error) {
	rc, err := k.cfg.restConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	var pods, slices rest.Interface
	if k.pods != nil {
		if pods, err = podREST(rc, k.pods); err != nil {
			return nil, err
		}
	}
	if !k.cfg.noEndpoints {
		if slices, err = sliceREST(rc, k.cfg.sliceOptions(false)); err != nil {
			return nil, err
		}
	}
	var imports mcsclient.MulticlusterV1alpha1Interface
	if len(k.cfg.multiclusterZones) > 0 {
		if imports, err = mcsclient.NewForConfig(rc); err != nil {
			return nil, err
		}
	}
	return newWatcherFrom(k, a, client, slices, pods, imports)
}

// newWatcherFromClient watches client, which decodes everything in full (client-go's fake clientset).
func newWatcherFromClient(k *Kubetree, a *applier, client kubernetes.Interface) (*watcher, error) {
	return newWatcherFrom(k, a, client, nil, nil, nil)
}

// newWatcherFrom watches client; EndpointSlices through slices and, with pods verified, pods through
// pods, both of which decode slim (nil: in full through client); with multicluster, ServiceImports
// through imports.
func newWatcherFrom(k *Kubetree, a *applier, client kubernetes.Interface, slices, pods rest.Interface,
	imports mcsclient.MulticlusterV1alpha1Interface) (*watcher, error) {
	w := &watcher{
		cfg:        &k.cfg,
		applier:    a,
		synced:     &k.synced,
		metrics:    a.metrics,
		podIndex:   k.pods,
		queue:      workqueue.NewTyped[string](),
		sliceIndex: sliceIndex{bySvc: map[string][]*storedSlice{}},
		mcIndex:    sliceIndex{bySvc: map[string][]*storedSlice{}},
		triggered:  map[string]int64{},
		stopCh:     make(chan struct{}),
		syncCh:     make(chan struct{}),
	}
	labels, err := selectorString(w.cfg.labelSelector)
	if err != nil {
		return nil, err
	}
	nsLabels, err := selectorString(w.cfg.namespaceSelector)
	if err != nil {
		return nil, err
	}
	w.services = w.watch(client, "services", &api.Service{}, slimService, labels,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Services("").List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return client.CoreV1().Services("").Watch(ctx, o)
		})
	w.namespaces = w.watch(client, "namespaces", &api.Namespace{}, slimNamespace, nsLabels, nil,
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Namespaces().List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return client.CoreV1().Namespaces().Watch(ctx, o)
		})
	switch {
	case !w.cfg.noEndpoints && slices != nil:
		list, watch := slimListWatch(slices, "endpointslices")
		w.slices = w.watch(client, "endpointslices", &storedSlice{}, sliceTransform(w.cfg.sliceOptions(false)), labels, nil, list, watch)
	case !w.cfg.noEndpoints:
		w.slices = w.watch(client, "endpointslices", &discovery.EndpointSlice{}, sliceTransform(w.cfg.sliceOptions(false)), labels, nil,
			func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
				return client.DiscoveryV1().EndpointSlices("").List(ctx, o)
			},
			func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
				return client.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
			})
	}
	if len(w.cfg.multiclusterZones) > 0 {
		if err := w.watchImports(client, imports, labels); err != nil {
			return nil, err
		}
	}
	switch {
	// The labels option selects pods too, as in the in-tree plugin.
	case w.podIndex != nil && pods != nil:
		list, watch := slimListWatch(pods, "pods")
		w.pods = w.watch(client, "pods", &storedPod{}, w.podIndex.slimPod, labels, nil, list, watch)
	case w.podIndex != nil:
		w.pods = w.watch(client, "pods", &api.Pod{}, w.podIndex.slimPod, labels, nil,
			func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
				return client.CoreV1().Pods("").List(ctx, o)
			},
			func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
				return client.CoreV1().Pods("").Watch(ctx, o)
			})
	}
	return w, nil
}

// watchImports watches ServiceImports, and the EndpointSlices that carry the MCS service-name
// label (with the labels option's selector too, as in the in-tree plugin), even with noendpoints.
func (w *watcher) watchImports(client kubernetes.Interface, imports mcsclient.MulticlusterV1alpha1Interface, labels string) error {
	if imports == nil {
		return errors.New("multicluster: no client for ServiceImports")
	}
	// The Kubernetes client, not the MCS one, says whether the initial list can be streamed: the
	// same API server serves both (and client-go's fake, which cannot, stands for both in tests).
	w.imports = w.watch(client, "serviceimports", &mcs.ServiceImport{}, slimServiceImport, "",
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			return imports.ServiceImports("").List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return imports.ServiceImports("").Watch(ctx, o)
		})
	mcLabels := mcs.LabelServiceName
	if labels != "" {
		mcLabels = labels + "," + mcLabels
	}
	w.mcSlices = w.watch(client, "multicluster_endpointslices", &discovery.EndpointSlice{}, sliceTransform(w.cfg.sliceOptions(true)), mcLabels, nil,
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			return client.DiscoveryV1().EndpointSlices("").List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return client.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
		})
	return nil
}

// watch makes the informer of one resource and keeps what the audit needs of it: its transform
// (which shares what has not changed with the stored version, see sharingStored), and its list
// with the selector.
func (w *watcher) watch(client any, name string, example runtime.Object, transform cache.TransformFunc, labels string, indexers cache.Indexers,
	list func(context.Context, meta.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, meta.ListOptions) (watchIface, error)) cache.SharedIndexInformer {
	var inf cache.SharedIndexInformer
	transform = sharingStored(transform, func() cache.Store { return inf.GetStore() })
	inf = newInformer(client, w.metrics, name, example, transform, labels, indexers, list, watchFn)
	w.resources = append(w.resources, &watched{name: name, informer: inf, transform: transform,
		list: func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labels
			return list(ctx, o)
		}})
	return inf
}

// start runs the informers and the worker, and waits up to startup_timeout for the first sync.
func (w *watcher) start() error {
	w.metrics.claim()
	relistStarted()
	w.built = sync.OnceFunc(relistEnded)
	ctx := w.ctx()
	var synced []cache.DoneChecker
	w.wire()
	for _, r := range w.resources {
		reg, err := r.informer.AddEventHandler(r.handlers)
		if err != nil {
			return err
		}
		synced = append(synced, reg.HasSyncedChecker())
		w.wg.Go(func() { r.informer.RunWithContext(ctx) })
	}
	w.wg.Go(w.work)
	if w.cfg.auditInterval > 0 {
		w.wg.Go(func() { w.auditLoop(ctx, w.cfg.auditInterval) })
	}
	w.wg.Go(func() {
		// WaitFor waits on the informers' channels; WaitForCacheSync would poll every 100 ms.
		if cache.WaitFor(ctx, "", synced...) {
			// Every object of the initial lists is queued ahead of the barrier, so once the worker
			// reaches it the tree holds the whole cluster.
			w.queue.Add(syncBarrier)
		}
	})

	timeout := time.NewTimer(w.cfg.startupTimeout)
	defer timeout.Stop()
	select {
	case <-w.syncCh:
		log.Infof("synced with the API server: %d services", len(w.services.GetStore().ListKeys()))
	case <-timeout.C:
		log.Warningf("not synced with the API server after %s; cluster names answer SERVFAIL until then", w.cfg.startupTimeout)
	}
	return nil
}

// stop stops the informers and the worker and waits for them: a Corefile reload leaks nothing. The
// instance is not synced any more, and its gauges go unless a newer instance has taken them.
func (w *watcher) stop() error {
	w.stopped.Do(func() {
		close(w.stopCh)
		w.queue.ShutDown()
	})
	w.wg.Wait()
	if w.serialTimer != nil {
		w.serialTimer.Stop() // it holds the watcher, and through it the tree
	}
	if w.built != nil {
		w.built()
	}
	w.synced.Store(false)
	w.metrics.release()
	return nil
}

func (w *watcher) ctx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-w.stopCh; cancel() }()
	return ctx
}

// watched is one kind of object kubetree watches: its informer, the handlers that keep the
// queue and the indexes from it, and what the audit needs to compare it with the API server.
type watched struct {
	name      string
	informer  cache.SharedIndexInformer
	handlers  cache.ResourceEventHandlerFuncs
	changed   func(old, new any) bool // a difference DNS can see
	transform cache.TransformFunc
	list      func(context.Context, meta.ListOptions) (runtime.Object, error)
}

// wire gives each resource its handlers.
func (w *watcher) wire() {
	for _, r := range w.resources {
		switch r.informer {
		case w.services:
			r.handlers, r.changed = handlerFuncs(w.enqueueService, serviceChanged), serviceChanged
		case w.namespaces:
			r.handlers, r.changed = handlerFuncs(w.enqueueNamespace, func(_, _ any) bool { return false }), func(_, _ any) bool { return false }
		case w.slices:
			r.handlers, r.changed = w.sliceEvents(), sliceChanged
		case w.pods:
			r.handlers, r.changed = w.podEvents(), podDiffers
		case w.imports:
			r.handlers, r.changed = handlerFuncs(w.enqueueImport, serviceChanged), serviceChanged
		case w.mcSlices:
			r.handlers, r.changed = w.mcSliceEvents(), sliceChanged
		}
	}
}

// podEvents keep the pod index. Pods do not go through the queue: no record depends on them, and
// the index takes a change in one short lock.
func (w *watcher) podEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.podChanged(nil, storedAs[storedPod](obj)) },
		UpdateFunc: func(old, new any) {
			w.podChanged(storedAs[storedPod](old), storedAs[storedPod](new))
		},
		DeleteFunc: func(obj any) { w.podChanged(storedAs[storedPod](obj), nil) },
	}
}

func (w *watcher) podChanged(old, new *storedPod) {
	w.podIndex.replace(old, new)
	if new != nil && len(new.problems) > 0 && (old == nil || old.ResourceVersion != new.ResourceVersion) {
		w.applier.reportPod(new)
	}
}

// handlerFuncs enqueues on add and delete, and on update only when changed says DNS can see it.
func handlerFuncs(enqueue func(obj any), changed func(old, new any) bool) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { enqueue(obj) },
		UpdateFunc: func(old, new any) {
			if changed(old, new) {
				enqueue(old) // a slice may have moved to another service: both need a rebuild
				enqueue(new)
			}
		},
		DeleteFunc: enqueue,
	}
}

func (w *watcher) enqueueService(obj any) {
	if key := keyOf(obj); key != "" {
		w.queue.Add(key)
	}
}

func (w *watcher) enqueueImport(obj any) {
	if key := keyOf(obj); key != "" {
		w.queue.Add(importPrefix + key)
	}
}

// mcSliceEvents keeps the ServiceImports' slice index and queues the imports whose slices changed.
func (w *watcher) mcSliceEvents() cache.ResourceEventHandlerFuncs {
	changed := func(old, new *storedSlice) {
		w.mcIndex.replace(old, new)
		for _, s := range []*storedSlice{old, new} {
			if key := serviceOf(s); key != "" {
				w.queue.Add(importPrefix + key)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { changed(nil, storedAs[storedSlice](obj)) },
		UpdateFunc: func(old, new any) {
			if sliceChanged(old, new) {
				changed(storedAs[storedSlice](old), storedAs[storedSlice](new))
			}
		},
		DeleteFunc: func(obj any) { changed(storedAs[storedSlice](obj), nil) },
	}
}

func (w *watcher) enqueueNamespace(obj any) {
	if key := keyOf(obj); key != "" {
		w.queue.Add(nsPrefix + key)
	}
}

// sliceEvents keeps the slice index and queues the services whose slices changed: on an update,
// both the old and the new owner, as a slice may move between services.
func (w *watcher) sliceEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.sliceChanged(nil, storedAs[storedSlice](obj)) },
		UpdateFunc: func(old, new any) {
			if sliceChanged(old, new) {
				w.sliceChanged(storedAs[storedSlice](old), storedAs[storedSlice](new))
			}
		},
		DeleteFunc: func(obj any) { w.sliceChanged(storedAs[storedSlice](obj), nil) },
	}
}

func (w *watcher) sliceChanged(old, new *storedSlice) {
	if key := serviceOf(new); key != "" && new.triggered != 0 && w.synced.Load() {
		// Changes during the first sync are the cluster's history, not programming latency.
		w.triggeredMu.Lock()
		if t, ok := w.triggered[key]; !ok || new.triggered < t {
			w.triggered[key] = new.triggered
		}
		w.triggeredMu.Unlock()
	}
	w.sliceIndex.replace(old, new)
	for _, s := range []*storedSlice{old, new} {
		if key := serviceOf(s); key != "" {
			w.queue.Add(key)
		}
	}
}

// storedAs unwraps a tombstone: its object is the last version the informer saw, so it is the one
// to take out of the indexes (and a slice's names the service to rebuild).
func storedAs[T any](obj any) *T {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, _ := obj.(*T)
	return o
}

// work hands queued keys to the applier until the queue shuts down.
func (w *watcher) work() {
	for {
		key, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		w.handle(key)
		w.queue.Done(key)
	}
}

func (w *watcher) handle(key string) {
	w.applier.mu.Lock()
	defer w.applier.mu.Unlock()
	switch {
	case key == syncBarrier && w.queue.Len() > 0:
		// Whatever is queued now was queued before the worker took the barrier: some of it may be
		// the initial lists' (see syncSettled). Ready once that is applied too.
		w.queue.Add(syncSettled)
	case key == syncBarrier, key == syncSettled:
		if !w.synced.Swap(true) {
			close(w.syncCh)
			w.built()
		}
		w.metrics.synced.Set(1)
	case key == serialKey:
		w.serialDue.Store(false)
	case strings.HasPrefix(key, nsPrefix):
		w.applyNamespace(strings.TrimPrefix(key, nsPrefix))
	case strings.HasPrefix(key, importPrefix):
		w.applyImport(strings.TrimPrefix(key, importPrefix))
	default:
		w.applyService(key)
	}
	if w.applier.touchSerial() && !w.serialDue.Swap(true) {
		// Changed in the second the serial last moved to: move it in the next one.
		w.serialTimer = time.AfterFunc(time.Until(time.Unix(w.applier.serial+1, 0)), func() { w.queue.Add(serialKey) })
	}
}

// applyNamespace publishes or removes the namespace's names, and applies its services: a service is
// served only while its namespace exists and is exposed. The services are applied here rather than
// queued: queued, they could land behind the sync barrier, and Ready would be reported while they
// still answered NXDOMAIN.
func (w *watcher) applyNamespace(ns string) {
	w.applier.applyNamespace(ns, w.namespaceExposed(ns))
	keys, _ := w.services.GetIndexer().IndexKeys(cache.NamespaceIndex, ns)
	for _, key := range keys {
		w.applyService(key)
	}
	if w.imports != nil {
		keys, _ = w.imports.GetIndexer().IndexKeys(cache.NamespaceIndex, ns)
		for _, key := range keys {
			w.applyImport(key)
		}
	}
}

// applyImport hands the applier what the stores hold of one ServiceImport and its slices.
func (w *watcher) applyImport(key string) {
	ns, _, _ := strings.Cut(key, "/")
	obj, exists, _ := w.imports.GetStore().GetByKey(key)
	var si *storedService
	if exists {
		si = obj.(*storedService)
	}
	w.applier.applyImport(key, si, w.mcIndex.of(key), w.namespaceExposed(ns))
}

func (w *watcher) namespaceExposed(ns string) bool {
	if !w.cfg.namespaceExposed(ns) {
		return false
	}
	_, exists, _ := w.namespaces.GetStore().GetByKey(ns)
	return exists
}

// applyService hands the applier what the stores hold of one service and its slices.
func (w *watcher) applyService(key string) {
	ns, _, _ := strings.Cut(key, "/")
	obj, exists, _ := w.services.GetStore().GetByKey(key)
	var svc *storedService
	if exists {
		svc = obj.(*storedService)
	}
	var sls []*storedSlice
	if w.slices != nil {
		sls = w.sliceIndex.of(key)
	}
	w.applier.applyService(key, svc, sls, w.namespaceExposed(ns))
	w.triggeredMu.Lock()
	triggered, ok := w.triggered[key]
	delete(w.triggered, key)
	w.triggeredMu.Unlock()
	if ok && svc != nil && svc.model != nil && svc.model.Kind != externalName {
		kind := "cluster_ip"
		if svc.model.Kind == headless {
			kind = "headless_with_selector" // the controller sets the trigger time only for a selector's slices
		}
		w.metrics.programmed(kind, triggered)
	}
}

// serviceChanged reports whether an update changes anything DNS shows, or what it reports.
func serviceChanged(old, new any) bool {
	a, ok1 := old.(*storedService)
	b, ok2 := new.(*storedService)
	if !ok1 || !ok2 {
		return true
	}
	return !reflect.DeepEqual(a.model, b.model) || !sameProblems(a.problems, b.problems)
}

// sliceChanged reports whether an update changes anything DNS shows, or what it reports. The
// stored slices hold only what DNS uses, so topology, conditions other than ready, annotations and
// other labels cannot cause a rebuild.
func sliceChanged(old, new any) bool {
	a, ok1 := old.(*storedSlice)
	b, ok2 := new.(*storedSlice)
	if !ok1 || !ok2 {
		return true
	}
	return a.service != b.service || !reflect.DeepEqual(a.model, b.model) || !sameProblems(a.problems, b.problems)
}

func sameProblems(a, b []problem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].text != b[i].text {
			return false
		}
	}
	return true
}

func selectorString(sel *meta.LabelSelector) (string, error) {
	if sel == nil {
		return "", nil
	}
	s, err := meta.LabelSelectorAsSelector(sel)
	if err != nil {
		return "", err
	}
	return s.String(), nil
}
