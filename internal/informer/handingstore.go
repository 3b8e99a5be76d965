package informer

import (
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
)

// handingStore is the store the reflector writes into: it transforms each object, stores it, and
// hands the change to the handlers, as client-go's informer would (an add of a known key is an
// update; a list replaces everything, its missing keys deleted as tombstones). synced closes once
// the first list has been handed over.
type handingStore struct {
	cache.Indexer
	name      string
	transform cache.TransformFunc
	handlers  atomic.Pointer[handlerChain]
	synced    chan struct{}
	syncOnce  sync.Once
	// listEnd ends the collector's harder work of the list under way (relist.go) once it is stored
	// or has failed; none starts once listsStopped (the informer stopped).
	listMu       sync.Mutex
	listEnd      func()
	listsStopped bool
	// afterHandlers runs after the handlers have had a change (a list's changes: once, after the
	// last), so that what they queued is applied from this goroutine (watcher.applyQueued).
	afterHandlers func()
}

func newHandingStore(name string, transform cache.TransformFunc) *handingStore {
	return &handingStore{Indexer: newObjectStore(), name: name,
		transform: transform, synced: make(chan struct{})}
}

// Transformer implements cache.TransformingStore.
func (s *handingStore) Transformer() cache.TransformFunc { return s.transform }

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
	initial := !s.listed() // as client-go's isInInitialList: the first list's adds only
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
			h.OnAdd(r.now, initial)
		}
	}
	s.handlersDone()
	s.syncOnce.Do(func() { close(s.synced) })
	return nil
}

// listed reports whether the first list has been handed over.
func (s *handingStore) listed() bool {
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
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

// listStarted lowers the collector's GC percent for a list (ListStarted) until the store holds it
// (Replace) or it fails (endList); the pages of one list count once.
func (s *handingStore) listStarted() {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	if s.listEnd == nil && !s.listsStopped {
		s.listEnd = ListStarted()
	}
}

// endList ends the list under way, if any.
func (s *handingStore) endList() {
	s.listMu.Lock()
	end := s.listEnd
	s.listEnd = nil
	s.listMu.Unlock()
	if end != nil {
		end()
	}
}

// stopLists ends the list under way, and any the reflector may still start: the informer has
// stopped, and stores none of them.
func (s *handingStore) stopLists() {
	s.listMu.Lock()
	s.listsStopped = true
	s.listMu.Unlock()
	s.endList()
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
