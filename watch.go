package kubetree

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubetree/kubetree/internal/object"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
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
// namespaces, ServiceImports and slices feed one queue of keys, and one goroutine at a time hands
// each key's stored objects to the applier (worker.go); one at a time keeps the order of updates
// simple, and a build is cheap. Pod events go to the applier straight from their handlers: no record depends on a pod.
type watcher struct {
	cfg        *config
	applier    *applier
	synced     *atomic.Bool // the plugin's: set once the first full state is published
	metrics    *serverMetrics
	services   *informer
	slices     *informer // nil with noendpoints
	namespaces *informer
	// labelled are the namespaces isolate_labels selects, apart from namespaces (which the
	// namespace_labels selector may filter); nil without isolate_labels.
	labelled *informer
	pods     *informer          // nil unless pods verified
	nodes    *informer          // nil without topology
	imports  *informer          // ServiceImports; nil without multicluster
	mcSlices *informer          // EndpointSlices of ServiceImports; nil without multicluster
	mcIndex  *object.SliceIndex // the ServiceImports' slices
	podStore *object.PodStore   // nil unless pods verified
	queue    workQueue
	// applying is held by whichever goroutine applies queued keys: the worker until the first
	// sync, then the goroutine whose event queued them (applyQueued).
	applying   sync.Mutex
	sliceIndex *object.SliceIndex
	resources  []*watched     // every informer, with what the audit needs
	versions   rest.Interface // the audit's metadata-only lists (versionsREST)

	// triggered holds, by service key, the earliest change of a slice that is not yet answered
	// (last-change-trigger-time, Unix ns), for the DNS programming latency.
	triggeredMu sync.Mutex
	triggered   map[string]int64

	stopCh  chan struct{}
	stopped sync.Once
	// built ends the watcher's part of the low GC percent of the first lists (relist.go): the
	// lists end at their bookmarks, but the tree is built from them after that.
	built func()
	// closeConnections closes the transport's connections once the watches are off them: every
	// instance has a transport of its own (ownTransport), and a reload would otherwise leave the old
	// one's connection and its read loop until the idle timeout.
	closeConnections func()
	wg               sync.WaitGroup
	syncCh           chan struct{} // closed when the first full state is in the tree
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
	versions, err := versionsREST(rc)
	if err != nil {
		return nil, err
	}
	services, err := serviceREST(rc, k.cfg.topology)
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
	w, err := newWatcherFrom(k, a, client, versions, services, slices, pods, imports)
	if err != nil {
		return nil, err
	}
	w.closeConnections = func() { closeConnections(rc) }
	return w, nil
}

// newWatcherFrom watches client; Services through services, EndpointSlices through slices and,
// with pods verified, pods through pods, each of which decodes slim (nil: in full through client);
// with multicluster, ServiceImports through imports. The audit lists names and versions through
// versions (versionsREST).
func newWatcherFrom(k *Kubetree, a *applier, client kubernetes.Interface, versions, services, slices, pods rest.Interface,
	imports mcsclient.MulticlusterV1alpha1Interface) (*watcher, error) {
	w := &watcher{
		cfg:        &k.cfg,
		applier:    a,
		synced:     &k.synced,
		metrics:    a.metrics,
		podStore:   k.podStore,
		queue:      newKeyQueue(),
		sliceIndex: object.NewSliceIndex(),
		mcIndex:    object.NewSliceIndex(),
		triggered:  map[string]int64{},
		stopCh:     make(chan struct{}),
		syncCh:     make(chan struct{}),
		versions:   versions,
	}
	labels, err := selectorString(w.cfg.labelSelector)
	if err != nil {
		return nil, err
	}
	nsLabels, err := selectorString(w.cfg.namespaceSelector)
	if err != nil {
		return nil, err
	}
	slimService := object.SlimService
	if w.cfg.topology {
		slimService = object.SlimServiceWithTopology
	}
	serviceResource := api.SchemeGroupVersion.WithResource("services")
	listServices := func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Services(ns).List(ctx, o)
	}
	if services != nil {
		list, watch := slimListWatch(services, "services")
		w.services = w.watchListingInFull(client, "services", serviceResource, &object.StoredService{}, slimService, labels, list, listServices, watch)
	} else {
		w.services = w.watch(client, "services", serviceResource, &api.Service{}, slimService, labels, listServices,
			func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
				return client.CoreV1().Services("").Watch(ctx, o)
			})
	}
	w.namespaces = w.watch(client, "namespaces", api.SchemeGroupVersion.WithResource("namespaces"), &api.Namespace{}, object.SlimNamespace, nsLabels,
		func(ctx context.Context, _ string, o meta.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Namespaces().List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return client.CoreV1().Namespaces().Watch(ctx, o)
		})
	if iso := w.cfg.isolate; iso != nil && iso.labels != nil {
		// The API server selects them: what kubetree keeps of a namespace stays its name.
		sel, err := selectorString(iso.labels)
		if err != nil {
			return nil, err
		}
		w.labelled = w.watch(client, "isolate_namespaces", api.SchemeGroupVersion.WithResource("namespaces"), &api.Namespace{}, object.SlimNamespace, sel,
			func(ctx context.Context, _ string, o meta.ListOptions) (runtime.Object, error) {
				return client.CoreV1().Namespaces().List(ctx, o)
			},
			func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
				return client.CoreV1().Namespaces().Watch(ctx, o)
			})
	}
	switch {
	case !w.cfg.noEndpoints && slices != nil:
		list, watch := slimListWatch(slices, "endpointslices")
		w.slices = w.watch(client, "endpointslices", sliceResource, &object.StoredSlice{}, object.SliceTransform(w.cfg.sliceOptions(false)), labels, list, watch)
	case !w.cfg.noEndpoints:
		w.slices = w.watch(client, "endpointslices", sliceResource, &discovery.EndpointSlice{}, object.SliceTransform(w.cfg.sliceOptions(false)), labels,
			func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
				return client.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
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
		w.pods = w.watch(client, "pods", api.SchemeGroupVersion.WithResource("pods"), &object.StoredPod{}, w.podStore.SlimPod, labels, list, watch)
	case w.podStore != nil:
		w.pods = w.watch(client, "pods", api.SchemeGroupVersion.WithResource("pods"), &api.Pod{}, w.podStore.SlimPod, labels,
			func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
				return client.CoreV1().Pods(ns).List(ctx, o)
			},
			func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
				return client.CoreV1().Pods("").Watch(ctx, o)
			})
	}
	if w.cfg.topology {
		// Nodes are few, and decoded in full before the transform slims them, as namespaces are.
		w.nodes = w.watch(client, "nodes", api.SchemeGroupVersion.WithResource("nodes"), &api.Node{}, object.SlimNode, "",
			func(ctx context.Context, _ string, o meta.ListOptions) (runtime.Object, error) {
				return client.CoreV1().Nodes().List(ctx, o)
			},
			func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
				return client.CoreV1().Nodes().Watch(ctx, o)
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
	w.imports = w.watch(client, "serviceimports", mcs.SchemeGroupVersion.WithResource("serviceimports"), &mcs.ServiceImport{}, object.SlimServiceImport, "",
		func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
			return imports.ServiceImports(ns).List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return imports.ServiceImports("").Watch(ctx, o)
		})
	mcLabels := mcs.LabelServiceName
	if labels != "" {
		mcLabels = labels + "," + mcLabels
	}
	w.mcSlices = w.watch(client, "multicluster_endpointslices", sliceResource, &discovery.EndpointSlice{}, object.SliceTransform(w.cfg.sliceOptions(true)), mcLabels,
		func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
			return client.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return client.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
		})
	return nil
}

// sliceResource is the API resource of EndpointSlices.
var sliceResource = discovery.SchemeGroupVersion.WithResource("endpointslices")

// listFunc lists a resource in a namespace ("": all of them).
type listFunc = func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error)

// watch makes the informer of one resource (named name in metrics and logs), which list lists,
// and keeps what the audit needs of it: its API resource, its transform (which shares what has
// not changed with the stored version, see sharingStored), and its list with the selector.
func (w *watcher) watch(client any, name string, resource schema.GroupVersionResource, example runtime.Object, transform cache.TransformFunc, labels string,
	list listFunc, watchFn func(context.Context, meta.ListOptions) (watchIface, error)) *informer {
	return w.watchListingInFull(client, name, resource, example, transform, labels, list, list, watchFn)
}

// watchListingInFull is watch for a resource whose list decodes slim: explain lists an object the
// selector left out through inFull, for its labels, which slim objects lack.
func (w *watcher) watchListingInFull(client any, name string, resource schema.GroupVersionResource, example runtime.Object, transform cache.TransformFunc, labels string,
	list, inFull listFunc, watchFn func(context.Context, meta.ListOptions) (watchIface, error)) *informer {
	var inf *informer
	transform = sharingStored(transform, func() cache.Store { return inf.GetStore() })
	inf = newInformer(client, w.metrics, name, example, transform, labels,
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) { return list(ctx, "", o) }, watchFn)
	w.resources = append(w.resources, &watched{name: name, resource: resource, labels: labels, informer: inf, transform: transform, unfiltered: inFull,
		list: func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labels
			return list(ctx, ns, o)
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
		r.informer.AddEventHandler(r.handlers)
		r.informer.store.afterHandlers = w.applyQueued
		synced = append(synced, r.informer.store)
		w.wg.Go(func() { r.informer.run(ctx) })
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
	if w.closeConnections != nil {
		w.closeConnections()
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
	resource  schema.GroupVersionResource
	labels    string // the label selector of its list and watch
	informer  *informer
	handlers  cache.ResourceEventHandlerFuncs
	changed   func(old, new any) bool // a difference DNS can see
	transform cache.TransformFunc
	// list lists it in a namespace ("": all), with the label selector.
	list listFunc
	// unfiltered lists it without the selector, with its labels: the explain option tells an
	// object the selector leaves out from one that does not exist.
	unfiltered listFunc
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
