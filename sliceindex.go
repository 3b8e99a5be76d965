package kubetree

import (
	"slices"
	"sync"
)

// sliceIndex finds a service's slices. client-go's indexer would keep a set per service, several
// hundred bytes each at 100k services; this keeps a short list, replaced whole on every change so
// that a list the worker holds never changes under it.
type sliceIndex struct {
	mu    sync.Mutex
	bySvc map[string][]*storedSlice
}

func (x *sliceIndex) replace(old, new *storedSlice) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if key := serviceOf(old); key != "" {
		list := slices.DeleteFunc(slices.Clone(x.bySvc[key]), func(s *storedSlice) bool { return s.Name == old.Name })
		if len(list) == 0 {
			delete(x.bySvc, key)
		} else {
			x.bySvc[key] = slices.Clip(list)
		}
	}
	if key := serviceOf(new); key != "" {
		list := slices.DeleteFunc(slices.Clone(x.bySvc[key]), func(s *storedSlice) bool { return s.Name == new.Name })
		x.bySvc[key] = slices.Clip(append(list, new))
	}
}

func (x *sliceIndex) of(key string) []*storedSlice {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.bySvc[key]
}
