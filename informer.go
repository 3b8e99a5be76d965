package kubetree

import (
	"context"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

type watchIface = watch.Interface

// newInformer builds an informer that lists and watches with the label selector, keeps only the
// transformed (slim) objects, indexes them by namespace, and counts API errors.
func newInformer(client any, resource string, example runtime.Object, transform cache.TransformFunc, labels string,
	list func(context.Context, meta.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, meta.ListOptions) (watch.Interface, error)) cache.SharedIndexInformer {
	// The client says whether it can stream the initial list (client-go's fake cannot).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labels
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o meta.ListOptions) (watch.Interface, error) {
			o.LabelSelector = labels
			return watchFn(ctx, o)
		},
	}, client)
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	_ = inf.SetTransform(transform)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		metrics.apiErrors.WithLabelValues(resource).Inc()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	return inf
}
