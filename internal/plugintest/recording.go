package plugintest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/object"
)

// RecordingApplier is the applier with a record of every key the watcher handed it ("ns/name" for
// a service, "namespace:name", "import:ns/name"), which swallows the barrier's objects: a barrier
// changes nothing in the tree, not even the SOA serial.
type RecordingApplier struct {
	*applier.Applier
	mu   sync.Mutex
	keys []string
}

// ApplyService implements watcher.Applier.
func (r *RecordingApplier) ApplyService(key string, svc *object.StoredService, sls []*object.StoredSlice, exposed bool) {
	if r.record(key) {
		r.Applier.ApplyService(key, svc, sls, exposed)
	}
}

// ApplyImport implements watcher.Applier.
func (r *RecordingApplier) ApplyImport(key string, si *object.StoredService, sls []*object.StoredSlice, exposed bool) {
	if r.record("import:" + key) {
		r.Applier.ApplyImport(key, si, sls, exposed)
	}
}

// ApplyNamespace implements watcher.Applier.
func (r *RecordingApplier) ApplyNamespace(ns string, exists bool) {
	if r.record("namespace:" + ns) {
		r.Applier.ApplyNamespace(ns, exists)
	}
}

// record notes key, and reports whether it is no barrier's.
func (r *RecordingApplier) record(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	return !strings.HasPrefix(key, BarrierNS+"/") && !strings.HasPrefix(key, "namespace:"+BarrierNS)
}

// Mark returns a position in the record of keys.
func (r *RecordingApplier) Mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys)
}

// Since returns how often key was handed over after mark.
func (r *RecordingApplier) Since(mark int, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.keys[mark:] {
		if k == key {
			n++
		}
	}
	return n
}

// Await waits until each of keys has been handed over since mark.
func (r *RecordingApplier) Await(t testing.TB, mark int, keys ...string) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("barrier %v", keys), func() bool {
		for _, k := range keys {
			if r.Since(mark, k) == 0 {
				return false
			}
		}
		return true
	})
}
