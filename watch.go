package kubetree

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubetree/kubetree/internal/object"

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
)

// watcher owns the client-go side: an informer per resource it watches (services, namespaces and,
// as the Corefile asks, EndpointSlices, pods, ServiceImports and their slices). Services,
// namespaces, ServiceImports and slices feed one queue of keys, and a single worker hands each
// key's stored objects to the applier; one worker keeps the order of updates simple, and a build
// is cheap. Pod events go to the applier straight from their handlers: no record depends on a pod.
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
	mcIndex    *object.SliceIndex        // the ServiceImports' slices
	podStore   *object.PodStore          // nil unless pods verified
	queue      workqueue.TypedInterface[string]
	sliceIndex *object.SliceIndex
	resources  []*watched // every informer, with what the audit needs

	// triggered holds, by service key, the earliest change of a slice that is not yet answered
	// (last-change-trigger-time, Unix ns), for the DNS programming latency.
	triggeredMu sync.Mutex
	triggered   map[string]int64

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
	if k.podStore != nil {
		if pods, err = podREST(rc, k.podStore); err != nil {
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
		podStore:   k.podStore,
		queue:      workqueue.NewTyped[string](),
		sliceIndex: object.NewSliceIndex(),
		mcIndex:    object.NewSliceIndex(),
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
	w.services = w.watch(client, "services", &api.Service{}, object.SlimService, labels,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Services("").List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return client.CoreV1().Services("").Watch(ctx, o)
		})
	w.namespaces = w.watch(client, "namespaces", &api.Namespace{}, object.SlimNamespace, nsLabels, nil,
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Namespaces().List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return client.CoreV1().Namespaces().Watch(ctx, o)
		})
	switch {
	case !w.cfg.noEndpoints && slices != nil:
		list, watch := slimListWatch(slices, "endpointslices")
		w.slices = w.watch(client, "endpointslices", &object.StoredSlice{}, object.SliceTransform(w.cfg.sliceOptions(false)), labels, nil, list, watch)
	case !w.cfg.noEndpoints:
		w.slices = w.watch(client, "endpointslices", &discovery.EndpointSlice{}, object.SliceTransform(w.cfg.sliceOptions(false)), labels, nil,
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
	case w.podStore != nil && pods != nil:
		list, watch := slimListWatch(pods, "pods")
		w.pods = w.watch(client, "pods", &object.StoredPod{}, w.podStore.SlimPod, labels, nil, list, watch)
	case w.podStore != nil:
		w.pods = w.watch(client, "pods", &api.Pod{}, w.podStore.SlimPod, labels, nil,
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
	w.imports = w.watch(client, "serviceimports", &mcs.ServiceImport{}, object.SlimServiceImport, "",
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
	w.mcSlices = w.watch(client, "multicluster_endpointslices", &discovery.EndpointSlice{}, object.SliceTransform(w.cfg.sliceOptions(true)), mcLabels, nil,
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
	w.attachHandlers()
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

// attachHandlers gives each resource its handlers.
func (w *watcher) attachHandlers() {
	for _, r := range w.resources {
		switch r.informer {
		case w.services:
			r.handlers, r.changed = handlerFuncs(w.enqueueService, serviceDiffers), serviceDiffers
		case w.namespaces:
			r.handlers, r.changed = handlerFuncs(w.enqueueNamespace, func(_, _ any) bool { return false }), func(_, _ any) bool { return false }
		case w.slices:
			r.handlers, r.changed = w.sliceEvents(), sliceDiffers
		case w.pods:
			r.handlers, r.changed = w.podEvents(), object.PodDiffers
		case w.imports:
			r.handlers, r.changed = handlerFuncs(w.enqueueImport, serviceDiffers), serviceDiffers
		case w.mcSlices:
			r.handlers, r.changed = w.mcSliceEvents(), sliceDiffers
		}
	}
}

// podEvents hand pod changes to the applier, which keeps the pod index. Pods do not go through
// the queue: no record depends on them, and the index takes a change in one short lock.
func (w *watcher) podEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.applier.applyPod(nil, storedAs[object.StoredPod](obj)) },
		UpdateFunc: func(old, new any) {
			w.applier.applyPod(storedAs[object.StoredPod](old), storedAs[object.StoredPod](new))
		},
		DeleteFunc: func(obj any) { w.applier.applyPod(storedAs[object.StoredPod](obj), nil) },
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
	if key := object.KeyOf(obj); key != "" {
		w.queue.Add(key)
	}
}

func (w *watcher) enqueueImport(obj any) {
	if key := object.KeyOf(obj); key != "" {
		w.queue.Add(importPrefix + key)
	}
}

// mcSliceEvents keeps the ServiceImports' slice index and queues the imports whose slices changed.
func (w *watcher) mcSliceEvents() cache.ResourceEventHandlerFuncs {
	changed := func(old, new *object.StoredSlice) {
		w.mcIndex.Replace(old, new)
		for _, s := range []*object.StoredSlice{old, new} {
			if key := s.ServiceKey(); key != "" {
				w.queue.Add(importPrefix + key)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { changed(nil, storedAs[object.StoredSlice](obj)) },
		UpdateFunc: func(old, new any) {
			if sliceDiffers(old, new) {
				changed(storedAs[object.StoredSlice](old), storedAs[object.StoredSlice](new))
			}
		},
		DeleteFunc: func(obj any) { changed(storedAs[object.StoredSlice](obj), nil) },
	}
}

func (w *watcher) enqueueNamespace(obj any) {
	if key := object.KeyOf(obj); key != "" {
		w.queue.Add(nsPrefix + key)
	}
}

// sliceEvents keeps the slice index and queues the services whose slices changed: on an update,
// both the old and the new owner, as a slice may move between services.
func (w *watcher) sliceEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.onSlice(nil, storedAs[object.StoredSlice](obj)) },
		UpdateFunc: func(old, new any) {
			if sliceDiffers(old, new) {
				w.onSlice(storedAs[object.StoredSlice](old), storedAs[object.StoredSlice](new))
			}
		},
		DeleteFunc: func(obj any) { w.onSlice(storedAs[object.StoredSlice](obj), nil) },
	}
}

func (w *watcher) onSlice(old, new *object.StoredSlice) {
	if key := new.ServiceKey(); key != "" && new.Triggered != 0 && w.synced.Load() {
		// Changes during the first sync are the cluster's history, not programming latency.
		w.triggeredMu.Lock()
		if t, ok := w.triggered[key]; !ok || new.Triggered < t {
			w.triggered[key] = new.Triggered
		}
		w.triggeredMu.Unlock()
	}
	w.sliceIndex.Replace(old, new)
	for _, s := range []*object.StoredSlice{old, new} {
		if key := s.ServiceKey(); key != "" {
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

// handle applies one key; the applier takes its own lock for each write, and moves the SOA serial
// after it.
func (w *watcher) handle(key string) {
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
func (w *watcher) syncNamespace(ns string) {
	w.applier.applyNamespace(ns, w.namespaceServed(ns))
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
func (w *watcher) syncImport(key string) {
	ns, _, _ := strings.Cut(key, "/")
	w.applier.applyImport(key, storedService(w.imports, key), w.mcIndex.Of(key), w.namespaceServed(ns))
}

// storedService is what an informer of Services or ServiceImports holds under key; nil for none.
func storedService(inf cache.SharedIndexInformer, key string) *object.StoredService {
	obj, _, _ := inf.GetStore().GetByKey(key)
	svc, _ := obj.(*object.StoredService)
	return svc
}

// namespaceServed reports whether a namespace exists and the Corefile lets it be served.
func (w *watcher) namespaceServed(ns string) bool {
	if !w.cfg.allowsNamespace(ns) {
		return false
	}
	_, exists, _ := w.namespaces.GetStore().GetByKey(ns)
	return exists
}

// syncService hands the applier what the stores hold of one service and its slices.
func (w *watcher) syncService(key string) {
	ns, _, _ := strings.Cut(key, "/")
	svc := storedService(w.services, key)
	var sls []*object.StoredSlice
	if w.slices != nil {
		sls = w.sliceIndex.Of(key)
	}
	w.applier.applyService(key, svc, sls, w.namespaceServed(ns))
	w.triggeredMu.Lock()
	triggered, ok := w.triggered[key]
	delete(w.triggered, key)
	w.triggeredMu.Unlock()
	if ok && svc != nil && svc.Model != nil && svc.Model.Kind != object.ExternalName {
		kind := "cluster_ip"
		if svc.Model.Kind == object.Headless {
			kind = "headless_with_selector" // the controller sets the trigger time only for a selector's slices
		}
		w.metrics.programmed(kind, triggered)
	}
}

// serviceDiffers reports whether an update changes anything DNS shows, or what it reports.
func serviceDiffers(old, new any) bool {
	a, ok1 := old.(*object.StoredService)
	b, ok2 := new.(*object.StoredService)
	if !ok1 || !ok2 {
		return true
	}
	return !reflect.DeepEqual(a.Model, b.Model) || !sameProblems(a.Problems, b.Problems)
}

// sliceDiffers reports whether an update changes anything DNS shows, or what it reports. The
// stored slices hold only what DNS uses, so topology, conditions other than ready, annotations and
// other labels cannot cause a rebuild.
func sliceDiffers(old, new any) bool {
	a, ok1 := old.(*object.StoredSlice)
	b, ok2 := new.(*object.StoredSlice)
	if !ok1 || !ok2 {
		return true
	}
	return a.Service != b.Service || !reflect.DeepEqual(a.Model, b.Model) || !sameProblems(a.Problems, b.Problems)
}

func sameProblems(a, b []object.Problem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Text != b[i].Text {
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
