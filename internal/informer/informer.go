package informer

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/kubetree/kubetree/internal/metrics"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

var log = clog.NewWithPlugin("kubetree")

// Informer keeps one resource's store current from the API server, as client-go's shared
// informer does, but hands each event to its handlers from the goroutine that reads the watch:
// the reflector writes into the store, and the store calls the handlers. client-go's informer
// passes every event on through a queue, a processor and a listener, each a goroutine of its own;
// at the rate an API server sends events, each one travels alone, and those wake-ups cost more
// CPU than decoding and applying the event. The reflector, and with it every guarantee of the
// list and watch (relist on 410 Gone, pages, bookmarks, resource versions), is
// client-go's own. Its handlers see what client-go's would, in the same order (contract_test.go):
// adds and updates as the store takes them, an add of a known key as an update, a relist's missing
// keys as tombstones (cache.DeletedFinalStateUnknown) before the list's adds and updates. It has
// no resync period: nothing is handed over again unless it changed.
type Informer struct {
	name      string
	metrics   *metrics.ServerBlock
	reflector *cache.Reflector
	store     *handingStore
	stopped   atomic.Bool
}

// New builds the informer of resource (its name in metrics and logs) that lists and watches with the
// label selector labels, keeps only the transformed (slim) objects by namespace, and counts API
// errors; example is an object of the type the watch sends.
func New(m *metrics.ServerBlock, resource string, example runtime.Object, transform cache.TransformFunc, labels string,
	list func(context.Context, meta.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, meta.ListOptions) (watch.Interface, error)) *Informer {
	r := &reconnect{resource: resource, metrics: m}
	store := newHandingStore(resource, transform)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labels
			store.listStarted()
			l, err := untilReachable(ctx, r, func() (runtime.Object, error) { return list(ctx, o) })
			if err != nil {
				store.endList() // the reflector stores no list that failed
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o meta.ListOptions) (watch.Interface, error) {
			o.LabelSelector = labels
			w, err := untilReachable(ctx, r, func() (watch.Interface, error) { return watchFn(ctx, o) })
			if sw, ok := w.(*streamWatch); ok && err == nil {
				sw.start(store) // it applies its events to the store itself
				return sw, nil
			}
			return w, err
		},
	}, plainLists{})
	return &Informer{name: resource, metrics: m, store: store,
		reflector: cache.NewReflectorWithOptions(lw, example, store, cache.ReflectorOptions{Name: resource})}
}

// plainLists tells the reflector to list, never to stream its lists (client-go's WatchListClient,
// on by default): a list is read as it streams in (the slim codecs' ReadList), so what it holds is
// its slim objects, as a streamed list's; but a streamed list is a watch, which kube-apiserver 1.37
// compresses a gzip member per event (WatchListCompression), several times the work of one
// compressed list, and start to ready took twice as long (bench/RESULTS.md). The first
// list is the watch cache's (resourceVersion "0"), as client-go's reflector asks without streamed
// lists; a relist after 410 Gone is a consistent one, in pages.
type plainLists struct{}

// IsWatchListSemanticsUnSupported implements client-go's watchlist.unSupportedWatchListSemantics.
func (plainLists) IsWatchListSemanticsUnSupported() bool { return true }

// Run lists and watches until ctx ends; after an error it waits as client-go's informer does
// (0.8 s doubling to 30 s, jittered; an unreachable API server is retried sooner, in
// untilReachable) and counts it.
func (i *Informer) Run(ctx context.Context) {
	defer i.stopped.Store(true)
	defer i.store.stopLists() // a list still under way when it stops is never stored
	backoff := wait.Backoff{Duration: 800 * time.Millisecond, Cap: 30 * time.Second, Steps: 38, Factor: 2, Jitter: 1}
	_ = backoff.DelayWithReset(clock.RealClock{}, 2*time.Minute).Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		if err := i.reflector.ListAndWatchWithContext(ctx); err != nil && ctx.Err() == nil {
			i.metrics.APIErrors(i.name).Inc()
			cache.DefaultWatchErrorHandler(ctx, i.reflector, err)
		}
		return false, nil
	})
}

// GetStore is what the informer holds; writing to it calls no handler.
func (i *Informer) GetStore() cache.Store { return i.store.Indexer }

// GetIndexer is the store with its indexes.
func (i *Informer) GetIndexer() cache.Indexer { return i.store.Indexer }

// LastSyncResourceVersion is the resource version the informer last saw.
func (i *Informer) LastSyncResourceVersion() string { return i.reflector.LastSyncResourceVersion() }

// AddEventHandler adds h to the handlers every change is handed to, after those added before.
func (i *Informer) AddEventHandler(h cache.ResourceEventHandler) {
	for {
		old := i.store.handlers.Load()
		chain := handlerChain{h}
		if old != nil {
			chain = append(slices.Clip(*old), h)
		}
		if i.store.handlers.CompareAndSwap(old, &chain) {
			return
		}
	}
}

// Listed reports whether the first list has been handed over.
func (i *Informer) Listed() bool { return i.store.listed() }

// IsStopped reports whether Run has returned.
func (i *Informer) IsStopped() bool { return i.stopped.Load() }

// Name implements cache.DoneChecker.
func (i *Informer) Name() string { return i.name }

// Done implements cache.DoneChecker: closed once the first list is handed over.
func (i *Informer) Done() <-chan struct{} { return i.store.synced }

// AfterHandlers makes f run after the handlers have had a change (a list's changes: once, after
// the last), on the goroutine that handed it over, so that what they queued can be applied there.
// It is set before Run.
func (i *Informer) AfterHandlers(f func()) { i.store.afterHandlers = f }

// ReflectorStore is the store the reflector writes into: writing to it calls the handlers, as a
// watch event does.
func (i *Informer) ReflectorStore() cache.ReflectorStore { return i.store }

// While the API server cannot be reached, list and watch calls are retried here, every
// reconnectMin doubling up to reconnectMax, each wait drawn at random from its upper half. That is
// at most one attempt a second per resource (three to eight per replica), and a returning API server is
// seen within about a second. Left to itself, client-go's reflector backs off to 30 s (60 s with
// jitter) and serves changes made during an outage that much later.
const (
	reconnectMin = 100 * time.Millisecond
	reconnectMax = time.Second
)

// reconnect is one resource's view of whether the API server is reachable, for logging each loss
// and return once.
type reconnect struct {
	resource string
	metrics  *metrics.ServerBlock
	lost     atomic.Bool
}

// untilReachable calls call until it succeeds, fails for a reason other than an unreachable API
// server (client-go handles those: relist on 410, its own back-off on 429), or ctx ends.
func untilReachable[T any](ctx context.Context, r *reconnect, call func() (T, error)) (T, error) {
	wait := reconnectMin
	for {
		v, err := call()
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			if err == nil && r.lost.Swap(false) {
				log.Infof("API server reachable again (%s)", r.resource)
			}
			return v, err
		}
		r.metrics.APIErrors(r.resource).Inc()
		if !r.lost.Swap(true) {
			log.Warningf("API server unreachable (%s): %v; serving the last known state and retrying", r.resource, err)
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, reconnectMax)
	}
}

// unreachable reports whether err means the API server could not be reached at all.
func unreachable(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsTimeout(err) || utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsNoRoutesError(err)
}
