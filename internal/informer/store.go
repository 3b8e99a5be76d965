package informer

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// objectStore is what an informer holds: its objects by namespace and name. client-go's indexer
// keeps a "namespace/name" key string an object beside the object's own name, and its namespace
// index a set entry an object: at 100,000 services and their slices, 8 MB that this store does
// not hold. A key is cut in two to find an object (no allocation); the keys it hands out are made
// when asked for, which only a list, a namespace change or the audit does.
type objectStore struct {
	mu sync.RWMutex
	// byNamespace holds the objects by namespace ("" for cluster-scoped objects), then by name;
	// the names are the objects' own strings.
	byNamespace map[string]map[string]any
	count       int
	rv          string // the resource version of the last list or bookmark
}

var _ cache.Indexer = (*objectStore)(nil)

func newObjectStore() *objectStore { return &objectStore{byNamespace: map[string]map[string]any{}} }

// named is a slim object, which names itself without an allocation (object.Meta).
type named interface {
	StoreName() (namespace, name string)
}

// nameOf returns an object's namespace and name; err when it has neither.
func nameOf(obj any) (namespace, name string, err error) {
	if n, ok := obj.(named); ok {
		namespace, name = n.StoreName()
		return namespace, name, nil
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return "", "", err
	}
	namespace, name = splitKey(key)
	return namespace, name, nil
}

// splitKey cuts a store key into namespace and name.
func splitKey(key string) (namespace, name string) {
	if ns, n, ok := strings.Cut(key, "/"); ok {
		return ns, n
	}
	return "", key
}

func joinKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Add implements cache.Store.
func (s *objectStore) Add(obj any) error { return s.Update(obj) }

// Update implements cache.Store.
func (s *objectStore) Update(obj any) error {
	ns, name, err := nameOf(obj)
	if err != nil {
		return cache.KeyError{Obj: obj, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.byNamespace[ns]
	if names == nil {
		names = map[string]any{}
		s.byNamespace[ns] = names
	}
	if _, ok := names[name]; !ok {
		s.count++
	}
	names[name] = obj
	return nil
}

// Delete implements cache.Store.
func (s *objectStore) Delete(obj any) error {
	ns, name, err := nameOf(obj)
	if err != nil {
		return cache.KeyError{Obj: obj, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.byNamespace[ns]
	if _, ok := names[name]; !ok {
		return nil
	}
	s.count--
	if delete(names, name); len(names) == 0 {
		delete(s.byNamespace, ns) // a namespace's map keeps the room it grew to: let it go with it
	}
	return nil
}

// List implements cache.Store.
func (s *objectStore) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, s.count)
	for _, names := range s.byNamespace {
		for _, obj := range names {
			out = append(out, obj)
		}
	}
	return out
}

// ListKeys implements cache.Store.
func (s *objectStore) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, s.count)
	for ns, names := range s.byNamespace {
		for name := range names {
			out = append(out, joinKey(ns, name))
		}
	}
	return out
}

// Get implements cache.Store.
func (s *objectStore) Get(obj any) (any, bool, error) {
	ns, name, err := nameOf(obj)
	if err != nil {
		return nil, false, cache.KeyError{Obj: obj, Err: err}
	}
	return s.get(ns, name)
}

// GetByKey implements cache.Store.
func (s *objectStore) GetByKey(key string) (any, bool, error) { return s.get(splitKey(key)) }

func (s *objectStore) get(ns, name string) (any, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj, ok := s.byNamespace[ns][name]
	return obj, ok, nil
}

// Replace implements cache.Store: the store holds list, and nothing else.
func (s *objectStore) Replace(list []any, resourceVersion string) error {
	// Each namespace's map made at its size, as client-go's map of every object is.
	sizes := map[string]int{}
	for _, obj := range list {
		ns, _, err := nameOf(obj)
		if err != nil {
			return cache.KeyError{Obj: obj, Err: err}
		}
		sizes[ns]++
	}
	byNamespace := make(map[string]map[string]any, len(sizes))
	count := 0
	for _, obj := range list {
		ns, name, _ := nameOf(obj)
		names := byNamespace[ns]
		if names == nil {
			names = make(map[string]any, sizes[ns])
			byNamespace[ns] = names
		}
		if _, ok := names[name]; !ok {
			count++
		}
		names[name] = obj
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byNamespace, s.count, s.rv = byNamespace, count, resourceVersion
	return nil
}

// Resync implements cache.Store; there is nothing to resync.
func (s *objectStore) Resync() error { return nil }

// LastStoreSyncResourceVersion implements cache.Store.
func (s *objectStore) LastStoreSyncResourceVersion() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

// Bookmark implements cache.Store.
func (s *objectStore) Bookmark(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = rv
}

// The namespace index (cache.NamespaceIndex) is the store's own layout; it has no other.

func (s *objectStore) checkIndex(indexName string) error {
	if indexName != cache.NamespaceIndex {
		return fmt.Errorf("index %q does not exist", indexName)
	}
	return nil
}

// Index implements cache.Indexer: the objects in obj's namespace.
func (s *objectStore) Index(indexName string, obj any) ([]any, error) {
	ns, _, err := nameOf(obj)
	if err != nil {
		return nil, err
	}
	return s.ByIndex(indexName, ns)
}

// IndexKeys implements cache.Indexer: the keys of the objects in namespace ns.
func (s *objectStore) IndexKeys(indexName, ns string) ([]string, error) {
	if err := s.checkIndex(indexName); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := s.byNamespace[ns]
	out := make([]string, 0, len(names))
	for name := range names {
		out = append(out, joinKey(ns, name))
	}
	return out, nil
}

// ListIndexFuncValues implements cache.Indexer: the namespaces that hold objects.
func (s *objectStore) ListIndexFuncValues(indexName string) []string {
	if s.checkIndex(indexName) != nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.byNamespace))
	for ns := range s.byNamespace {
		out = append(out, ns)
	}
	return out
}

// ByIndex implements cache.Indexer: the objects in namespace ns.
func (s *objectStore) ByIndex(indexName, ns string) ([]any, error) {
	if err := s.checkIndex(indexName); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := s.byNamespace[ns]
	out := make([]any, 0, len(names))
	for _, obj := range names {
		out = append(out, obj)
	}
	return out, nil
}

// GetIndexers implements cache.Indexer.
func (s *objectStore) GetIndexers() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}

// AddIndexers implements cache.Indexer: the namespace index is the only one there is.
func (s *objectStore) AddIndexers(indexers cache.Indexers) error {
	for name := range indexers {
		if err := s.checkIndex(name); err != nil {
			return err
		}
	}
	return nil
}
