// Package watcher is the watch side, a controller as client-go's are: an informer per resource
// (internal/informer: Services, namespaces and, as the Corefile asks, EndpointSlices, pods, Nodes,
// ServiceImports and their slices), handlers that keep a slice index and queue keys, and a worker
// that hands every change to the write side through the Applier interface. It knows client-go, the
// informers, the wire's codecs and the object model, and nothing of DNS.
package watcher

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/kubetree/kubetree/internal/informer"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/typed/apis/v1alpha1"
)

var log = clog.NewWithPlugin("kubetree")

// watchIface is a watch; watch is the name of the watcher's watch functions.
type watchIface = watch.Interface

// Applier is the write side, as the watcher hands it the cluster: every service (or ServiceImport)
// with its slices, by key, whenever one of them changed; whether each namespace exists and is
// served, and whether isolate_labels selects it; every pod and node change.
type Applier interface {
	// ApplyService publishes the service stored under key (nil: it is gone) with its slices; exposed
	// says whether its namespace exists and may be served.
	ApplyService(key string, svc *object.StoredService, sls []*object.StoredSlice, exposed bool)
	// ApplyImport does the same for a ServiceImport and its multicluster slices.
	ApplyImport(key string, si *object.StoredService, sls []*object.StoredSlice, exposed bool)
	// ApplyNamespace publishes or removes a namespace's names; the watcher then applies its services.
	ApplyNamespace(ns string, exists bool)
	// ApplyLabelledNamespace records whether isolate_labels selects namespace ns.
	ApplyLabelledNamespace(ns string, labelled bool)
	// ApplyPod swaps a pod's versions (old nil: added; new nil: deleted).
	ApplyPod(old, new *object.StoredPod)
	// ApplyNode records a node (n nil: it is gone).
	ApplyNode(name string, n *object.StoredNode)
}

// Options are what the Corefile says of what to watch, filled in by setup.
type Options struct {
	Namespaces        map[string]bool // the namespaces option; empty: every namespace
	NamespaceSelector *meta.LabelSelector
	LabelSelector     *meta.LabelSelector
	// IsolateLabels selects the namespaces isolate opens to every client; nil: none is watched.
	IsolateLabels *meta.LabelSelector
	NoEndpoints   bool                // noendpoints: no EndpointSlices are watched
	Slices        object.SliceOptions // how Services' EndpointSlices are slimmed
	// MulticlusterSlices is how ServiceImports' slices are slimmed; with Multicluster, ServiceImports
	// and their slices are watched.
	MulticlusterSlices object.SliceOptions
	Multicluster       bool
	Topology           bool             // Nodes are watched, and Services keep their topology hints
	PodStore           *object.PodStore // pods are watched into it; nil unless pods verified
	StartupTimeout     time.Duration
	AuditInterval      time.Duration // 0: no audit
	// Synced is set once the first full state is published, and cleared when the watcher stops.
	Synced  *atomic.Bool
	Metrics *metrics.ServerBlock
}

// allowsNamespace reports whether the namespaces option lets a namespace be served.
func (o *Options) allowsNamespace(ns string) bool {
	return len(o.Namespaces) == 0 || o.Namespaces[ns]
}

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

// Watcher owns the client-go side: an informer per resource it watches. Services, namespaces,
// ServiceImports and slices feed one queue of keys, and one goroutine at a time hands each key's
// stored objects to the applier (worker.go); one at a time keeps the order of updates simple, and
// a build is cheap. Pod, node and isolate_labels events go to the applier straight from their
// handlers (events.go): no record depends on them.
type Watcher struct {
	opts       Options
	applier    Applier
	metrics    *metrics.ServerBlock
	services   *informer.Informer
	slices     *informer.Informer // nil with noendpoints
	namespaces *informer.Informer
	// labelled are the namespaces isolate_labels selects, apart from namespaces (which the
	// namespace_labels selector may filter); nil without isolate_labels.
	labelled *informer.Informer
	pods     *informer.Informer // nil unless pods verified
	nodes    *informer.Informer // nil without topology
	imports  *informer.Informer // ServiceImports; nil without multicluster
	mcSlices *informer.Informer // EndpointSlices of ServiceImports; nil without multicluster
	mcIndex  *SliceIndex        // the ServiceImports' slices
	queue    workQueue
	// applying is held by whichever goroutine applies queued keys: the worker until the first
	// sync, then the goroutine whose event queued them (applyQueued).
	applying   sync.Mutex
	sliceIndex *SliceIndex
	resources  []*watched     // every informer, with what the audit needs
	versions   rest.Interface // the audit's metadata-only lists (versionsREST)
	kube       kubernetes.Interface

	// triggered holds, by service key, the earliest change of the service that is not yet answered,
	// for the DNS programming latency.
	triggeredMu sync.Mutex
	triggered   map[string]trigger

	stopCh  chan struct{}
	stopped sync.Once
	// built ends the watcher's part of the low GC percent of the first lists (informer.ListStarted):
	// the lists end at their bookmarks, but the tree is built from them after that.
	built func()
	// closeConnections closes the transport's connections once the watches are off them: every
	// instance has a transport of its own, and a reload would otherwise leave the old one's
	// connection and its read loop until the idle timeout.
	closeConnections func()
	wg               sync.WaitGroup
	syncCh           chan struct{} // closed when the first full state is in the tree
}

// New makes the watcher of what o asks for, through c, handing every change to a. Start runs it.
func New(o Options, a Applier, c Clients) (*Watcher, error) {
	w := &Watcher{
		opts:             o,
		applier:          a,
		metrics:          o.Metrics,
		queue:            informer.NewKeyQueue(),
		sliceIndex:       NewSliceIndex(),
		mcIndex:          NewSliceIndex(),
		triggered:        map[string]trigger{},
		stopCh:           make(chan struct{}),
		syncCh:           make(chan struct{}),
		versions:         c.Versions,
		kube:             c.Kube,
		closeConnections: c.Close,
	}
	labels, err := selectorString(o.LabelSelector)
	if err != nil {
		return nil, err
	}
	w.watchServices(c, labels)
	if err := w.watchNamespaces(c.Kube); err != nil {
		return nil, err
	}
	if !o.NoEndpoints {
		w.watchSlices(c, labels)
	}
	if o.Multicluster {
		if err := w.watchImports(c.Kube, c.Imports, labels); err != nil {
			return nil, err
		}
	}
	if o.PodStore != nil {
		w.watchPods(c, labels) // the labels option selects pods too, as in the in-tree plugin
	}
	if o.Topology {
		w.watchNodes(c.Kube)
	}
	return w, nil
}

// watchServices watches Services through c.Services, slim, or in full through c.Kube without it.
func (w *Watcher) watchServices(c Clients, labels string) {
	slimService := object.SlimService
	if w.opts.Topology {
		slimService = object.SlimServiceWithTopology
	}
	resource := api.SchemeGroupVersion.WithResource("services")
	listInFull := func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Services(ns).List(ctx, o)
	}
	if c.Services != nil {
		list, watch := informer.SlimListWatch(c.Services, "services")
		w.services = w.watchListingInFull("services", resource, &object.StoredService{}, slimService, labels, list, listInFull, watch)
		return
	}
	w.services = w.watch("services", resource, &api.Service{}, slimService, labels, listInFull,
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return c.Kube.CoreV1().Services("").Watch(ctx, o)
		})
}

// watchNamespaces watches the namespaces namespace_labels selects and, apart from them, those
// isolate_labels selects.
func (w *Watcher) watchNamespaces(client kubernetes.Interface) error {
	nsLabels, err := selectorString(w.opts.NamespaceSelector)
	if err != nil {
		return err
	}
	list := func(ctx context.Context, _ string, o meta.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Namespaces().List(ctx, o)
	}
	watch := func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
		return client.CoreV1().Namespaces().Watch(ctx, o)
	}
	resource := api.SchemeGroupVersion.WithResource("namespaces")
	w.namespaces = w.watch("namespaces", resource, &api.Namespace{}, object.SlimNamespace, nsLabels, list, watch)
	if w.opts.IsolateLabels == nil {
		return nil
	}
	// The API server selects them: what kubetree keeps of a namespace stays its name.
	sel, err := selectorString(w.opts.IsolateLabels)
	if err != nil {
		return err
	}
	w.labelled = w.watch("isolate_namespaces", resource, &api.Namespace{}, object.SlimNamespace, sel, list, watch)
	return nil
}

// watchSlices watches EndpointSlices through c.Slices, slim, or in full through c.Kube without it.
func (w *Watcher) watchSlices(c Clients, labels string) {
	transform := object.SliceTransform(w.opts.Slices)
	if c.Slices != nil {
		list, watch := informer.SlimListWatch(c.Slices, "endpointslices")
		w.slices = w.watch("endpointslices", sliceResource, &object.StoredSlice{}, transform, labels, list, watch)
		return
	}
	w.slices = w.watch("endpointslices", sliceResource, &discovery.EndpointSlice{}, transform, labels,
		func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
			return c.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return c.Kube.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
		})
}

// watchPods watches pods into the pod store, through c.Pods (slim) or in full through c.Kube.
func (w *Watcher) watchPods(c Clients, labels string) {
	resource := api.SchemeGroupVersion.WithResource("pods")
	store := w.opts.PodStore
	if c.Pods != nil {
		list, watch := informer.SlimListWatch(c.Pods, "pods")
		w.pods = w.watch("pods", resource, &object.StoredPod{}, store.SlimPod, labels, list, watch)
		return
	}
	w.pods = w.watch("pods", resource, &api.Pod{}, store.SlimPod, labels,
		func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
			return c.Kube.CoreV1().Pods(ns).List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return c.Kube.CoreV1().Pods("").Watch(ctx, o)
		})
}

// watchNodes watches Nodes, for their topology zones. Nodes are few, and decoded in full before the
// transform slims them, as namespaces are.
func (w *Watcher) watchNodes(client kubernetes.Interface) {
	w.nodes = w.watch("nodes", api.SchemeGroupVersion.WithResource("nodes"), &api.Node{}, object.SlimNode, "",
		func(ctx context.Context, _ string, o meta.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Nodes().List(ctx, o)
		},
		func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
			return client.CoreV1().Nodes().Watch(ctx, o)
		})
}

// watchImports watches ServiceImports, and the EndpointSlices that carry the MCS service-name
// label (with the labels option's selector too, as in the in-tree plugin), even with noendpoints.
func (w *Watcher) watchImports(client kubernetes.Interface, imports mcsclient.MulticlusterV1alpha1Interface, labels string) error {
	if imports == nil {
		return errors.New("multicluster: no client for ServiceImports")
	}
	w.imports = w.watch("serviceimports", mcs.SchemeGroupVersion.WithResource("serviceimports"), &mcs.ServiceImport{}, object.SlimServiceImport, "",
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
	w.mcSlices = w.watch("multicluster_endpointslices", sliceResource, &discovery.EndpointSlice{}, object.SliceTransform(w.opts.MulticlusterSlices), mcLabels,
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
func (w *Watcher) watch(name string, resource schema.GroupVersionResource, example runtime.Object, transform cache.TransformFunc, labels string,
	list listFunc, watchFn func(context.Context, meta.ListOptions) (watchIface, error)) *informer.Informer {
	return w.watchListingInFull(name, resource, example, transform, labels, list, list, watchFn)
}

// watchListingInFull is watch for a resource whose list decodes slim: explain lists an object the
// selector left out through inFull, for its labels, which slim objects lack.
func (w *Watcher) watchListingInFull(name string, resource schema.GroupVersionResource, example runtime.Object, transform cache.TransformFunc, labels string,
	list, inFull listFunc, watchFn func(context.Context, meta.ListOptions) (watchIface, error)) *informer.Informer {
	var inf *informer.Informer
	transform = sharingStored(transform, func() cache.Store { return inf.GetStore() })
	inf = informer.New(w.metrics, name, example, transform, labels,
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) { return list(ctx, "", o) }, watchFn)
	w.resources = append(w.resources, &watched{name: name, resource: resource, labels: labels, informer: inf, transform: transform, unfiltered: inFull,
		list: func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labels
			return list(ctx, ns, o)
		}})
	return inf
}

// Start runs the informers and the worker, and waits up to startup_timeout for the first sync.
func (w *Watcher) Start() error {
	w.metrics.Claim()
	// The first tree is built after the lists end: the collector keeps working harder until then.
	w.built = informer.ListStarted()
	ctx := w.ctx()
	var synced []cache.DoneChecker
	w.attachHandlers()
	for _, r := range w.resources {
		r.informer.AddEventHandler(r.handlers)
		r.informer.AfterHandlers(w.applyQueued)
		synced = append(synced, r.informer)
		w.wg.Go(func() { r.informer.Run(ctx) })
	}
	w.wg.Go(w.work)
	if w.opts.AuditInterval > 0 {
		w.wg.Go(func() { w.auditLoop(ctx, w.opts.AuditInterval) })
	}
	w.wg.Go(func() {
		// WaitFor waits on the informers' channels; WaitForCacheSync would poll every 100 ms.
		if cache.WaitFor(ctx, "", synced...) {
			// Every object of the initial lists is queued ahead of the barrier, so once the worker
			// reaches it the tree holds the whole cluster.
			w.queue.Add(syncBarrier)
		}
	})

	timeout := time.NewTimer(w.opts.StartupTimeout)
	defer timeout.Stop()
	select {
	case <-w.syncCh:
		log.Infof("synced with the API server: %d services", len(w.services.GetStore().ListKeys()))
	case <-timeout.C:
		log.Warningf("not synced with the API server after %s; cluster names answer SERVFAIL until then", w.opts.StartupTimeout)
	}
	return nil
}

// Stop stops the informers and the worker and waits for them: a Corefile reload leaks nothing. The
// instance is not synced any more, and its gauges go unless a newer instance has taken them. It
// may be called more than once.
func (w *Watcher) Stop() error {
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
	w.opts.Synced.Store(false)
	w.metrics.Release()
	return nil
}

func (w *Watcher) ctx() context.Context {
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
	informer  *informer.Informer
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
