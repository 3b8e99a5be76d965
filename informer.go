package kubetree

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

type watchIface = watch.Interface

// newInformer builds an informer that lists and watches with the label selector, keeps only the
// transformed (slim) objects, keeps the indexes given, and counts API errors.
func newInformer(client any, m *serverMetrics, resource string, example runtime.Object, transform cache.TransformFunc, labels string, indexers cache.Indexers,
	list func(context.Context, meta.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, meta.ListOptions) (watch.Interface, error)) cache.SharedIndexInformer {
	r := &reconnect{resource: resource, metrics: m}
	// The client says whether it can stream the initial list (client-go's fake cannot).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labels
			return untilReachable(ctx, r, func() (runtime.Object, error) { return list(ctx, o) })
		},
		WatchFuncWithContext: func(ctx context.Context, o meta.ListOptions) (watch.Interface, error) {
			o.LabelSelector = labels
			w, err := untilReachable(ctx, r, func() (watch.Interface, error) { return watchFn(ctx, o) })
			if err == nil && o.SendInitialEvents != nil && *o.SendInitialEvents {
				w = watchingList(w) // the (re)list itself, streamed
			}
			return w, err
		},
	}, client)
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{Indexers: indexers})
	_ = inf.SetTransform(transform)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		m.apiError(resource)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	return inf
}

// While the API server cannot be reached, list and watch calls are retried here, every
// reconnectMin doubling up to reconnectMax, each wait drawn at random from its upper half. That is
// at most one attempt a second per resource (three per replica), and a returning API server is
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
	metrics  *serverMetrics
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
		r.metrics.apiError(r.resource)
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
