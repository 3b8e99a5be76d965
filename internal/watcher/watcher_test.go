package watcher

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/informer"
	"github.com/kubetree/kubetree/internal/k8stest"

	"go.uber.org/goleak"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// TestTombstones drives the handlers' delete path with cache.DeletedFinalStateUnknown, whose object
// may be stale: the delete goes by key.
func TestTombstones(t *testing.T) {
	svc := k8stest.ClusterIPService("prod", "web", []string{"10.0.0.20"})
	sl := k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.7.1"}, Hostname: "h"})
	tw := startWatcher(t, k8stest.Namespace("prod"), svc, sl)
	if h := tw.rec.services["prod/web"]; len(h.slices) != 1 {
		t.Fatalf("prod/web handed over with %d slices, want 1", len(h.slices))
	}
	handlers := func(enqueue func(any)) cache.ResourceEventHandler {
		return handlerFuncs(enqueue, func(_, _ any) bool { return true })
	}

	t.Run("slice", func(t *testing.T) {
		stored, _, _ := tw.w.slices.GetStore().GetByKey("prod/web-1")
		if err := tw.w.slices.GetStore().Delete(stored); err != nil {
			t.Fatal(err)
		}
		// The stale object still names the service: that is the one to rebuild.
		tw.w.sliceEvents().OnDelete(cache.DeletedFinalStateUnknown{Key: "prod/web-1", Obj: stored})
		tw.barrier(t)
		if h := tw.rec.services["prod/web"]; h.svc == nil || len(h.slices) != 0 {
			t.Errorf("prod/web handed over as %v with %d slices, want the service without its slice", h.svc, len(h.slices))
		}
		tw.rec.expect(t, "prod/web", "10.0.0.20")
	})

	t.Run("service", func(t *testing.T) {
		// A stale object whose fields no longer match anything: only the key counts.
		stale := k8stest.ClusterIPService("prod", "web", []string{"10.9.9.9"})
		stored, _, _ := tw.w.services.GetStore().GetByKey("prod/web")
		if err := tw.w.services.GetStore().Delete(stored); err != nil {
			t.Fatal(err)
		}
		handlers(tw.w.enqueueService).OnDelete(cache.DeletedFinalStateUnknown{Key: "prod/web", Obj: stale})
		tw.barrier(t)
		tw.rec.expect(t, "prod/web")
	})

	t.Run("namespace", func(t *testing.T) {
		tw.create(t, k8stest.ClusterIPService("prod", "api", []string{"10.0.0.21"}))
		tw.barrier(t)
		tw.rec.expect(t, "prod/api", "10.0.0.21")
		stored, _, _ := tw.w.namespaces.GetStore().GetByKey("prod")
		if err := tw.w.namespaces.GetStore().Delete(stored); err != nil {
			t.Fatal(err)
		}
		handlers(tw.w.enqueueNamespace).OnDelete(cache.DeletedFinalStateUnknown{Key: "prod", Obj: stored})
		tw.barrier(t)
		if tw.rec.namespaceServed("prod") {
			t.Error("namespace prod still served after its tombstone")
		}
		tw.rec.expect(t, "prod/api") // a service is served only while its namespace is
	})
}

// TestReadyOnlyWhenComplete makes a namespace arrive after its services have been applied, and the
// sync barrier be queued while the namespace waits in the queue: when the watcher says it is
// synced, the namespace's services must already have been handed over as served.
func TestReadyOnlyWhenComplete(t *testing.T) {
	var early atomic.Value // the first key applied while synced with web not served
	tw := newTestWatcher(t, testOptions(t), k8stest.Namespace("prod"), k8stest.ClusterIPService("prod", "web", []string{"10.0.0.130"}))
	webApplied := make(chan struct{})
	// The namespace list fails (and the reflector retries) until the service has been applied
	// without its namespace. A reactor must not block: the fake holds its lock meanwhile.
	tw.api.Client.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case <-webApplied:
			return false, nil, nil
		default:
			return true, nil, fmt.Errorf("not yet")
		}
	})
	tw.rec.afterApply = func(key string) {
		if key == "prod/web" {
			select {
			case <-webApplied:
			default:
				close(webApplied)
			}
		}
	}
	tw.rec.beforeApply = func(key string) {
		if key == nsPrefix+"prod" { // hold the namespace until the barrier is queued behind it
			for deadline := time.Now().Add(10 * time.Second); tw.q.addedSince(0, syncBarrier) == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		if tw.synced.Load() && tw.rec.served("prod/web") == nil && early.Load() == nil {
			early.Store(key)
		}
	}
	if err := tw.w.Start(); err != nil {
		t.Fatal(err)
	}
	k8stest.WaitFor(t, "sync", tw.synced.Load)
	tw.barrier(t)
	if key := early.Load(); key != nil {
		t.Errorf("synced while prod/web was not served (%q still to apply)", key)
	}
	tw.rec.expect(t, "prod/web", "10.0.0.130")
}

// TestReadyWaitsForAKeyQueuedAgainBehindTheBarrier: a service's slice of the initial lists arrives
// while the worker is applying the service, so the queue takes the key again only when the worker is
// done with it, after the sync barrier was queued. The sync must wait for that key too.
func TestReadyWaitsForAKeyQueuedAgainBehindTheBarrier(t *testing.T) {
	var early atomic.Value // the first key applied while synced with db-0 missing
	tw := newTestWatcher(t, testOptions(t), k8stest.Namespace("prod"), k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
			k8stest.Endpoint{Addrs: []string{"10.0.0.140"}, Hostname: "db-0"}))
	dbApplied := make(chan struct{})
	// The slice list fails (and the reflector retries) until the service has been applied
	// without its slice. A reactor must not block: the fake holds its lock meanwhile.
	tw.api.Client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case <-dbApplied:
			return false, nil, nil
		default:
			return true, nil, fmt.Errorf("not yet")
		}
	})
	first := true
	tw.rec.afterApply = func(key string) {
		if key != "prod/db" || !first {
			return
		}
		// Still applying prod/db: let the slice in, and hold on until the barrier is queued.
		first = false
		close(dbApplied)
		for deadline := time.Now().Add(10 * time.Second); tw.q.addedSince(0, syncBarrier) == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	tw.rec.beforeApply = func(key string) {
		if tw.synced.Load() && tw.rec.served("prod/db") == nil && early.Load() == nil {
			early.Store(key)
		}
	}
	if err := tw.w.Start(); err != nil {
		t.Fatal(err)
	}
	k8stest.WaitFor(t, "sync", tw.synced.Load)
	tw.barrier(t)
	if n := tw.q.addedSince(0, "prod/db"); n < 2 {
		t.Fatalf("prod/db was queued %d times; the test needs its slice to arrive while it is applied", n)
	}
	if key := early.Load(); key != nil {
		t.Errorf("synced while prod/db had no endpoint (%q still to apply)", key)
	}
	tw.rec.expect(t, "prod/db", "10.0.0.140")
}

// TestStopLeaksNothing starts and stops watchers as Corefile reloads do, including one whose API
// server refuses every list and one that can never list namespaces; every goroutine must end.
func TestStopLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for i := range 4 {
		o := testOptions(t)
		objs := []runtime.Object{k8stest.Namespace("prod"), k8stest.ClusterIPService("prod", "web", []string{"10.0.0.120"})}
		if i >= 2 {
			o.StartupTimeout = 0
		}
		tw := newTestWatcher(t, o, objs...)
		switch i {
		case 2: // the API server refuses every list
			tw.api.Client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, fmt.Errorf("connection refused")
			})
		case 3: // one resource is forbidden: the other informers run, the sync never completes
			tw.api.Client.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, fmt.Errorf("namespaces is forbidden")
			})
		}
		if err := tw.w.Start(); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if !tw.synced.Load() {
				t.Fatalf("watcher %d: not synced after start", i)
			}
			tw.rec.expect(t, "prod/web", "10.0.0.120")
		} else if tw.synced.Load() {
			t.Fatalf("watcher %d: synced without its API server", i)
		}
		if err := tw.w.Stop(); err != nil {
			t.Fatal(err)
		}
		for _, inf := range []*informer.Informer{tw.w.services, tw.w.slices, tw.w.namespaces} {
			if !inf.IsStopped() {
				t.Errorf("watcher %d: an informer still runs after stop", i)
			}
		}
		if err := tw.w.Stop(); err != nil { // stop twice, as a failed startup may
			t.Fatal(err)
		}
		if tw.synced.Load() {
			t.Errorf("watcher %d: still synced after stop", i)
		}
	}
}

// TestChangeAppliedByItsEventsGoroutine: after the first sync, a change is handed over once the
// store has taken it, by the goroutine that read it (no worker to wake); changes taken by several
// goroutines at once are all handed over, one key at a time.
func TestChangeAppliedByItsEventsGoroutine(t *testing.T) {
	slice := func(i int, addr string) *discovery.EndpointSlice {
		return k8stest.Slice("prod", "db", fmt.Sprintf("db-%d", i), discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{addr}})
	}
	tw := startWatcher(t, k8stest.Namespace("prod"), k8stest.HeadlessService("prod", "db"), slice(0, "10.0.9.1"), slice(1, "10.0.9.2"))
	tw.rec.expect(t, "prod/db", "10.0.9.1", "10.0.9.2")

	store := tw.w.slices.ReflectorStore()
	if err := store.Update(slice(0, "10.0.9.3")); err != nil {
		t.Fatal(err)
	}
	tw.rec.expect(t, "prod/db", "10.0.9.2", "10.0.9.3")

	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			for n := range 200 {
				if err := store.Update(slice(i, fmt.Sprintf("10.0.%d.%d", 10+i, n%250+1))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	tw.rec.expect(t, "prod/db", "10.0.10.200", "10.0.11.200")
}

// TestSlicesListedBeforeTheirServices: the slices' list arrives while the services cannot be
// listed yet; their keys change nothing then, and once the services are listed, every service
// is handed over with its endpoints before the sync.
func TestSlicesListedBeforeTheirServices(t *testing.T) {
	tw := newTestWatcher(t, testOptions(t), k8stest.Namespace("prod"), k8stest.HeadlessService("prod", "db"),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.9.7"}}))
	sliceKeyHandled := make(chan struct{})
	tw.api.Client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case <-sliceKeyHandled:
			return false, nil, nil
		default:
			return true, nil, fmt.Errorf("not yet")
		}
	})
	tw.q.done = func(key string) {
		if key == "prod/db" {
			select {
			case <-sliceKeyHandled:
			default:
				close(sliceKeyHandled)
			}
		}
	}
	if err := tw.w.Start(); err != nil {
		t.Fatal(err)
	}
	k8stest.WaitFor(t, "sync", tw.synced.Load)
	if n := tw.q.addedSince(0, "prod/db"); n < 2 {
		t.Fatalf("prod/db was queued %d times; the test needs its slice's key before the service's", n)
	}
	tw.rec.expect(t, "prod/db", "10.0.9.7")
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
		if got := gcPercent(); got != informer.ListGCPercent {
			t.Errorf("before the first sync, GC percent is %d, want %d", got, informer.ListGCPercent)
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
