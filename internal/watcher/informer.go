package watcher

import (
	"github.com/kubetree/kubetree/internal/metrics"

	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

type watchIface = watch.Interface

// informer keeps one resource's store current from the API server, as client-go's shared
// informer does, but hands each event to its handlers from the goroutine that reads the watch:
// the reflector writes into the store, and the store calls the handlers. client-go's informer
// passes every event on through a queue, a processor and a listener, each a goroutine of its own;
// at the rate an API server sends events, each one travels alone, and those wake-ups cost more
// CPU than decoding and applying the event. The reflector, and with it every guarantee of the
// list and watch (relist on 410 Gone, streamed lists, bookmarks, resource versions), is
// client-go's own.
type informer struct {
	name      string
	metrics   *metrics.ServerBlock
	reflector *cache.Reflector
	store     *handingStore
	stopped   atomic.Bool
}

// newInformer builds an informer that lists and watches with the label selector, keeps only the
// transformed (slim) objects by namespace, and counts API errors.
func newInformer(client any, m *metrics.ServerBlock, resource string, example runtime.Object, transform cache.TransformFunc, labels string,
	list func(context.Context, meta.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, meta.ListOptions) (watch.Interface, error)) *informer {
	r := &reconnect{resource: resource, metrics: m}
	store := newHandingStore(resource, transform)
	// The client says whether it can stream the initial list (client-go's fake cannot).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labels
			return untilReachable(ctx, r, func() (runtime.Object, error) { return list(ctx, o) })
		},
		WatchFuncWithContext: func(ctx context.Context, o meta.ListOptions) (watch.Interface, error) {
			o.LabelSelector = labels
			w, err := untilReachable(ctx, r, func() (watch.Interface, error) { return watchFn(ctx, o) })
			if sw, ok := w.(*streamWatch); ok && err == nil {
				sw.start(store) // it applies its events to the store itself
				return sw, nil
			}
			if err == nil && o.SendInitialEvents != nil && *o.SendInitialEvents {
				w = watchingList(w, store) // the (re)list itself, streamed
			}
			return w, err
		},
	}, client)
	return &informer{name: resource, metrics: m, store: store,
		reflector: cache.NewReflectorWithOptions(lw, example, store, cache.ReflectorOptions{Name: resource})}
}

// run lists and watches until ctx ends; after an error it waits as client-go's informer does
// (0.8 s doubling to 30 s, jittered; an unreachable API server is retried sooner, in
// untilReachable) and counts it.
func (i *informer) run(ctx context.Context) {
	defer i.stopped.Store(true)
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
func (i *informer) GetStore() cache.Store { return i.store.Indexer }

// GetIndexer is the store with its indexes.
func (i *informer) GetIndexer() cache.Indexer { return i.store.Indexer }

// LastSyncResourceVersion is the resource version the informer last saw.
func (i *informer) LastSyncResourceVersion() string { return i.reflector.LastSyncResourceVersion() }

// AddEventHandler adds h to the handlers every change is handed to, after those added before.
func (i *informer) AddEventHandler(h cache.ResourceEventHandler) {
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

// handlerChain hands each change to every handler in turn.
type handlerChain []cache.ResourceEventHandler

func (c handlerChain) OnAdd(obj any, initial bool) {
	for _, h := range c {
		h.OnAdd(obj, initial)
	}
}

func (c handlerChain) OnUpdate(old, new any) {
	for _, h := range c {
		h.OnUpdate(old, new)
	}
}

func (c handlerChain) OnDelete(obj any) {
	for _, h := range c {
		h.OnDelete(obj)
	}
}

// Listed reports whether the first list has been handed over.
func (i *informer) Listed() bool {
	select {
	case <-i.store.synced:
		return true
	default:
		return false
	}
}

// IsStopped reports whether run has returned.
func (i *informer) IsStopped() bool { return i.stopped.Load() }

// handingStore is the store the reflector writes into: it transforms each object, stores it, and
// hands the change to the handlers, as client-go's informer would (an add of a known key is an
// update; a list replaces everything, its missing keys deleted as tombstones). It is done syncing
// (cache.DoneChecker) once the first list has been handed over.
type handingStore struct {
	cache.Indexer
	name      string
	transform cache.TransformFunc
	handlers  atomic.Pointer[handlerChain]
	synced    chan struct{}
	syncOnce  sync.Once
	// listEnded ends the collector's harder work of a streamed list once it is stored (relist.go).
	listEnded atomic.Pointer[func()]
	// afterHandlers runs after the handlers have had a change (a list's changes: once, after the
	// last), so that what they queued is applied from this goroutine (watcher.applyQueued).
	afterHandlers func()
}

func newHandingStore(name string, transform cache.TransformFunc) *handingStore {
	return &handingStore{Indexer: newObjectStore(), name: name,
		transform: transform, synced: make(chan struct{})}
}

// Transformer implements cache.TransformingStore: the reflector slims a streamed list's objects
// as they arrive.
func (s *handingStore) Transformer() cache.TransformFunc { return s.transform }

// Name implements cache.DoneChecker.
func (s *handingStore) Name() string { return s.name }

// Done implements cache.DoneChecker: closed once the first list is handed over.
func (s *handingStore) Done() <-chan struct{} { return s.synced }

// Add implements cache.ReflectorStore.
func (s *handingStore) Add(obj any) error { return s.put(obj) }

// Update implements cache.ReflectorStore.
func (s *handingStore) Update(obj any) error { return s.put(obj) }

func (s *handingStore) put(obj any) error {
	obj, err := s.transform(obj)
	if err != nil {
		return err
	}
	old, exists, err := s.Indexer.Get(obj)
	if err != nil {
		return err
	}
	if err := s.Indexer.Update(obj); err != nil {
		return err
	}
	if exists {
		s.handed().OnUpdate(old, obj)
	} else {
		s.handed().OnAdd(obj, false)
	}
	s.handlersDone()
	return nil
}

// Delete implements cache.ReflectorStore.
func (s *handingStore) Delete(obj any) error {
	obj, err := s.transform(obj)
	if err != nil {
		return err
	}
	if err := s.Indexer.Delete(obj); err != nil {
		return err
	}
	s.handed().OnDelete(obj)
	s.handlersDone()
	return nil
}

// Replace implements cache.ReflectorStore: the store holds the list, then the handlers are given
// the keys it lacks (as tombstones of what was stored), then its objects, as adds or updates.
func (s *handingStore) Replace(list []any, resourceVersion string) error {
	defer s.endList()
	keep := make(map[string]struct{}, len(list))
	type replacement struct{ old, now any }
	replaced := make([]replacement, 0, len(list))
	for i, obj := range list {
		obj, err := s.transform(obj)
		if err != nil {
			return err
		}
		list[i] = obj
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		keep[key] = struct{}{}
		old, _, _ := s.Indexer.GetByKey(key)
		replaced = append(replaced, replacement{old, obj})
	}
	var gone []cache.DeletedFinalStateUnknown
	for _, key := range s.Indexer.ListKeys() {
		if _, ok := keep[key]; !ok {
			if old, exists, _ := s.Indexer.GetByKey(key); exists {
				gone = append(gone, cache.DeletedFinalStateUnknown{Key: key, Obj: old})
			}
		}
	}
	if err := s.Indexer.Replace(list, resourceVersion); err != nil {
		return err
	}
	h := s.handed()
	for _, t := range gone {
		h.OnDelete(t)
	}
	for _, r := range replaced {
		if r.old != nil {
			h.OnUpdate(r.old, r.now)
		} else {
			h.OnAdd(r.now, true)
		}
	}
	s.handlersDone()
	s.syncOnce.Do(func() { close(s.synced) })
	return nil
}

// handed is the chain of handlers now; none before the first is added.
func (s *handingStore) handed() handlerChain {
	if c := s.handlers.Load(); c != nil {
		return *c
	}
	return nil
}

func (s *handingStore) handlersDone() {
	if s.afterHandlers != nil {
		s.afterHandlers()
	}
}

// Resync implements cache.ReflectorStore; there is no resync period.
func (s *handingStore) Resync() error { return nil }

func (s *handingStore) endList() {
	if end := s.listEnded.Swap(nil); end != nil {
		(*end)()
	}
}

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
