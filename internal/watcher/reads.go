package watcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubetree/kubetree/internal/object"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// What the operations' tools (explain, dump) read of the watcher's stores, and the one question
// they ask the API server: reads only, so that they reach none of the watcher's fields.

// StoredService is the Service (or, multicluster, the ServiceImport) stored under key, nil for
// none; its slices sorted by name (the index keeps no order, and an explanation reads the same
// each time); and its kind, "Service" or "ServiceImport".
func (w *Watcher) StoredService(key string, multicluster bool) (*object.StoredService, []*object.StoredSlice, string) {
	if multicluster {
		if w.imports == nil {
			return nil, nil, ""
		}
		return serviceAt(w.imports, key), byName(w.mcIndex.Of(key)), "ServiceImport"
	}
	var sls []*object.StoredSlice
	if w.slices != nil {
		sls = byName(w.sliceIndex.Of(key))
	}
	return serviceAt(w.services, key), sls, "Service"
}

// byName is a copy of sls sorted by name.
func byName(sls []*object.StoredSlice) []*object.StoredSlice {
	return slices.SortedFunc(slices.Values(sls), func(a, b *object.StoredSlice) int { return strings.Compare(a.Name, b.Name) })
}

// NamespaceStored reports whether namespace ns is stored: it exists, and namespace_labels (if
// given) selects it.
func (w *Watcher) NamespaceStored(ns string) bool {
	_, exists, _ := w.namespaces.GetStore().GetByKey(ns)
	return exists
}

// unselectedTimeout bounds the one list Unselected asks of the API server.
const unselectedTimeout = 5 * time.Second

// Unselected asks the API server for one object of resource ("services", "namespaces") that the
// watch's selector may have left out, by name and without the selector: whether it exists, and its
// labels. It lists, as the audit does, so that the ClusterRole's list and watch are enough.
func (w *Watcher) Unselected(resource, ns, name string) (bool, labels.Set, error) {
	for _, r := range w.resources {
		if r.name != resource {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), unselectedTimeout)
		defer cancel()
		list, err := r.unfiltered(ctx, ns, meta.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return false, nil, err
		}
		objs, err := apimeta.ExtractList(list)
		if err != nil {
			return false, nil, err
		}
		for _, obj := range objs {
			// The field selector is the API server's to apply; a server that ignores it still
			// answers right.
			if o, err := apimeta.Accessor(obj); err == nil && o.GetName() == name && o.GetNamespace() == ns {
				return true, labels.Set(o.GetLabels()), nil
			}
		}
		return false, nil, nil
	}
	return false, nil, fmt.Errorf("%s are not watched", resource)
}

// Versions are the resource versions each informer last listed or watched to, by resource: two
// replicas that differ are at different points of the cluster's history.
func (w *Watcher) Versions() map[string]string {
	out := make(map[string]string, len(w.resources))
	for _, r := range w.resources {
		out[r.name] = r.informer.LastSyncResourceVersion()
	}
	return out
}

// Pending is the number of keys queued and not yet applied: 0 once what the informers hold is
// what the applier was handed.
func (w *Watcher) Pending() int { return w.queue.Len() }
