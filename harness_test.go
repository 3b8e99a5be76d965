package kubetree

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/typed/apis/v1alpha1"
)

// The test harness: every test that needs a cluster runs the real watcher against client-go's fake
// clientset, made to behave like an API server where the watcher depends on it (fakeAPI), and
// checks what the plugin then answers.
// Every negative check (a name is gone, a key was not queued, a counter did not move) follows
// barrier, which proves that every event sent before it has been applied: no sleeps.

const (
	testZones = "kubetree cluster.local 10.in-addr.arpa"
	barrierNS = "zz-barrier"
)

// testCluster is a kubetree whose watcher runs on a fakeAPI, with a queue that records keys.
type testCluster struct {
	k       *Kubetree
	w       *watcher
	applier *applier
	api     *fakeAPI
	q       *recordingQueue
	seq     atomic.Int64
}

// slim takes the objects through the informers' transforms.
func slim(t testing.TB, svc *api.Service, sls []*discovery.EndpointSlice, podNames bool) (*object.StoredService, []*object.StoredSlice) {
	t.Helper()
	obj, err := object.SlimService(svc)
	if err != nil {
		t.Fatal(err)
	}
	var out []*object.StoredSlice
	transform := object.SliceTransform(object.SliceOptions{PodNames: podNames})
	for _, sl := range sls {
		o, err := transform(sl)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*object.StoredSlice))
	}
	return obj.(*object.StoredService), out
}

// modelOf takes API objects through the informers' transforms and object.Assemble, as the watcher does.
func modelOf(t testing.TB, svc *api.Service, sls []*discovery.EndpointSlice, podNames bool) (*object.Service, []object.Problem) {
	t.Helper()
	stored, storedSlices := slim(t, svc, sls, podNames)
	return object.Assemble(stored, storedSlices)
}

// wired is a Kubetree parsed from stanza and wired as setup wires it, with no watcher: tests that
// publish through the applier themselves start here.
func wired(t testing.TB, stanza string) (*Kubetree, *applier) {
	t.Helper()
	k, err := parse(caddy.NewTestController("dns", stanza))
	if err != nil {
		t.Fatalf("parse %q: %v", stanza, err)
	}
	k.upstream = stubUpstream{answer: upstreamAnswer}
	// Series per top-level test: a fuzz target's inputs share theirs.
	top, _, _ := strings.Cut(t.Name(), "/")
	return k, k.newWriteSide(newServerMetrics("test://"+top, strings.Join(k.Zones, ",")))
}

// wiredWithHostSearch is wired with a host search path, as setup reads it from resolv.conf.
func wiredWithHostSearch(t testing.TB, stanza string, search []string) (*Kubetree, *applier) {
	t.Helper()
	k, err := parse(caddy.NewTestController("dns", stanza))
	if err != nil {
		t.Fatalf("parse %q: %v", stanza, err)
	}
	k.hostSearch = search
	top, _, _ := strings.Cut(t.Name(), "/")
	return k, k.newWriteSide(newServerMetrics("test://"+top, strings.Join(k.Zones, ",")))
}

func startCluster(t testing.TB, stanza string, objs ...runtime.Object) *testCluster {
	t.Helper()
	return startClusterWith(t, stanza, nil, objs...)
}

// startClusterWith lets prepare set hooks on the API and the queue before the watcher starts.
func startClusterWith(t testing.TB, stanza string, prepare func(*testCluster), objs ...runtime.Object) *testCluster {
	t.Helper()
	k, ap := wired(t, stanza)
	k.cfg.startupTimeout = 10 * time.Second
	a := newFakeAPI(objs...)
	w := watcherFor(t, k, ap, a.client, a.versions.client(), nil)
	q := &recordingQueue{workQueue: w.queue, popped: map[string]bool{}}
	w.queue = q
	c := &testCluster{k: k, w: w, applier: ap, api: a, q: q}
	if prepare != nil {
		prepare(c)
	}
	if err := w.start(); err != nil {
		t.Fatal(err)
	}
	want := []string{"endpointslices", "namespaces", "services"}
	if k.cfg.noEndpoints {
		want = want[1:]
	}
	if k.pods != nil {
		want = append(want, "pods")
		slices.Sort(want)
	}
	if k.nodes != nil {
		want = append(want, "nodes")
		slices.Sort(want)
	}
	waitFor(t, "sync and open watches", func() bool { return k.Ready() && slices.Equal(a.opened(), want) })
	return c
}

// watcherFor builds k's watcher over client (client-go's fake clientset, which decodes everything
// in full, or one wrapped around it), versions (the metadata-only lists of the same objects, a
// fakeVersions client) and, with multicluster, imports, as newWatcher builds it over a real API
// server; the test's end stops it. The test starts it, after setting the API's hooks.
func watcherFor(t testing.TB, k *Kubetree, a *applier, client kubernetes.Interface, versions rest.Interface, imports mcsclient.MulticlusterV1alpha1Interface) *watcher {
	t.Helper()
	w, err := newWatcherFrom(k, a, client, versions, nil, nil, nil, imports)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.stop() })
	return w
}

// recordingQueue records every key added, and swallows the barrier's keys: the worker never
// applies them, so a barrier changes nothing in the tree, not even the SOA serial.
type recordingQueue struct {
	workQueue
	mu     sync.Mutex
	added  []string
	popped map[string]bool

	// Hooks, set before the watcher starts; they run on the worker's goroutine.
	beforeApply func(key string) // a key is about to be applied
	afterApply  func(key string) // a key has been applied
}

func (q *recordingQueue) Done(key string) {
	if q.afterApply != nil {
		q.afterApply(key)
	}
	q.workQueue.Done(key)
}

func (q *recordingQueue) Add(key string) {
	q.mu.Lock()
	q.added = append(q.added, key)
	q.mu.Unlock()
	q.workQueue.Add(key)
}

func (q *recordingQueue) Get() (string, bool) {
	key, shutdown := q.take(func() (string, bool) {
		key, shutdown := q.workQueue.Get()
		return key, !shutdown
	})
	return key, !shutdown
}

func (q *recordingQueue) TryGet() (string, bool) { return q.take(q.workQueue.TryGet) }

// take takes keys with get until one is not the barrier's (ok false: none), which the hook sees
// before it is applied; the barrier's are marked popped and given back.
func (q *recordingQueue) take(get func() (key string, ok bool)) (string, bool) {
	for {
		key, ok := get()
		if !ok || !isBarrierKey(key) {
			if ok && q.beforeApply != nil {
				q.beforeApply(key)
			}
			return key, ok
		}
		q.workQueue.Done(key)
		q.mu.Lock()
		q.popped[key] = true
		q.mu.Unlock()
	}
}

func isBarrierKey(key string) bool {
	return strings.HasPrefix(key, barrierNS+"/") || strings.HasPrefix(key, nsPrefix+barrierNS) ||
		strings.HasPrefix(key, "marker:")
}

// mark returns a position in the record of added keys.
func (q *recordingQueue) mark() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.added)
}

// addedSince returns how often key was added after mark.
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

func (q *recordingQueue) await(t testing.TB, keys ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("barrier %v", keys), func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, k := range keys {
			if !q.popped[k] {
				return false
			}
		}
		return true
	})
}

// barrier returns once every change made through the API before it has been applied to the tree.
// Each informer hands its events to our handler in order, so a sentinel object per informer reaching
// the single worker's queue means that the handler has queued everything before it; a second,
// queue-only marker then covers what applying those keys queued in turn (a namespace queues its
// services).
func (c *testCluster) barrier(t testing.TB) {
	t.Helper()
	n := c.seq.Add(1)
	name := fmt.Sprintf("%s-%d", barrierNS, n)
	svc := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: barrierNS, Name: name, Labels: matchLabels(c.k.cfg.labelSelector)},
		Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone}}
	ns := &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: name, Labels: matchLabels(c.k.cfg.namespaceSelector)}}
	objs := []runtime.Object{svc, ns}
	keys := []string{barrierNS + "/" + name, nsPrefix + name}
	if !c.k.cfg.noEndpoints {
		sl := k8stest.Slice(barrierNS, name+"-owner", name, discovery.AddressTypeIPv4, nil)
		for k, v := range matchLabels(c.k.cfg.labelSelector) {
			sl.Labels[k] = v
		}
		objs = append(objs, sl)
		keys = append(keys, barrierNS+"/"+name+"-owner")
	}
	var sentinel netip.Addr
	if c.k.pods != nil {
		// Pods do not go through the queue: a pod of the barrier's own is in the index once every
		// pod event before it is.
		sentinel = netip.AddrFrom16([16]byte{0xfd, 0, 0xba, 0xff, 14: byte(n >> 8), 15: byte(n)})
		objs = append(objs, k8stest.WithLabels(k8stest.Pod(barrierNS, name, sentinel.String()), labelPairs(c.k.cfg.labelSelector)...))
	}
	c.create(t, objs...)
	c.q.await(t, keys...)
	if sentinel.IsValid() {
		waitFor(t, "the barrier pod", func() bool { return c.k.pods.ClientAt(sentinel) != nil })
	}
	marker := fmt.Sprintf("marker:%d", n)
	c.q.Add(marker)
	c.w.applyQueued() // as an event's goroutine does once the worker has left the queue
	c.q.await(t, marker)
}

func labelPairs(sel *meta.LabelSelector) []string {
	var kv []string
	for k, v := range matchLabels(sel) {
		kv = append(kv, k, v)
	}
	return kv
}

func matchLabels(sel *meta.LabelSelector) map[string]string {
	out := map[string]string{}
	if sel != nil {
		for k, v := range sel.MatchLabels {
			out[k] = v
		}
	}
	return out
}

// create, update and remove change objects through the fake API, with the actions its typed
// clients send (so that its reactors see them); they do not wait.

func (c *testCluster) create(t testing.TB, objs ...runtime.Object) { c.change(t, "create", objs) }
func (c *testCluster) update(t testing.TB, objs ...runtime.Object) { c.change(t, "update", objs) }
func (c *testCluster) remove(t testing.TB, objs ...runtime.Object) { c.change(t, "delete", objs) }

func (c *testCluster) change(t testing.TB, verb string, objs []runtime.Object) {
	t.Helper()
	for _, o := range objs {
		m, err := apimeta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		gvr, ok := resourceOf[reflect.TypeOf(o)]
		if !ok {
			t.Fatalf("cannot %s %T", verb, o)
		}
		var action k8stesting.Action
		switch verb {
		case "create":
			action = k8stesting.NewCreateAction(gvr, m.GetNamespace(), o)
		case "update":
			action = k8stesting.NewUpdateAction(gvr, m.GetNamespace(), o)
		default:
			action = k8stesting.NewDeleteAction(gvr, m.GetNamespace(), m.GetName())
		}
		if _, err := c.api.client.Invokes(action, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// resourceOf is the API resource of each kind of object the tests change.
var resourceOf = map[reflect.Type]schema.GroupVersionResource{
	reflect.TypeFor[*api.Service]():             api.SchemeGroupVersion.WithResource("services"),
	reflect.TypeFor[*api.Namespace]():           api.SchemeGroupVersion.WithResource("namespaces"),
	reflect.TypeFor[*api.Pod]():                 api.SchemeGroupVersion.WithResource("pods"),
	reflect.TypeFor[*api.Node]():                api.SchemeGroupVersion.WithResource("nodes"),
	reflect.TypeFor[*discovery.EndpointSlice](): discovery.SchemeGroupVersion.WithResource("endpointslices"),
}

// Assertions: every test states the reply it wants as a test.Case and checks it with check (tables
// of them with runCases); expect is check for the answer section alone.

// dnsCase is one query and the reply the spec rule in its name asks for.
type dnsCase struct {
	rule string
	test.Case
	next       bool // the query must reach the next plugin, which writes nothing here
	answerOnly bool // only the rcode and the answer section are checked
}

// nextHandler stands in for the rest of the chain as test.NextHandler(dns.RcodeRefused, nil) does,
// and counts its calls: a query kubetree refuses itself also comes back as Refused with nothing
// written, and the two must be told apart.
type nextHandler struct{ calls int }

func (n *nextHandler) ServeDNS(context.Context, dns.ResponseWriter, *dns.Msg) (int, error) {
	n.calls++
	return dns.RcodeRefused, nil
}

func (n *nextHandler) Name() string { return "next" }

// captureWriter keeps the reply without packing it (so that benchmarks count the plugin's own
// allocations), and counts the writes.
type captureWriter struct {
	test.ResponseWriter
	msg    *dns.Msg
	writes int
}

func (w *captureWriter) WriteMsg(m *dns.Msg) error { w.writes++; w.msg = m; return nil }

// upstreamAnswer is what stubUpstream answers for every name outside our zones.
const upstreamAnswer = "192.0.2.1"

func runCases(t *testing.T, k *Kubetree, cases []dnsCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) { check(t, k, tc) })
	}
}

// check sends tc's query through ServeDNS and compares the reply with tc: the rcode, and each
// section as a sorted list of records in zone-file form (SOA serials, which follow the clock, only
// have to be set).
func check(t testing.TB, k *Kubetree, tc dnsCase) {
	t.Helper()
	checkHandler(t, k, func(next plugin.Handler) { k.Next = next }, tc)
}

// checkHandler is check for any handler (kubetree_external's too); setNext gives it its next plugin.
func checkHandler(t testing.TB, h plugin.Handler, setNext func(plugin.Handler), tc dnsCase) {
	t.Helper()
	next := &nextHandler{}
	setNext(next)
	w := &captureWriter{}
	code, err := h.ServeDNS(context.Background(), w, tc.Msg())
	if err != nil {
		t.Fatalf("%s %s: ServeDNS: %v", tc.Qname, dns.TypeToString[tc.Qtype], err)
	}
	if tc.next {
		if next.calls != 1 || code != dns.RcodeRefused || w.msg != nil {
			t.Fatalf("%s: want the query passed on: next called %d times, rcode %s, reply %v", tc.Qname, next.calls, dns.RcodeToString[code], w.msg)
		}
		return
	}
	if next.calls != 0 {
		t.Fatalf("%s: next plugin called %d times, want 0", tc.Qname, next.calls)
	}
	if tc.Rcode == dns.RcodeRefused {
		// Refused by kubetree: CoreDNS writes the reply from the returned rcode.
		if code != dns.RcodeRefused || w.msg != nil {
			t.Fatalf("%s: want Refused and nothing written, got rcode %s, reply %v", tc.Qname, dns.RcodeToString[code], w.msg)
		}
		return
	}
	if code != dns.RcodeSuccess || w.msg == nil || w.writes != 1 {
		t.Fatalf("%s: want one written reply, got rcode %s, %d writes, reply %v", tc.Qname, dns.RcodeToString[code], w.writes, w.msg)
	}
	m := w.msg
	if !m.Authoritative {
		t.Errorf("%s: reply is not authoritative", tc.Qname)
	}
	sections := []struct {
		name      string
		got, want []dns.RR
	}{{"answer", m.Answer, tc.Answer}, {"authority", m.Ns, tc.Ns}, {"additional", m.Extra, tc.Extra}}
	if tc.answerOnly {
		sections = sections[:1]
	}
	if m.Rcode != tc.Rcode {
		t.Errorf("%s %s: rcode %s, want %s\n%v", tc.Qname, dns.TypeToString[tc.Qtype], dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.Rcode], m)
	}
	for _, s := range sections {
		for _, rr := range s.got {
			if soa, ok := rr.(*dns.SOA); ok && soa.Serial == 0 {
				t.Errorf("%s: SOA serial is 0", tc.Qname)
			}
		}
		got, want := zoneText(s.got), zoneText(s.want)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s, %s section:\n got %q\nwant %q", tc.Qname, dns.TypeToString[tc.Qtype], s.name, got, want)
		}
	}
}

// zoneText is rrs in zone-file form, sorted, with SOA serials set to 0 (expectations write 0).
func zoneText(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SOA); ok {
			c := *s
			c.Serial = 0
			rr = &c
		}
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

// parseRRs parses records in zone-file form.
func parseRRs(t testing.TB, texts ...string) []dns.RR {
	t.Helper()
	out := make([]dns.RR, 0, len(texts))
	for _, text := range texts {
		rr, err := dns.NewRR(text)
		if err != nil {
			t.Fatalf("bad expected record %q: %v", text, err)
		}
		out = append(out, rr)
	}
	return out
}

// expect checks the rcode and the exact answer section for a query; want holds records in zone
// file form.
func (c *testCluster) expect(t testing.TB, name string, qtype uint16, rcode int, want ...string) {
	t.Helper()
	expectK(t, c.k, name, qtype, rcode, want...)
}

func expectK(t testing.TB, k *Kubetree, name string, qtype uint16, rcode int, want ...string) {
	t.Helper()
	check(t, k, dnsCase{Case: test.Case{Qname: name, Qtype: qtype, Rcode: rcode, Answer: parseRRs(t, want...)}, answerOnly: true})
}

// nx checks that names do not exist.
func (c *testCluster) nx(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		qtype := dns.TypeA
		switch {
		case strings.HasSuffix(n, ".arpa."):
			qtype = dns.TypePTR
		case strings.HasPrefix(n, "_"):
			qtype = dns.TypeSRV
		}
		c.expect(t, n, qtype, dns.RcodeNameError)
	}
}

// ask sends one query through ServeDNS and returns the rcode and the answer section as sorted
// strings, for tests that watch answers change rather than expect one.
func ask(t testing.TB, k *Kubetree, name string, qtype uint16) (int, []string) {
	t.Helper()
	w := &captureWriter{}
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	if _, err := k.ServeDNS(context.Background(), w, r); err != nil {
		t.Fatalf("%s %s: %v", name, dns.TypeToString[qtype], err)
	}
	if w.msg == nil {
		t.Fatalf("%s %s: no reply written", name, dns.TypeToString[qtype])
	}
	return w.msg.Rcode, zoneText(w.msg.Answer)
}

// Records as the watch tests expect them, with the default TTL of 5.

const (
	okay        = dns.RcodeSuccess
	clusterZone = "cluster.local."
)

func recA(name, ip string) string       { return name + " 5 IN A " + ip }
func recAAAA(name, ip string) string    { return name + " 5 IN AAAA " + ip }
func recPTR(name, target string) string { return name + " 5 IN PTR " + target }
func recSRV(name string, weight, port int, target string) string {
	return fmt.Sprintf("%s 5 IN SRV 0 %d %d %s", name, weight, port, target)
}

// waitFor polls cond for up to 10 s: for what a test cannot wait on with a barrier.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, what, 10*time.Second, cond)
}

func waitUntil(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting %s for %s", limit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// stubUpstream answers every name outside our zones with one A record, as the rest of a CoreDNS
// chain (forward) would: the tests' one stand-in upstream.
type stubUpstream struct{ answer string }

func (u stubUpstream) Lookup(_ context.Context, state request.Request, name string, typ uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, typ)
	if typ == dns.TypeA {
		rr, _ := dns.NewRR(name + " 30 IN A " + u.answer)
		m.Answer = append(m.Answer, rr)
	}
	return m, nil
}

// fakeAPI is client-go's fake clientset, made to behave like an API server where the watcher
// depends on it: every write gets a new resourceVersion; a watch with a label selector reports an
// object that stops matching as deleted and one that starts matching as added (as the API server's
// watch cache does); and delete events can be lost and watches expired, so that an informer relists
// and delivers tombstones. versions serves the metadata-only lists of the same objects.
type fakeAPI struct {
	client     *fake.Clientset
	versions   *fakeVersions
	rv         atomic.Int64
	loseDelete atomic.Bool  // drop delete events
	loseAll    atomic.Bool  // drop every event
	lost       atomic.Int64 // events dropped by loseAll

	mu      sync.Mutex
	watches map[string][]*filterWatch // open watches by resource
	opens   map[string]int            // watches ever opened, by resource
}

func newFakeAPI(objs ...runtime.Object) *fakeAPI {
	a := &fakeAPI{watches: map[string][]*filterWatch{}, opens: map[string]int{}}
	a.rv.Store(100)
	for _, o := range objs {
		if m, err := apimeta.Accessor(o); err == nil && m.GetResourceVersion() == "" {
			m.SetResourceVersion(strconv.FormatInt(a.rv.Add(1), 10))
		}
	}
	a.client = fake.NewClientset(objs...)
	a.versions = trackerVersions(a.client.Tracker())
	stamp := func(act k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := act.(interface{ GetObject() runtime.Object }); ok {
			if m, err := apimeta.Accessor(o.GetObject()); err == nil {
				m.SetResourceVersion(strconv.FormatInt(a.rv.Add(1), 10))
			}
		}
		return false, nil, nil
	}
	a.client.PrependReactor("create", "*", stamp)
	a.client.PrependReactor("update", "*", stamp)
	a.client.PrependWatchReactor("*", func(act k8stesting.Action) (bool, watch.Interface, error) {
		wa, ok := act.(k8stesting.WatchActionImpl)
		if !ok {
			return false, nil, nil
		}
		sel, err := labels.Parse(wa.ListOptions.LabelSelector)
		if err != nil {
			return true, nil, err
		}
		inner, err := a.client.Tracker().Watch(act.GetResource(), act.GetNamespace(), wa.ListOptions)
		if err != nil {
			return true, nil, err
		}
		fw := &filterWatch{api: a, resource: act.GetResource(), inner: inner, sel: sel, state: map[string]bool{},
			out: make(chan watch.Event), inject: make(chan watch.Event, 1), done: make(chan struct{})}
		// What matched when the watch opened, so that a later change can be told apart: the API
		// server compares with the object's previous version.
		list, err := a.client.Tracker().List(act.GetResource(), kinds[act.GetResource().Resource], act.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		items, _ := apimeta.ExtractList(list)
		for _, o := range items {
			if m, err := apimeta.Accessor(o); err == nil {
				fw.state[m.GetNamespace()+"/"+m.GetName()] = sel.Matches(labels.Set(m.GetLabels()))
			}
		}
		a.mu.Lock()
		a.watches[fw.resource.Resource] = append(a.watches[fw.resource.Resource], fw)
		a.opens[fw.resource.Resource]++
		a.mu.Unlock()
		go fw.run()
		return true, fw, nil
	})
	return a
}

// opened returns the resources watched so far, sorted.
func (a *fakeAPI) opened() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for r := range a.opens {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// expire ends the open watches of the resources with 410 Gone, and waits until their informers
// have relisted and watch again: everything written before is then on its way to the handlers,
// ahead of anything written after.
func (a *fakeAPI) expire(t *testing.T, resources ...string) {
	t.Helper()
	a.mu.Lock()
	var ws []*filterWatch
	before := map[string]int{}
	for _, r := range resources {
		ws = append(ws, a.watches[r]...)
		a.watches[r] = nil
		before[r] = a.opens[r]
	}
	a.mu.Unlock()
	if len(ws) == 0 {
		t.Fatalf("no open watch on %v", resources)
	}
	gone := &meta.Status{Status: meta.StatusFailure, Code: 410, Reason: meta.StatusReasonExpired, Message: "too old resource version"}
	for _, w := range ws {
		w.inject <- watch.Event{Type: watch.Error, Object: gone}
	}
	waitFor(t, fmt.Sprintf("relist of %v", resources), func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, r := range resources {
			if a.opens[r] == before[r] {
				return false
			}
		}
		return true
	})
}

var kinds = map[string]schema.GroupVersionKind{
	"services":       api.SchemeGroupVersion.WithKind("Service"),
	"namespaces":     api.SchemeGroupVersion.WithKind("Namespace"),
	"endpointslices": discovery.SchemeGroupVersion.WithKind("EndpointSlice"),
	"pods":           api.SchemeGroupVersion.WithKind("Pod"),
	"serviceimports": mcs.SchemeGroupVersion.WithKind("ServiceImport"),
	"nodes":          api.SchemeGroupVersion.WithKind("Node"),
}

// byNameSince returns the lists by name (a field selector on metadata.name: the audit's fetches)
// sent through the clientset since action mark, as "resource ns/name", sorted; and how many lists
// without one (in full) there were.
func (a *fakeAPI) byNameSince(mark int) (byName []string, full int) {
	for _, act := range a.client.Actions()[mark:] {
		l, ok := act.(k8stesting.ListAction)
		if !ok {
			continue
		}
		name, ok := l.GetListRestrictions().Fields.RequiresExactMatch("metadata.name")
		if !ok {
			full++
			continue
		}
		key := name
		if act.GetNamespace() != "" {
			key = act.GetNamespace() + "/" + name
		}
		byName = append(byName, act.GetResource().Resource+" "+key)
	}
	slices.Sort(byName)
	return byName, full
}

// actions is a mark for byNameSince: the number of actions the clientset has seen.
func (a *fakeAPI) actions() int { return len(a.client.Actions()) }

// fakeVersions is the API server's side of the audit's metadata-only lists: an http.RoundTripper
// under kubetree's own client for them (versionsREST) that answers GET /api/<version>/<resource>
// and /apis/<group>/<version>/<resource> as kube-apiserver answers the Accept header
// as=PartialObjectMetadataList: the metadata of the objects source lists, the label selector
// applied, in key order, in protobuf (k8stest.MetadataList). It records every request.
type fakeVersions struct {
	source   func(resource schema.GroupVersionResource) (runtime.Object, error)
	static   bool // source always lists the same: each list is encoded once
	truncate bool // cut every list short, as a connection that breaks does

	mu       sync.Mutex
	requests []versionsRequest
	encoded  map[string][]byte // with static
}

// versionsRequest is one list asked of fakeVersions.
type versionsRequest struct {
	resource         string
	query            url.Values
	accept, encoding string // Accept, Accept-Encoding
}

// trackerVersions serves the metadata of the objects the trackers hold (each resource from the
// first tracker whose scheme knows it).
func trackerVersions(trackers ...k8stesting.ObjectTracker) *fakeVersions {
	return &fakeVersions{source: func(r schema.GroupVersionResource) (runtime.Object, error) {
		var err error
		for _, t := range trackers {
			var list runtime.Object
			if list, err = t.List(r, kinds[r.Resource], ""); err == nil {
				return list, nil
			}
		}
		return nil, err
	}}
}

// client is kubetree's client for the lists, over v.
func (v *fakeVersions) client() rest.Interface {
	c, err := versionsREST(&rest.Config{Host: "http://kube-apiserver.test", Transport: v, QPS: -1})
	if err != nil {
		panic(err)
	}
	return c
}

// requestsOf returns the requests for resource, in order.
func (v *fakeVersions) requestsOf(resource string) []versionsRequest {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []versionsRequest
	for _, r := range v.requests {
		if r.resource == resource {
			out = append(out, r)
		}
	}
	return out
}

// RoundTrip implements http.RoundTripper.
func (v *fakeVersions) RoundTrip(req *http.Request) (*http.Response, error) {
	var r schema.GroupVersionResource
	switch p := strings.Split(strings.Trim(req.URL.Path, "/"), "/"); {
	case len(p) == 3 && p[0] == "api":
		r = schema.GroupVersionResource{Version: p[1], Resource: p[2]}
	case len(p) == 4 && p[0] == "apis":
		r = schema.GroupVersionResource{Group: p[1], Version: p[2], Resource: p[3]}
	default:
		return nil, fmt.Errorf("fake API server: no %s", req.URL.Path)
	}
	q := req.URL.Query()
	v.mu.Lock()
	v.requests = append(v.requests, versionsRequest{resource: r.Resource, query: q, accept: req.Header.Get("Accept"),
		encoding: req.Header.Get("Accept-Encoding")})
	v.mu.Unlock()
	body, err := v.list(r, q.Get("labelSelector"))
	if err != nil {
		return nil, err
	}
	if v.truncate {
		body = body[:len(body)/2]
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {partialListAccept}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
}

// list is the metadata-only list of resource's objects that match selector, as the API server
// encodes it.
func (v *fakeVersions) list(resource schema.GroupVersionResource, selector string) ([]byte, error) {
	key := resource.String() + "?" + selector
	if v.static {
		v.mu.Lock()
		b, ok := v.encoded[key]
		v.mu.Unlock()
		if ok {
			return b, nil
		}
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	full, err := v.source(resource)
	if err != nil {
		return nil, err
	}
	items, err := apimeta.ExtractList(full)
	if err != nil {
		return nil, err
	}
	var selected []runtime.Object
	for _, item := range items {
		m, err := apimeta.Accessor(item)
		if err != nil {
			return nil, err
		}
		if sel.Matches(labels.Set(m.GetLabels())) {
			selected = append(selected, item)
		}
	}
	rv := ""
	if l, err := apimeta.ListAccessor(full); err == nil {
		rv = l.GetResourceVersion()
	}
	b, err := k8stest.MetadataList(rv, selected...)
	if err == nil && v.static {
		v.mu.Lock()
		if v.encoded == nil {
			v.encoded = map[string][]byte{}
		}
		v.encoded[key] = b
		v.mu.Unlock()
	}
	return b, err
}

type filterWatch struct {
	api      *fakeAPI
	resource schema.GroupVersionResource
	inner    watch.Interface
	sel      labels.Selector
	state    map[string]bool // object key -> whether its last version matched; only run uses it
	out      chan watch.Event
	inject   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

func (w *filterWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *filterWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.done)
		w.inner.Stop()
	})
}

func (w *filterWatch) run() {
	defer close(w.out)
	send := func(ev watch.Event) bool {
		select {
		case w.out <- ev:
			return true
		case <-w.done:
			return false
		}
	}
	for {
		select {
		case <-w.done:
			return
		case ev := <-w.inject:
			send(ev)
			return
		case ev, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			m, err := apimeta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			key := m.GetNamespace() + "/" + m.GetName()
			was, is := w.state[key], w.sel.Matches(labels.Set(m.GetLabels()))
			w.state[key] = is
			if w.api.loseAll.Load() {
				w.api.lost.Add(1)
				continue
			}
			switch ev.Type {
			case watch.Added:
				if !is {
					continue
				}
			case watch.Modified:
				switch {
				case is && !was:
					ev.Type = watch.Added
				case !is && was:
					ev.Type = watch.Deleted
				case !is:
					continue
				}
			case watch.Deleted:
				delete(w.state, key)
				if !was || w.api.loseDelete.Load() {
					continue
				}
			}
			if !send(ev) {
				return
			}
		}
	}
}

// endpointName is what the specification names an endpoint below its service: its hostname, else
// its address with dashes (IPv6 compressed, a trailing dash completed with 0), followed in a
// multicluster zone by its cluster.
func endpointName(e object.Endpoint) string {
	name := e.Hostname
	if name == "" {
		name = strings.NewReplacer(".", "-", ":", "-").Replace(e.Addr.String())
		if strings.HasSuffix(name, "-") {
			name += "0"
		}
	}
	if e.Cluster != "" {
		name += "." + e.Cluster
	}
	return name
}
