package watcher

import (
	"slices"
	"sync"

	"github.com/kubetree/kubetree/internal/object"
)

// SliceIndex finds a service's slices. client-go's indexer would keep a set per service, several
// hundred bytes each at 100k services; this keeps a short list, replaced whole on every change so
// that a list the worker holds never changes under it.
// It is the watcher's view of the slice informer's store, not something DNS reads: the slice
// handlers keep it, and the worker reads it (the root's fuzzer hands its slices to the applier
// through it, as the watcher does).
type SliceIndex struct {
	mu    sync.Mutex
	bySvc map[string][]*object.StoredSlice
}

// NewSliceIndex returns an empty index.
func NewSliceIndex() *SliceIndex { return &SliceIndex{bySvc: map[string][]*object.StoredSlice{}} }

// Replace swaps a slice's versions: old (nil for a new slice) for new (nil for a deleted one).
func (x *SliceIndex) Replace(old, new *object.StoredSlice) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if key := old.ServiceKey(); key != "" {
		list := slices.DeleteFunc(slices.Clone(x.bySvc[key]), func(s *object.StoredSlice) bool { return s.Name == old.Name })
		if len(list) == 0 {
			delete(x.bySvc, key)
		} else {
			x.bySvc[key] = slices.Clip(list)
		}
	}
	if key := new.ServiceKey(); key != "" {
		list := slices.DeleteFunc(slices.Clone(x.bySvc[key]), func(s *object.StoredSlice) bool { return s.Name == new.Name })
		x.bySvc[key] = slices.Clip(append(list, new))
	}
}

// Of returns the slices of the service with store key key; the caller must not change the list.
func (x *SliceIndex) Of(key string) []*object.StoredSlice {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.bySvc[key]
}
