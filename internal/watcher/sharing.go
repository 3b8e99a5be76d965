package watcher

import (
	"reflect"
	"sync"

	"github.com/kubetree/kubetree/internal/object"

	"k8s.io/client-go/tools/cache"
)

// A relist brings every object again while the old ones are still stored, and the tree's records
// share the stored slices' models, which hold every endpoint of the cluster. An object whose model
// is the same as the stored version's takes the stored model instead of its own copy: otherwise a
// relist would leave two copies of the cluster behind for good, the new one in the informer's
// store and the old one in the records of every service it did not change (those are not rebuilt).
// The names are shared too; what arrived is garbage at once.
//
// A new object takes the name of its namespace from the objects before it (namespaceNames): every
// object decoded carries its own copy, and a namespace holds thousands of services and slices.
func sharingStored(transform cache.TransformFunc, stored func() cache.Store) cache.TransformFunc {
	namespaces := &namespaceNames{}
	return func(obj any) (any, error) {
		out, err := transform(obj)
		if err != nil {
			return out, err
		}
		switch n := out.(type) {
		case *object.StoredSlice:
			if o, ok := storedVersion[*object.StoredSlice](stored(), n); ok {
				n.Meta.Name, n.Namespace = o.Name, o.Namespace
				if n.Model != nil && n.Model.Equal(o.Model) {
					n.Model = o.Model
				}
				if n.Service == o.Service {
					n.Service = o.Service
				}
			} else {
				n.Namespace = namespaces.share(n.Namespace)
			}
		case *object.StoredService:
			fresh := n.Model != nil
			if o, ok := storedVersion[*object.StoredService](stored(), n); ok {
				n.Meta.Name, n.Namespace = o.Name, o.Namespace
				if fresh && reflect.DeepEqual(o.Model, n.Model) {
					n.Model, fresh = o.Model, false
				}
			} else {
				n.Namespace = namespaces.share(n.Namespace)
			}
			if fresh {
				// The transform's own model, not shared yet: its names are the object's.
				n.Model.Name, n.Model.Namespace = n.Name, n.Namespace
			}
		}
		return out, nil
	}
}

// namespaceNames holds one copy of the name of each namespace an informer's objects were in. It
// forgets them all once it holds maxNamespaceNames (namespaces come and go; it must not grow for
// good), and starts again from the objects that arrive. (Go's unique package would not do: it forgets
// a canonical string once no Handle to it is left, and the objects keep strings, not Handles.)
type namespaceNames struct {
	mu    sync.Mutex
	names map[string]string
}

const maxNamespaceNames = 10000

// share returns the copy of ns held, after holding ns itself if there was none.
func (n *namespaceNames) share(ns string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if held, ok := n.names[ns]; ok {
		return held
	}
	if n.names == nil || len(n.names) >= maxNamespaceNames {
		n.names = map[string]string{}
	}
	n.names[ns] = ns
	return ns
}

// storedVersion is what store holds under obj's key, if it is a T other than obj itself.
func storedVersion[T comparable](store cache.Store, obj T) (T, bool) {
	var zero T
	old, exists, err := store.GetByKey(object.KeyOf(obj))
	if err != nil || !exists {
		return zero, false
	}
	o, ok := old.(T)
	return o, ok && o != obj
}
