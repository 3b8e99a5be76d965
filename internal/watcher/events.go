package watcher

import (
	"reflect"

	"github.com/kubetree/kubetree/internal/object"

	"k8s.io/client-go/tools/cache"
)

// The informers' event handlers: what each change of an object does to the watcher's indexes and
// queue, and which updates DNS can see.

// attachHandlers gives each resource its handlers.
func (w *Watcher) attachHandlers() {
	for _, r := range w.resources {
		switch r.informer {
		case w.services:
			r.handlers, r.changed = w.serviceEvents(), serviceDiffers
		case w.namespaces:
			r.handlers, r.changed = handlerFuncs(w.enqueueNamespace, func(_, _ any) bool { return false }), func(_, _ any) bool { return false }
		case w.labelled:
			r.handlers, r.changed = w.labelledEvents(), func(_, _ any) bool { return false }
		case w.slices:
			r.handlers, r.changed = w.sliceEvents(), sliceDiffers
		case w.pods:
			r.handlers, r.changed = w.podEvents(), object.PodDiffers
		case w.imports:
			r.handlers, r.changed = handlerFuncs(w.enqueueImport, serviceDiffers), serviceDiffers
		case w.mcSlices:
			r.handlers, r.changed = w.mcSliceEvents(), sliceDiffers
		case w.nodes:
			r.handlers, r.changed = w.nodeEvents(), object.NodeDiffers
		}
	}
}

// podEvents hand pod changes to the applier, which keeps the pod index. Pods do not go through
// the queue: no record depends on them, and the index takes a change in one short lock.
func (w *Watcher) podEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.applier.ApplyPod(nil, storedAs[object.StoredPod](obj)) },
		UpdateFunc: func(old, new any) {
			w.applier.ApplyPod(storedAs[object.StoredPod](old), storedAs[object.StoredPod](new))
		},
		DeleteFunc: func(obj any) { w.applier.ApplyPod(storedAs[object.StoredPod](obj), nil) },
	}
}

// nodeEvents hand node changes to the applier, which keeps each node's zone; a delete goes by key,
// as a tombstone's object may be stale.
func (w *Watcher) nodeEvents() cache.ResourceEventHandlerFuncs {
	apply := func(obj any) {
		if n := storedAs[object.StoredNode](obj); n != nil {
			w.applier.ApplyNode(n.Name, n)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: apply,
		UpdateFunc: func(old, new any) {
			if object.NodeDiffers(old, new) {
				apply(new)
			}
		},
		DeleteFunc: func(obj any) {
			if key := object.KeyOf(obj); key != "" {
				w.applier.ApplyNode(key, nil)
			}
		},
	}
}

// labelledEvents tell the applier which namespaces isolate_labels selects: the watch's selector
// does the selecting, so a namespace whose labels stop matching arrives as a delete.
func (w *Watcher) labelledEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.applier.ApplyLabelledNamespace(object.KeyOf(obj), true) },
		DeleteFunc: func(obj any) { w.applier.ApplyLabelledNamespace(object.KeyOf(obj), false) },
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

// serviceEvents queue the services that changed, and note when a service created after the
// first sync was created: the trigger time of its DNS programming latency.
func (w *Watcher) serviceEvents() cache.ResourceEventHandlerFuncs {
	h := handlerFuncs(w.enqueueService, serviceDiffers)
	h.AddFunc = func(obj any) {
		if s, ok := obj.(*object.StoredService); ok && s.Model != nil && s.Model.Created != 0 {
			w.trigger(s.Key(), s.Model.Created, false)
		}
		w.enqueueService(obj)
	}
	return h
}

// trigger is when a change of a service that is not answered yet was made (Unix ns): a slice's
// last-change-trigger-time, or the service's creation; bySlice says a slice's trigger time is among
// those it is the earliest of, which is what the in-tree plugin observes.
type trigger struct {
	at      int64
	bySlice bool
}

// trigger notes that a change of the service under key happened at (Unix ns), unless an earlier
// change of it is not answered yet. Changes during the first sync are the cluster's history, not
// programming latency.
func (w *Watcher) trigger(key string, at int64, bySlice bool) {
	if !w.opts.Synced.Load() {
		return
	}
	w.triggeredMu.Lock()
	t, ok := w.triggered[key]
	if !ok || at < t.at {
		t.at = at
	}
	t.bySlice = t.bySlice || bySlice
	w.triggered[key] = t
	w.triggeredMu.Unlock()
}

func (w *Watcher) enqueueService(obj any) {
	if key := object.KeyOf(obj); key != "" {
		w.queue.Add(key)
	}
}

func (w *Watcher) enqueueImport(obj any) {
	if key := object.KeyOf(obj); key != "" {
		w.queue.Add(importPrefix + key)
	}
}

// mcSliceEvents keeps the ServiceImports' slice index and queues the imports whose slices changed.
func (w *Watcher) mcSliceEvents() cache.ResourceEventHandlerFuncs {
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

func (w *Watcher) enqueueNamespace(obj any) {
	if key := object.KeyOf(obj); key != "" {
		w.queue.Add(nsPrefix + key)
	}
}

// sliceEvents keeps the slice index and queues the services whose slices changed: on an update,
// both the old and the new owner, as a slice may move between services.
func (w *Watcher) sliceEvents() cache.ResourceEventHandlerFuncs {
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

func (w *Watcher) onSlice(old, new *object.StoredSlice) {
	if key := new.ServiceKey(); key != "" && new.Triggered != 0 {
		w.trigger(key, new.Triggered, true)
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

// serviceDiffers reports whether an update changes anything DNS shows, or what it reports.
func serviceDiffers(old, new any) bool {
	a, ok1 := old.(*object.StoredService)
	b, ok2 := new.(*object.StoredService)
	if !ok1 || !ok2 {
		return true
	}
	return !reflect.DeepEqual(a.Model, b.Model) || !sameProblems(a.Problems(), b.Problems())
}

// sliceDiffers reports whether an update changes anything DNS shows, or what it reports. The
// stored slices hold only what DNS uses, so annotations, other labels, and the conditions and
// topology fields that no option asks for cannot cause a rebuild; an endpoint's zone (with zonal or
// topology), its node and hints (with topology) and its serving state (with serving_terminating)
// are kept when asked for, and then their changes do.
func sliceDiffers(old, new any) bool {
	a, ok1 := old.(*object.StoredSlice)
	b, ok2 := new.(*object.StoredSlice)
	if !ok1 || !ok2 {
		return true
	}
	return a.Service != b.Service || !a.Model.Equal(b.Model) || !sameProblems(a.Problems(), b.Problems())
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
