package kubetree

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/watcher"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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

// testCluster is a kubetree whose watcher runs on a FakeAPI, writing through a recordingApplier.
type testCluster struct {
	k       *Kubetree
	w       *watcher.Watcher
	applier *applier.Applier
	api     *k8stest.FakeAPI
	applied *recordingApplier
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

// wired is a Kubetree parsed from stanza and wired as setup wires it, with no watcher: tests that
// publish through the applier themselves start here.
func wired(t testing.TB, stanza string) (*Kubetree, *applier.Applier) {
	t.Helper()
	return wiredWith(t, stanza, func(k *Kubetree) { k.upstream = stubUpstream{answer: upstreamAnswer} })
}

// wiredWithHostSearch is wired with a host search path, as setup reads it from resolv.conf.
func wiredWithHostSearch(t testing.TB, stanza string, search []string) (*Kubetree, *applier.Applier) {
	t.Helper()
	return wiredWith(t, stanza, func(k *Kubetree) { k.hostSearch = search })
}

// wiredWith is wired with what prepare sets as setup would, between parse and newWriteSide.
func wiredWith(t testing.TB, stanza string, prepare func(*Kubetree)) (*Kubetree, *applier.Applier) {
	t.Helper()
	k, err := parse(caddy.NewTestController("dns", stanza))
	if err != nil {
		t.Fatalf("parse %q: %v", stanza, err)
	}
	prepare(k)
	// Series per top-level test: a fuzz target's inputs share theirs.
	top, _, _ := strings.Cut(t.Name(), "/")
	return k, k.newWriteSide(metrics.New("test://"+top, strings.Join(k.Zones, ",")))
}

func startCluster(t testing.TB, stanza string, objs ...runtime.Object) *testCluster {
	t.Helper()
	return startClusterWith(t, stanza, nil, objs...)
}

// startClusterWith lets prepare set hooks on the API and the applier before the watcher starts.
func startClusterWith(t testing.TB, stanza string, prepare func(*testCluster), objs ...runtime.Object) *testCluster {
	t.Helper()
	k, ap := wired(t, stanza)
	k.cfg.startupTimeout = 10 * time.Second
	a := k8stest.NewFakeAPI(objs...)
	rec := &recordingApplier{Applier: ap}
	w := watcherFor(t, k, rec, a.Client, a.Versions.Client(), nil)
	c := &testCluster{k: k, w: w, applier: ap, api: a, applied: rec}
	if prepare != nil {
		prepare(c)
	}
	if err := w.Start(); err != nil {
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
	waitFor(t, "sync and open watches", func() bool { return k.Ready() && slices.Equal(a.Opened(), want) })
	return c
}

// watcherFor builds k's watcher over client (client-go's fake clientset, which decodes everything
// in full, or one wrapped around it), versions (the metadata-only lists of the same objects, a
// FakeVersions client) and, with multicluster, imports, as newWatcher builds it over a real API
// server, writing through a; the test's end stops it. The test starts it, after setting the API's
// hooks.
func watcherFor(t testing.TB, k *Kubetree, a watcher.Applier, client kubernetes.Interface, versions rest.Interface, imports mcsclient.MulticlusterV1alpha1Interface) *watcher.Watcher {
	t.Helper()
	w, err := watcher.New(k.watchOptions(), a, watcher.Clients{Kube: client, Versions: versions, Imports: imports})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// recordingApplier is the applier with a record of every key the watcher handed it ("ns/name" for
// a service, "namespace:name", "import:ns/name"), which swallows the barrier's objects: a barrier
// changes nothing in the tree, not even the SOA serial.
type recordingApplier struct {
	*applier.Applier
	mu   sync.Mutex
	keys []string
}

func (r *recordingApplier) ApplyService(key string, svc *object.StoredService, sls []*object.StoredSlice, exposed bool) {
	if r.record(key) {
		r.Applier.ApplyService(key, svc, sls, exposed)
	}
}

func (r *recordingApplier) ApplyImport(key string, si *object.StoredService, sls []*object.StoredSlice, exposed bool) {
	if r.record("import:" + key) {
		r.Applier.ApplyImport(key, si, sls, exposed)
	}
}

func (r *recordingApplier) ApplyNamespace(ns string, exists bool) {
	if r.record("namespace:" + ns) {
		r.Applier.ApplyNamespace(ns, exists)
	}
}

// record notes key, and reports whether it is no barrier's.
func (r *recordingApplier) record(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	return !strings.HasPrefix(key, barrierNS+"/") && !strings.HasPrefix(key, "namespace:"+barrierNS)
}

// mark returns a position in the record of keys.
func (r *recordingApplier) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys)
}

// since returns how often key was handed over after mark.
func (r *recordingApplier) since(mark int, key string) int {
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

// await waits until each of keys has been handed over since mark.
func (r *recordingApplier) await(t testing.TB, mark int, keys ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("barrier %v", keys), func() bool {
		for _, k := range keys {
			if r.since(mark, k) == 0 {
				return false
			}
		}
		return true
	})
}

// barrier returns once every change made through the API before it has been applied to the tree.
// Each informer hands its events to the watcher in order, so a sentinel object per informer handed
// to the applier means that everything before it has been queued, and one key at a time is applied
// in the order queued; a second sentinel, created once the first are applied, covers a key that was
// queued again while it was being applied.
func (c *testCluster) barrier(t testing.TB) {
	t.Helper()
	n := c.seq.Add(1)
	name := fmt.Sprintf("%s-%d", barrierNS, n)
	mark := c.applied.mark()
	svc := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: barrierNS, Name: name, Labels: matchLabels(c.k.cfg.labelSelector)},
		Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone}}
	ns := &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: name, Labels: matchLabels(c.k.cfg.namespaceSelector)}}
	objs := []runtime.Object{svc, ns}
	keys := []string{barrierNS + "/" + name, "namespace:" + name}
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
	c.applied.await(t, mark, keys...)
	if sentinel.IsValid() {
		waitFor(t, "the barrier pod", func() bool { return c.k.pods.ClientAt(sentinel) != nil })
	}
	after := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: barrierNS, Name: name + "-after", Labels: matchLabels(c.k.cfg.labelSelector)},
		Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone}}
	c.create(t, after)
	c.applied.await(t, mark, barrierNS+"/"+after.Name)
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

// create, update and remove change objects through the fake API; they do not wait.
func (c *testCluster) create(t testing.TB, objs ...runtime.Object) { c.api.Create(t, objs...) }
func (c *testCluster) update(t testing.TB, objs ...runtime.Object) { c.api.Update(t, objs...) }
func (c *testCluster) remove(t testing.TB, objs ...runtime.Object) { c.api.Delete(t, objs...) }

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
	if m.Truncated != tc.Truncated {
		t.Errorf("%s %s: TC %v, want %v", tc.Qname, dns.TypeToString[tc.Qtype], m.Truncated, tc.Truncated)
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
	k8stest.WaitFor(t, what, cond)
}

// stubUpstream answers every name outside our zones with one A record, as the rest of a CoreDNS
// chain (forward) would: the tests' one stand-in upstream.
// With truncated, its replies have TC set, as an upstream's whose answer did not fit.
type stubUpstream struct {
	answer    string
	truncated bool
}

func (u stubUpstream) Lookup(_ context.Context, state request.Request, name string, typ uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, typ)
	m.Truncated = u.truncated
	if typ == dns.TypeA {
		rr, _ := dns.NewRR(name + " 30 IN A " + u.answer)
		m.Answer = append(m.Answer, rr)
	}
	return m, nil
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
