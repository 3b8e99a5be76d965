package kubetree

import (
	"runtime/debug"
	"testing"
	"time"
	"unsafe"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func TestStreamedListCollectsHarderUntilItIsStored(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	store := newHandingStore("services", func(obj any) (any, error) { return obj, nil })
	var added []string
	chain := handlerChain{cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { added = append(added, obj.(*api.Service).Name) }}}
	store.handlers.Store(&chain)
	inner := watch.NewFake()
	w := watchingList(inner, store)
	if got := debug.SetGCPercent(relistGCPercent); got != relistGCPercent {
		t.Errorf("while the list streams in, GC percent is %d, want %d", got, relistGCPercent)
	}
	go inner.Add(&api.Service{ObjectMeta: meta.ObjectMeta{Name: "a"}})
	if ev := <-w.ResultChan(); ev.Type != watch.Added {
		t.Fatalf("event %s, want %s: events pass through", ev.Type, watch.Added)
	}
	if got := debug.SetGCPercent(relistGCPercent); got != relistGCPercent {
		t.Errorf("before the list is stored, GC percent is %d, want %d", got, relistGCPercent)
	}
	if err := store.Replace([]any{&api.Service{ObjectMeta: meta.ObjectMeta{Name: "a"}}}, "1"); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("once the list is stored, GC percent is %d, want the 100 it was", got)
	}
	if len(added) != 1 || added[0] != "a" {
		t.Errorf("the list's objects were handed over as %v, want [a]", added)
	}
	select {
	case <-store.Done():
	default:
		t.Error("the store is not done syncing after its first list")
	}
	w.Stop()
	if _, open := <-w.ResultChan(); open {
		t.Error("the result channel stays open after Stop")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Stop, GC percent is %d, want 100", got)
	}
}

func TestStreamedListStoppedEndsItsCollection(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	w := watchingList(watch.NewFake(), newHandingStore("services", nil))
	w.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("a list whose watch stopped before it was stored leaves GC percent at %d, want 100", got)
	}
}

func TestStreamedListLeavesGOGCOffAlone(t *testing.T) {
	before := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(before)
	w := watchingList(watch.NewFake(), newHandingStore("services", nil))
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("with GOGC=off, GC percent became %d during a list", got)
	}
	w.Stop()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("with GOGC=off, GC percent is %d after a list", got)
	}
}

// TestRelistSharesUnchangedModels: after a relist, a slice or service that did not change keeps
// the model the tree's records hold, so the cluster is not in memory twice; a changed one gets its
// new model, and answers follow it.
func TestRelistSharesUnchangedModels(t *testing.T) {
	const services, endpointsPer = 200, 4
	l := loadSynthetic(t, services, endpointsPer)
	defer l.stop()
	const updates = 21 // slices 0-20 move on (20 is the first ClusterIP service's); the relist lists version 0 again
	l.update(updates)
	converges(t, l.k, services, endpointsPer, func(i int) int { return lastVersion(i, services, updates) })
	sliceModels := map[string]*object.EndpointSlice{}
	for _, obj := range l.w.slices.GetStore().List() {
		s := obj.(*object.StoredSlice)
		sliceModels[object.KeyOf(s)] = s.Model
	}
	serviceModels := map[string]*object.Service{}
	for _, obj := range l.w.services.GetStore().List() {
		s := obj.(*object.StoredService)
		serviceModels[object.KeyOf(s)] = s.Model
	}

	l.relist()
	converges(t, l.k, services, endpointsPer, func(int) int { return 0 })
	changed := map[string]bool{}
	for i := range updates {
		changed[object.KeyOf(syntheticSlice(i, endpointsPer, 0))] = true
	}
	for _, obj := range l.w.slices.GetStore().List() {
		s := obj.(*object.StoredSlice)
		if same := s.Model == sliceModels[object.KeyOf(s)]; same == changed[object.KeyOf(s)] {
			t.Errorf("slice %s: model shared with the stored version: %v", object.KeyOf(s), same)
		}
	}
	for _, obj := range l.w.services.GetStore().List() {
		s := obj.(*object.StoredService)
		if s.Model != serviceModels[object.KeyOf(s)] {
			t.Errorf("service %s: an unchanged model was not shared", object.KeyOf(s))
		}
	}
}

// TestFirstTreeBuiltUnderRelistGCPercent: the collector runs at the relist GC percent from the
// start until the first tree is built (the lists end before it is), and the setting is put back
// then, or when the watcher stops unsynced.
func TestFirstTreeBuiltUnderRelistGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	gcPercent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	for _, sync := range []bool{true, false} {
		k, a := wired(t, testZones)
		k.cfg.startupTimeout = 0 // start returns at once: the list is held
		fa := newFakeAPI(k8stest.Namespace("prod"), k8stest.ClusterIPService("prod", "web", []string{"10.0.0.110"}))
		release := make(chan struct{})
		fa.client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
			<-release
			return false, nil, nil
		})
		w := watcherFor(t, k, a, fa.client, fa.versions.client(), nil)
		if err := w.start(); err != nil {
			t.Fatal(err)
		}
		if got := gcPercent(); got != relistGCPercent {
			t.Errorf("before the first sync, GC percent is %d, want %d", got, relistGCPercent)
		}
		if sync {
			close(release)
			waitFor(t, "sync", k.Ready)
			if got := gcPercent(); got != 100 {
				t.Errorf("after the first sync, GC percent is %d, want 100", got)
			}
			_ = w.stop()
		} else {
			go func() { time.Sleep(10 * time.Millisecond); close(release) }() // the held list ignores the stop
			_ = w.stop()
			if got := gcPercent(); got != 100 {
				t.Errorf("after a stop before the first sync, GC percent is %d, want 100", got)
			}
		}
	}
}

// TestNamespaceNamesShared: the services and slices of a namespace (and the services' models) hold
// one copy of its name between them, though each object arrived with its own.
func TestNamespaceNamesShared(t *testing.T) {
	l := loadSynthetic(t, 200, 2)
	defer l.stop()
	for _, inf := range []*informer{l.w.services, l.w.slices} {
		held := map[string]*byte{}
		for _, obj := range inf.GetStore().List() {
			ns, _ := obj.(named).StoreName()
			names := []string{ns}
			if s, ok := obj.(*object.StoredService); ok {
				names = append(names, s.Model.Namespace)
			}
			for _, ns := range names {
				if p, ok := held[ns]; ok && p != unsafe.StringData(ns) {
					t.Fatalf("%s: %s holds a copy of its own of namespace %s", inf.name, object.KeyOf(obj), ns)
				}
				held[ns] = unsafe.StringData(ns)
			}
		}
		if len(held) != *scaleNS {
			t.Errorf("%s: %d namespaces, want %d", inf.name, len(held), *scaleNS)
		}
	}
}
