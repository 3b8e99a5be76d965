package explain

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/query"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func init() { clog.Discard() }

// noStores stands for a watcher that stores nothing: the dump reads the published sets only.
type noStores struct{}

func (noStores) StoredService(string, bool) (*object.StoredService, []*object.StoredSlice, string) {
	return nil, nil, ""
}
func (noStores) NamespaceStored(string) bool { return true }
func (noStores) Unselected(string, string, string) (bool, labels.Set, error) {
	return false, nil, nil
}

// servicesInstance is an instance of cluster.local holding n ClusterIP services, published through
// the applier as the watcher's would be.
func servicesInstance(t testing.TB, n int) *Instance {
	t.Helper()
	zones := []records.ServedZone{{Name: "cluster.local."}}
	tr := tree.New([]string{"cluster.local."})
	build := &records.Builder{TTL: 5, NegativeTTL: 5, Nameserver: "ns.dns.cluster.local."}
	m := metrics.New("test://"+t.Name(), "cluster.local.")
	synced := new(atomic.Bool)
	synced.Store(true)
	a := applier.New(applier.Indexes{Tree: tr, External: records.NewExternalIndex(), Behind: new(atomic.Pointer[records.Behind])},
		applier.Options{Zones: zones, Build: build, Metrics: m})
	t.Cleanup(func() { a.Close(); m.Release() })
	a.ApplyNamespace("prod", true)
	for i := range n {
		obj, err := object.SlimService(k8stest.ClusterIPService("prod", fmt.Sprintf("service-with-a-long-name-%06d", i),
			[]string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255+1)}, k8stest.TCP("http", 80)))
		if err != nil {
			t.Fatal(err)
		}
		svc := obj.(*object.StoredService)
		a.ApplyService(svc.Key(), svc, nil, true)
	}
	return &Instance{Server: "test://bounds", Answerer: query.New(query.Options{Zones: zones, Synced: synced, Tree: tr, Build: build}),
		Stores: noStores{}}
}

// TestListenerBounded: clients that open connections and send nothing, and clients that ask for
// the whole dump and never read it, cost the listener a bounded number of goroutines and
// connections: at most maxConnections are served at once, at most maxDumps dumps are written at
// once (the next is refused, 503), a dump whose reader stopped ends after writeTimeout and frees its
// place, and an idle connection is closed after idleTimeout.
func TestListenerBounded(t *testing.T) {
	defer func(r, w, i time.Duration, c, d int) {
		readTimeout, writeTimeout, idleTimeout, maxConnections, maxDumps = r, w, i, c, d
	}(readTimeout, writeTimeout, idleTimeout, maxConnections, maxDumps)
	readTimeout, writeTimeout, idleTimeout, maxConnections, maxDumps = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 16, 2
	const services = 60000 // a dump of twice as many names: more megabytes than the sockets' buffers hold
	in := servicesInstance(t, services)
	bound, err := Start("127.0.0.1:0", in)
	if err != nil {
		t.Fatal(err)
	}
	defer Stop("127.0.0.1:0", in)
	base := "http://" + bound.String()
	goroutines := runtime.NumGoroutine()

	// Clients that ask for the whole dump and never read it.
	var stalled []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", bound.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /dump HTTP/1.1\r\nHost: explain\r\n\r\n")
		stalled = append(stalled, c)
	}
	// Idle connections, many more than are served at once.
	for range 100 {
		c, err := net.Dial("tcp", bound.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if n := runtime.NumGoroutine() - goroutines; n > 2*maxConnections+10 {
		t.Errorf("%d goroutines more with 104 clients connected; want them bounded by the %d connections served at once", n, maxConnections)
	}

	// Once the stalled dumps and the idle connections have timed out, a dump is served again, whole.
	var whole int64
	k8stest.WaitFor(t, "a whole dump served again", func() bool {
		resp, err := http.Get(base + "/dump")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		lines := 0
		whole = 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines++
			whole += int64(len(sc.Bytes())) + 1
		}
		return lines > 2*services
	})
	// A stalled client's dump was cut short: it never gets the whole of it.
	stalled[0].SetReadDeadline(time.Now().Add(2 * time.Second))
	got, _ := io.Copy(io.Discard, stalled[0])
	if got >= whole {
		t.Errorf("a client that stopped reading still got %d bytes, the whole dump (%d)", got, whole)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestDumpsAtOnceBounded: more dumps at once than maxDumps are refused with 503 and Retry-After.
func TestDumpsAtOnceBounded(t *testing.T) {
	defer func(w time.Duration, d int) { writeTimeout, maxDumps = w, d }(writeTimeout, maxDumps)
	writeTimeout, maxDumps = 5*time.Second, 1
	in := servicesInstance(t, 20000)
	bound, err := Start("127.0.0.1:0", in)
	if err != nil {
		t.Fatal(err)
	}
	defer Stop("127.0.0.1:0", in)
	c, err := net.Dial("tcp", bound.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /dump HTTP/1.1\r\nHost: explain\r\n\r\n") // and never read
	k8stest.WaitFor(t, "the second dump refused", func() bool {
		resp, err := http.Get("http://" + bound.String() + "/dump?limit=1")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" &&
			strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain")
	})
	http.DefaultClient.CloseIdleConnections()
}

// hugeInstance is an instance of cluster.local holding one headless service of endpoints ready
// endpoints in slices of 1,000, each endpoint with ports named ports: the shape of issue #33's
// paging attack.
func hugeInstance(t testing.TB, endpoints, ports int) *Instance {
	t.Helper()
	zones := []records.ServedZone{{Name: "cluster.local."}}
	tr := tree.New([]string{"cluster.local."})
	build := &records.Builder{TTL: 5, NegativeTTL: 5, Nameserver: "ns.dns.cluster.local."}
	m := metrics.New("test://huge", "cluster.local.")
	synced := new(atomic.Bool)
	synced.Store(true)
	a := applier.New(applier.Indexes{Tree: tr, External: records.NewExternalIndex(), Behind: new(atomic.Pointer[records.Behind])},
		applier.Options{Zones: zones, Build: build, Metrics: m})
	t.Cleanup(func() { a.Close(); m.Release() })
	a.ApplyNamespace("prod", true)
	var svcPorts []api.ServicePort
	var slicePorts []discovery.EndpointPort
	for p := range ports {
		svcPorts = append(svcPorts, k8stest.TCP(fmt.Sprintf("p%d", p), int32(8000+p)))
		slicePorts = append(slicePorts, k8stest.SlicePort(fmt.Sprintf("p%d", p), api.ProtocolTCP, int32(8000+p)))
	}
	obj, err := object.SlimService(k8stest.HeadlessService("prod", "huge", svcPorts...))
	if err != nil {
		t.Fatal(err)
	}
	transform := object.SliceTransform(object.SliceOptions{})
	var sls []*object.StoredSlice
	for s := 0; s*1000 < endpoints; s++ {
		var eps []k8stest.Endpoint
		for i := s * 1000; i < min((s+1)*1000, endpoints); i++ {
			eps = append(eps, k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.%d.%d.%d", 100+i>>16&255, i>>8&255, i&255)}})
		}
		sl, err := transform(k8stest.Slice("prod", "huge", fmt.Sprintf("huge-%d", s), discovery.AddressTypeIPv4, k8stest.SlicePorts(slicePorts...), eps...))
		if err != nil {
			t.Fatal(err)
		}
		sls = append(sls, sl.(*object.StoredSlice))
	}
	svc := obj.(*object.StoredService)
	a.ApplyService(svc.Key(), svc, sls, true)
	return &Instance{Server: "test://huge", Answerer: query.New(query.Options{Zones: zones, Synced: synced, Tree: tr, Build: build}),
		Stores: noStores{}}
}

// TestDumpPagesThroughAHugeService: pages of 7 names cut into a service of 2,000 endpoints give
// each of its names once, in order, each page made from its own names' records.
func TestDumpPagesThroughAHugeService(t *testing.T) {
	e := New(hugeInstance(t, 2000, 3))
	var names []string
	after := ""
	for {
		next, err := e.DumpPage(after, 7, nil, func(n explainapi.DumpedName) error {
			names = append(names, n.Name)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if next == "" {
			break
		}
		after = next
	}
	// The apex, dns-version, dns (above ns.dns), ns.dns, svc, pod, prod.svc, the service, its 3
	// SRV names and 2,000 endpoint names.
	if want := 7 + 1 + 3 + 2000; len(names) != want {
		t.Fatalf("%d names paged, want %d", len(names), want)
	}
	seen := map[string]bool{}
	for i, n := range names {
		if seen[n] {
			t.Fatalf("%s paged twice", n)
		}
		seen[n] = true
		if i > 0 && canonicalCompare(names[i-1], n) >= 0 {
			t.Fatalf("%s after %s: not in canonical order", n, names[i-1])
		}
	}
}

// BenchmarkDumpPageOfAHugeService is one page of 7 names from the middle of a headless service of
// 5,000 endpoints and 100 named ports (issue #33: paging it at 7 names a page took 46.6 s when every
// page made the whole service's records).
func BenchmarkDumpPageOfAHugeService(b *testing.B) {
	e := New(hugeInstance(b, 5000, 100))
	const after = "10-100-9-200.huge.prod.svc.cluster.local."
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if _, err := e.DumpPage(after, 7, nil, func(explainapi.DumpedName) error { n++; return nil }); err != nil || n != 7 {
			b.Fatalf("%d names (%v)", n, err)
		}
	}
}

// fakeAuthorizer authenticates every token as status says (0: authenticated), and authorizes
// the namespaces of allowed ("*": every one, cluster-wide too), counting the reviews.
type fakeAuthorizer struct {
	status  int
	allowed []string
	tokens  []string
	asked   []string // verb and namespace of each authorization
	delay   time.Duration
	mu      sync.Mutex
}

func (f *fakeAuthorizer) Authenticate(_ context.Context, _ netip.Addr, token string) (int, string) {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = append(f.tokens, token)
	return f.status, "decided by the test"
}

func (f *fakeAuthorizer) Authorize(_ context.Context, _ netip.Addr, token, verb, ns string) (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, verb+" "+ns)
	if f.status != 0 {
		return f.status, "decided by the test"
	}
	if slices.Contains(f.allowed, "*") || ns != "" && slices.Contains(f.allowed, ns) {
		return 0, ""
	}
	return http.StatusForbidden, "not in " + ns
}

// TestOffLoopbackCallersAreReviewed: a caller on loopback (the node, kubectl port-forward) is
// served as it is; any other needs a bearer token the API server authenticates, for a user it
// authorizes to get the path: 401 without one or when the token is not authenticated, 403 when
// the user is not authorized or nothing can review, 503 when the API server cannot say.
func TestOffLoopbackCallersAreReviewed(t *testing.T) {
	in := servicesInstance(t, 3)
	const name = "service-with-a-long-name-000001.prod.svc.cluster.local"
	for _, tc := range []struct {
		rule     string
		peer     string
		token    string
		reviewer *fakeAuthorizer // nil: no reviewer
		want     int
	}{
		{"loopback, no token", "127.0.0.1:40000", "", nil, http.StatusOK},
		{"IPv6 loopback", "[::1]:40000", "", nil, http.StatusOK},
		{"off loopback, nothing to review with", "10.0.0.7:40000", "t", nil, http.StatusForbidden},
		{"off loopback, no token", "10.0.0.7:40000", "", &fakeAuthorizer{}, http.StatusUnauthorized},
		{"off loopback, token not authenticated", "10.0.0.7:40000", "bad", &fakeAuthorizer{status: http.StatusUnauthorized}, http.StatusUnauthorized},
		{"off loopback, user not authorized", "10.0.0.7:40000", "someone", &fakeAuthorizer{status: http.StatusForbidden}, http.StatusForbidden},
		{"off loopback, the API server cannot say", "10.0.0.7:40000", "t", &fakeAuthorizer{status: http.StatusServiceUnavailable}, http.StatusServiceUnavailable},
		{"off loopback, authorized", "10.0.0.7:40000", "good", &fakeAuthorizer{allowed: []string{"*"}}, http.StatusOK},
		{"an IPv4-mapped loopback peer", "[::ffff:127.0.0.1]:40000", "", nil, http.StatusOK},
	} {
		if tc.reviewer != nil {
			in.Authorize = tc.reviewer
		} else {
			in.Authorize = nil
		}
		l := &explainListener{dumps: make(chan struct{}, maxDumps), users: []*Explainer{New(in)}}
		for _, path := range []string{"/explain", "/dump"} {
			r := httptest.NewRequest(http.MethodGet, "http://explain"+path+"?name="+name+"&limit=2", nil)
			r.RemoteAddr = tc.peer
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			if path == "/explain" {
				l.explain(w, r)
			} else {
				l.dump(w, r)
			}
			if w.Code != tc.want {
				t.Errorf("%s, %s: %d %s, want %d", tc.rule, path, w.Code, strings.TrimSpace(w.Body.String()), tc.want)
			}
			if w.Code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s, %s: 401 without WWW-Authenticate", tc.rule, path)
			}
		}
		if tc.reviewer != nil && tc.token != "" && (len(tc.reviewer.tokens) != 2 || tc.reviewer.tokens[0] != tc.token) {
			t.Errorf("%s: reviewed %v, want %q once a request", tc.rule, tc.reviewer.tokens, tc.token)
		}
	}
}

// shopsInstance is an instance of cluster.local with a ClusterIP service web in each of nss.
func shopsInstance(t testing.TB, nss ...string) *Instance {
	t.Helper()
	zones := []records.ServedZone{{Name: "cluster.local."}}
	tr := tree.New([]string{"cluster.local."})
	build := &records.Builder{TTL: 5, NegativeTTL: 5, Nameserver: "ns.dns.cluster.local."}
	m := metrics.New("test://"+t.Name(), "cluster.local.")
	synced := new(atomic.Bool)
	synced.Store(true)
	a := applier.New(applier.Indexes{Tree: tr, External: records.NewExternalIndex(), Behind: new(atomic.Pointer[records.Behind])},
		applier.Options{Zones: zones, Build: build, Metrics: m})
	t.Cleanup(func() { a.Close(); m.Release() })
	for i, ns := range nss {
		a.ApplyNamespace(ns, true)
		obj, err := object.SlimService(k8stest.ClusterIPService(ns, "web", []string{fmt.Sprintf("10.96.0.%d", i+1)}, k8stest.TCP("http", 80)))
		if err != nil {
			t.Fatal(err)
		}
		svc := obj.(*object.StoredService)
		a.ApplyService(svc.Key(), svc, nil, true)
	}
	return &Instance{Server: "test://shops", Answerer: query.New(query.Options{Zones: zones, Synced: synced, Tree: tr, Build: build}),
		Stores: noStores{}}
}

// TestAuthorizedByNamespace: a caller off loopback reads what it may read of each namespace: an
// explanation of a name of a namespace it may not get is refused (403, naming what it lacks), one
// of its own namespace served; its dump lists its namespaces' names and leaves out the others' and
// the zone's own (which need the permission cluster-wide). A caller allowed cluster-wide, or on
// loopback, reads everything.
func TestAuthorizedByNamespace(t *testing.T) {
	in := shopsInstance(t, "shop", "bank")
	for _, tc := range []struct {
		rule     string
		peer     string
		allowed  []string
		explain  map[string]int // name -> status
		dumpedNS []string       // the namespaces of the names dumped ("" for the zone's own)
	}{
		{"a reader of shop", "10.0.0.7:40000", []string{"shop"},
			map[string]int{"web.shop.svc.cluster.local": http.StatusOK, "web.bank.svc.cluster.local": http.StatusForbidden,
				"nothing.bank.svc.cluster.local": http.StatusForbidden, "dns-version.cluster.local": http.StatusForbidden},
			[]string{"shop"}},
		{"a reader of every namespace", "10.0.0.7:40000", []string{"*"},
			map[string]int{"web.shop.svc.cluster.local": http.StatusOK, "web.bank.svc.cluster.local": http.StatusOK, "dns-version.cluster.local": http.StatusOK},
			[]string{"", "bank", "shop"}},
		{"a reader of nothing", "10.0.0.7:40000", nil,
			map[string]int{"web.shop.svc.cluster.local": http.StatusForbidden},
			nil},
		{"loopback", "127.0.0.1:40000", nil,
			map[string]int{"web.bank.svc.cluster.local": http.StatusOK},
			[]string{"", "bank", "shop"}},
	} {
		in.Authorize = &fakeAuthorizer{allowed: tc.allowed}
		l := &explainListener{dumps: make(chan struct{}, maxDumps), users: []*Explainer{New(in)}}
		get := func(path string, serve http.HandlerFunc) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodGet, "http://explain"+path, nil)
			r.RemoteAddr = tc.peer
			r.Header.Set("Authorization", "Bearer token")
			w := httptest.NewRecorder()
			serve(w, r)
			return w
		}
		for name, want := range tc.explain {
			w := get("/explain?name="+name, l.explain)
			if w.Code != want {
				t.Errorf("%s: explain %s: %d %s, want %d", tc.rule, name, w.Code, strings.TrimSpace(w.Body.String()), want)
			}
			if want == http.StatusOK && strings.Contains(w.Body.String(), "bank") != strings.Contains(name, "bank") {
				t.Errorf("%s: explain %s tells of another namespace:\n%s", tc.rule, name, w.Body.String())
			}
		}
		w := get("/dump", l.dump)
		if w.Code != http.StatusOK {
			t.Errorf("%s: dump: %d %s", tc.rule, w.Code, w.Body.String())
			continue
		}
		var seen []string
		for line := range strings.Lines(w.Body.String()) {
			var n explainapi.DumpedName
			if err := json.Unmarshal([]byte(line), &n); err != nil {
				t.Fatal(err)
			}
			if ns := namespaceOf([]string{"cluster.local."}, n.Name); !slices.Contains(seen, ns) {
				seen = append(seen, ns)
			}
		}
		slices.Sort(seen)
		if !slices.Equal(seen, tc.dumpedNS) {
			t.Errorf("%s: the dump lists names of namespaces %q, want %q", tc.rule, seen, tc.dumpedNS)
		}
	}
}

// TestFloodOfBadTokens: 70 clients at one source off loopback each send a fresh bad token, again
// and again, to an authorizer that takes 20 ms a review; meanwhile a reader at another source,
// whose token is good, explains a name 10 times: it is served every time (each within the
// client's 3 s). The
// flooding source holds at most maxPerSource connections; the others it opens are closed at once.
func TestFloodOfBadTokens(t *testing.T) {
	defer func(trust bool) { trustLoopback = trust }(trustLoopback)
	trustLoopback = false // 127.0.0.2 and 127.0.0.3 stand for two sources off loopback
	in := shopsInstance(t, "shop")
	auth := &floodAuthorizer{good: "reader-token", delay: 20 * time.Millisecond}
	in.Authorize = auth
	bound, err := Start("127.0.0.1:0", in)
	if err != nil {
		t.Fatal(err)
	}
	defer Stop("127.0.0.1:0", in)
	from := func(source string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: time.Second}
		return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxConnsPerHost: 1}}
	}
	url := "http://" + bound.String() + "/explain?name=web.shop.svc.cluster.local"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // the flood's bound; it ends when the reader is done
	defer cancel()
	var flood sync.WaitGroup
	var sent, refusedAtOnce atomic.Int64
	for i := range 70 {
		c := from("127.0.0.2")
		flood.Go(func() {
			defer c.CloseIdleConnections()
			for n := 0; ctx.Err() == nil; n++ {
				r, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				r.Header.Set("Authorization", fmt.Sprintf("Bearer bad-%d-%d", i, n))
				sent.Add(1)
				resp, err := c.Do(r)
				if err != nil {
					refusedAtOnce.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	reader := from("127.0.0.3")
	const asks = 10
	var slowest time.Duration
	for range asks {
		r, _ := http.NewRequest(http.MethodGet, url, nil)
		r.Header.Set("Authorization", "Bearer reader-token")
		began := time.Now()
		resp, err := reader.Do(r)
		if err != nil {
			t.Fatalf("the reader, in the flood: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the reader, in the flood: %d %s", resp.StatusCode, body)
		}
		slowest = max(slowest, time.Since(began))
	}
	cancel()
	flood.Wait()
	reader.CloseIdleConnections()
	if most := auth.most.Load(); most > int64(maxPerSource)+1 {
		t.Errorf("%d reviews at once, want at most the flooding source's %d connections and the reader's", most, maxPerSource)
	}
	t.Logf("flood: %d requests sent, %d refused at the connection; the reader served %d of %d, the slowest in %v",
		sent.Load(), refusedAtOnce.Load(), asks, asks, slowest)
}

// floodAuthorizer authenticates one good token, taking delay for each review, and counts the
// reviews under way at once.
type floodAuthorizer struct {
	good      string
	delay     time.Duration
	now, most atomic.Int64
}

func (f *floodAuthorizer) Authenticate(_ context.Context, _ netip.Addr, token string) (int, string) {
	n := f.now.Add(1)
	defer f.now.Add(-1)
	for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
	}
	time.Sleep(f.delay)
	if token != f.good {
		return http.StatusUnauthorized, "not the good token"
	}
	return 0, ""
}

func (f *floodAuthorizer) Authorize(_ context.Context, _ netip.Addr, token, _, _ string) (int, string) {
	if token != f.good {
		return http.StatusUnauthorized, "not the good token"
	}
	return 0, ""
}
