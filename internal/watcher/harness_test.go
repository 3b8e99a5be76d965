package watcher

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func init() { clog.Discard() }

// The watcher's test harness: a Watcher on k8stest's FakeAPI hands what it watches to a recorder,
// which stands in for the write side and keeps what it was last handed of each service and
// namespace. What DNS then answers is the root package's tests' to check; these check what the
// watcher hands over, and when.

const barrierNS = "zz-barrier"

// testWatcher is a Watcher whose API server is a FakeAPI and whose applier is a recorder.
type testWatcher struct {
	w      *Watcher
	api    *k8stest.FakeAPI
	rec    *recorder
	q      *recordingQueue
	synced *atomic.Bool
	seq    atomic.Int64
}

// testOptions are the options of a watcher of services, namespaces and their slices, with the
// startup timeout a test can wait for.
func testOptions(t testing.TB) Options {
	top, _, _ := strings.Cut(t.Name(), "/")
	return Options{StartupTimeout: 10 * time.Second, Synced: new(atomic.Bool), Metrics: metrics.New("test://"+top, "cluster.local.")}
}

// newTestWatcher makes the watcher o asks for over a FakeAPI holding objs; the test's end stops
// it. The test starts it, after setting the API's and the recorder's hooks.
func newTestWatcher(t testing.TB, o Options, objs ...runtime.Object) *testWatcher {
	t.Helper()
	fa := k8stest.NewFakeAPI(objs...)
	rec := newRecorder()
	w, err := New(o, rec, Clients{Kube: fa.Client, Versions: fa.Versions.Client()})
	if err != nil {
		t.Fatal(err)
	}
	q := &recordingQueue{workQueue: w.queue}
	w.queue = q
	t.Cleanup(func() { _ = w.Stop() })
	return &testWatcher{w: w, api: fa, rec: rec, q: q, synced: o.Synced}
}

// startWatcher starts a watcher of objs with testOptions, and waits for its first sync.
func startWatcher(t testing.TB, objs ...runtime.Object) *testWatcher {
	t.Helper()
	tw := newTestWatcher(t, testOptions(t), objs...)
	if err := tw.w.Start(); err != nil {
		t.Fatal(err)
	}
	k8stest.WaitFor(t, "sync", tw.synced.Load)
	// The worker may still hold the applying lock just after the sync (the keys settled behind the
	// barrier): until it lets go, an event's goroutine leaves its key to it instead of applying it.
	k8stest.WaitFor(t, "the worker done with the first state", func() bool {
		if !tw.w.applying.TryLock() {
			return false
		}
		defer tw.w.applying.Unlock()
		return tw.w.queue.Len() == 0
	})
	return tw
}

// recorder is the write side as the watcher's tests see it: what it was last handed of each
// service and namespace, and every key in order ("ns/name", "namespace:name"), with hooks around
// each service and namespace, run on the goroutine that applies it.
type recorder struct {
	mu         sync.Mutex
	services   map[string]handed
	namespaces map[string]bool
	pods       map[string]*object.StoredPod // by namespace/name
	keys       []string

	// Hooks, set before the watcher starts.
	beforeApply func(key string) // a key is about to be applied
	afterApply  func(key string) // a key has been applied
}

// handed is what the applier was last handed of one service.
type handed struct {
	svc     *object.StoredService
	slices  []*object.StoredSlice
	exposed bool
}

func newRecorder() *recorder {
	return &recorder{services: map[string]handed{}, namespaces: map[string]bool{}, pods: map[string]*object.StoredPod{}}
}

func (r *recorder) apply(key string, do func()) {
	if r.beforeApply != nil {
		r.beforeApply(key)
	}
	r.mu.Lock()
	r.keys = append(r.keys, key)
	do()
	r.mu.Unlock()
	if r.afterApply != nil {
		r.afterApply(key)
	}
}

func (r *recorder) ApplyService(key string, svc *object.StoredService, sls []*object.StoredSlice, exposed bool) {
	r.apply(key, func() { r.services[key] = handed{svc, slices.Clone(sls), exposed} })
}

func (r *recorder) ApplyImport(key string, si *object.StoredService, sls []*object.StoredSlice, exposed bool) {
	r.apply(importPrefix+key, func() { r.services[importPrefix+key] = handed{si, slices.Clone(sls), exposed} })
}

func (r *recorder) ApplyNamespace(ns string, exists bool) {
	r.apply(nsPrefix+ns, func() { r.namespaces[ns] = exists })
}

func (r *recorder) ApplyLabelledNamespace(string, bool) {}

func (r *recorder) ApplyPod(old, new *object.StoredPod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old != nil {
		delete(r.pods, old.Namespace+"/"+old.Name)
	}
	if new != nil {
		r.pods[new.Namespace+"/"+new.Name] = new
	}
}

func (r *recorder) ApplyNode(string, *object.StoredNode) {}

// served is what the write side would serve of the service under key: the addresses of its
// endpoints when it is headless (sorted), else its cluster IPs; nil when it is gone, its namespace
// is not served, or it has no model.
func (r *recorder) served(key string) []string {
	r.mu.Lock()
	h := r.services[key]
	r.mu.Unlock()
	if h.svc == nil || !h.exposed {
		return nil
	}
	model, _ := object.Assemble(h.svc, h.slices)
	if model == nil {
		return nil
	}
	out := []string{}
	if model.Kind == object.ClusterIP {
		for _, ip := range model.ClusterIPs {
			out = append(out, ip.String())
		}
		return out
	}
	for _, sl := range model.Slices {
		for i := range sl.Len() {
			out = append(out, sl.Endpoint(i).Addr.String())
		}
	}
	slices.Sort(out)
	return out
}

// expect checks what the write side would serve of the service under key (none: not served).
func (r *recorder) expect(t testing.TB, key string, want ...string) {
	t.Helper()
	if got := r.served(key); !slices.Equal(got, want) {
		t.Errorf("%s served as %q, want %q", key, got, want)
	}
}

// namespaceServed reports what the applier was last told of namespace ns.
func (r *recorder) namespaceServed(ns string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.namespaces[ns]
}

// recordingQueue records every key added; done, when set before the watcher starts, sees every key
// once whoever took it is done with it, whether or not it was handed to the applier.
type recordingQueue struct {
	workQueue
	mu    sync.Mutex
	added []string
	done  func(key string)
}

func (q *recordingQueue) Done(key string) {
	if q.done != nil {
		q.done(key)
	}
	q.workQueue.Done(key)
}

func (q *recordingQueue) Add(key string) {
	q.mu.Lock()
	q.added = append(q.added, key)
	q.mu.Unlock()
	q.workQueue.Add(key)
}

// addedSince returns how often key was added after the first mark keys.
func (q *recordingQueue) addedSince(mark int, key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, k := range q.added[mark:] {
		if k == key {
			n++
		}
	}
	return n
}

// barrier returns once every change made through the API before it has been handed to the
// recorder: a sentinel per informer, handed over, means everything before it was queued, and one
// key at a time is applied in order; a marker queued after them covers a key queued again while it
// was being applied.
func (tw *testWatcher) barrier(t testing.TB) {
	t.Helper()
	n := tw.seq.Add(1)
	name := fmt.Sprintf("%s-%d", barrierNS, n)
	objs := []runtime.Object{
		&api.Service{ObjectMeta: meta.ObjectMeta{Namespace: barrierNS, Name: name}, Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone}},
		&api.Namespace{ObjectMeta: meta.ObjectMeta{Name: name}},
	}
	keys := []string{barrierNS + "/" + name, nsPrefix + name}
	if tw.w.slices != nil {
		objs = append(objs, k8stest.Slice(barrierNS, name+"-owner", name, discovery.AddressTypeIPv4, nil))
		keys = append(keys, barrierNS+"/"+name+"-owner")
	}
	var sentinel string
	if tw.w.pods != nil {
		sentinel = barrierNS + "/" + name
		addr := netip.AddrFrom16([16]byte{0xfd, 0, 0xba, 0xff, 14: byte(n >> 8), 15: byte(n)})
		objs = append(objs, k8stest.Pod(barrierNS, name, addr.String()))
	}
	tw.create(t, objs...)
	tw.awaitApplied(t, keys...)
	if sentinel != "" {
		k8stest.WaitFor(t, "the barrier pod", func() bool {
			tw.rec.mu.Lock()
			defer tw.rec.mu.Unlock()
			return tw.rec.pods[sentinel] != nil
		})
	}
	marker := fmt.Sprintf("%s/marker-%d", barrierNS, n)
	tw.q.Add(marker)
	tw.w.applyQueued() // as an event's goroutine does once the worker has left the queue
	tw.awaitApplied(t, marker)
}

// awaitApplied waits until each of keys has been handed to the recorder.
func (tw *testWatcher) awaitApplied(t testing.TB, keys ...string) {
	t.Helper()
	k8stest.WaitFor(t, fmt.Sprintf("%v applied", keys), func() bool {
		tw.rec.mu.Lock()
		defer tw.rec.mu.Unlock()
		for _, k := range keys {
			if !slices.Contains(tw.rec.keys, k) {
				return false
			}
		}
		return true
	})
}

// create changes objects through the FakeAPI; it does not wait.
func (tw *testWatcher) create(t testing.TB, objs ...runtime.Object) { tw.api.Create(t, objs...) }
