package watcher

import (
	"runtime/debug"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"

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

// TestFirstTreeBuiltUnderRelistGCPercent: the collector runs at the relist GC percent from the
// start until the first tree is built (the lists end before it is), and the setting is put back
// then, or when the watcher stops unsynced.
func TestFirstTreeBuiltUnderRelistGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	gcPercent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	for _, sync := range []bool{true, false} {
		o := testOptions(t)
		o.StartupTimeout = 0 // Start returns at once: the list is held
		tw := newTestWatcher(t, o, k8stest.Namespace("prod"), k8stest.ClusterIPService("prod", "web", []string{"10.0.0.110"}))
		release := make(chan struct{})
		tw.api.Client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
			<-release
			return false, nil, nil
		})
		if err := tw.w.Start(); err != nil {
			t.Fatal(err)
		}
		if got := gcPercent(); got != relistGCPercent {
			t.Errorf("before the first sync, GC percent is %d, want %d", got, relistGCPercent)
		}
		if sync {
			close(release)
			k8stest.WaitFor(t, "sync", tw.synced.Load)
			if got := gcPercent(); got != 100 {
				t.Errorf("after the first sync, GC percent is %d, want 100", got)
			}
			_ = tw.w.Stop()
		} else {
			go func() { time.Sleep(10 * time.Millisecond); close(release) }() // the held list ignores the stop
			_ = tw.w.Stop()
			if got := gcPercent(); got != 100 {
				t.Errorf("after a stop before the first sync, GC percent is %d, want 100", got)
			}
		}
	}
}
