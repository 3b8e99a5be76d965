package perf_test

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/plugintest"
	"github.com/kubetree/kubetree/internal/watcher"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	scaleServices  = flag.Int("scale.services", 0, "services in BenchmarkScale (0: skip it; `make scale` sets 100000)")
	scaleEndpoints = flag.Int("scale.endpoints", 10, "ready endpoints per service in BenchmarkScale")
	scaleHeadless  = flag.Float64("scale.headless", 0.2, "share of headless services")
	scaleNS        = flag.Int("scale.namespaces", 100, "namespaces")
	scaleUpdates   = flag.Int("scale.updates", 20000, "endpoint slice updates in BenchmarkScale's throughput figure")
	scaleZonal     = flag.Bool("scale.zonal", false, "BenchmarkScale with the zonal option (endpoints are in three zones either way)")
	scaleTopology  = flag.Bool("scale.topology", false, "BenchmarkScale with pods verified (no pods) and topology: endpoints on -scale.nodes nodes, hinted for their zone")
	scaleNodes     = flag.Int("scale.nodes", 3000, "nodes, in three zones, with -scale.topology")
	scaleHeapProf  = flag.String("scale.memprofile", "", "write heap profiles of BenchmarkScale's full load: before it at `path`.before, after it at path (what heap-MiB counts is the difference: go tool pprof -diff_base path.before path)")
)

// TestScaleServesEveryServiceThroughRelist loads a synthetic cluster through the path the informers
// use against a real API server (list, transform, store, queue, apply, tree), changes
// slices through the watch, then makes every watch fail so that everything is listed again: after
// each step, every service answers what its objects say.
func TestScaleServesEveryServiceThroughRelist(t *testing.T) {
	const services, endpointsPer, updates = 2000, 4, 3000
	l := loadSynthetic(t, services, endpointsPer)
	defer l.stop()
	initial := func(int) int { return 0 }
	// The first sync is the whole first list: every name is there at once.
	if wrong := syntheticMismatch(t, l.k, services, endpointsPer, initial); wrong != "" {
		t.Fatal(wrong)
	}

	// Updates and a relist arrive through the informers' handlers, which run behind the store: the
	// state must converge to what the API server holds.
	l.update(updates)
	converges(t, l.k, services, endpointsPer, func(i int) int { return lastVersion(i, services, updates) })
	l.relist() // the lists are generated again, at version 0
	converges(t, l.k, services, endpointsPer, initial)
}

func converges(t *testing.T, k *plugintest.Plugin, services, endpointsPer int, version func(int) int) {
	t.Helper()
	wrong := ""
	defer func() {
		if t.Failed() {
			t.Log("the first wrong answer:", wrong)
		}
	}()
	k8stest.WaitUntil(t, "every service to answer as its objects say", time.Minute, func() bool {
		wrong = syntheticMismatch(t, k, services, endpointsPer, version)
		return wrong == ""
	})
}

// lastVersion is the version of service i's slice after updates (see loaded.update).
func lastVersion(i, services, updates int) int {
	v := 0
	for u := i; u < updates; u += services {
		v = u + 1
	}
	return v
}

// syntheticMismatch asks every synthetic service's name for its A records, which must be the
// cluster IP or the endpoints of the slice version it is at, and describes the first that differs.
func syntheticMismatch(t *testing.T, k *plugintest.Plugin, services, endpointsPer int, version func(i int) int) string {
	t.Helper()
	for i := range services {
		svc := syntheticService(i)
		name := svc.Name + "." + svc.Namespace + ".svc.cluster.local."
		var want []string
		if svc.Spec.ClusterIP != api.ClusterIPNone {
			want = []string{plugintest.RecA(name, svc.Spec.ClusterIP)}
		} else {
			for _, e := range syntheticSlice(i, endpointsPer, version(i)).Endpoints {
				want = append(want, plugintest.RecA(name, e.Addresses[0]))
			}
		}
		if rcode, got := plugintest.Ask(t, k, name, dns.TypeA); rcode != dns.RcodeSuccess || !slices.Equal(got, plugintest.ZoneText(plugintest.ParseRRs(t, want...))) {
			return fmt.Sprintf("%s: got %s %q, want %q", name, dns.RcodeToString[rcode], got, want)
		}
	}
	return ""
}

// BenchmarkScale loads -scale.services services with -scale.endpoints endpoints each through the
// informer path, and reports heap bytes per service and per endpoint, the time to load, update
// throughput, and memory during a relist of everything. `make scale` runs it once.
func BenchmarkScale(b *testing.B) {
	if *scaleServices == 0 {
		b.Skip("BenchmarkScale is `make scale`")
	}
	for b.Loop() {
		base := heap()
		noEndpoints := loadSynthetic(b, *scaleServices, 0)
		perService := float64(noEndpoints.heap-base) / float64(*scaleServices)
		noEndpoints.stop()
		noEndpoints = nil

		base = heap()
		if *scaleHeapProf != "" {
			writeHeapProfile(b, *scaleHeapProf+".before") // for pprof -diff_base
		}
		full := loadSynthetic(b, *scaleServices, *scaleEndpoints)
		if *scaleHeapProf != "" {
			writeHeapProfile(b, *scaleHeapProf) // what full.heap counts
		}
		took := full.update(*scaleUpdates)
		endpoints := *scaleServices * *scaleEndpoints
		perEndpoint := float64(full.heap-base-int64(perService*float64(*scaleServices))) / float64(endpoints)
		r := full.relist()
		full.stop()

		b.ReportMetric(float64(*scaleServices), "services")
		b.ReportMetric(float64(endpoints), "endpoints")
		b.ReportMetric(mib(uint64(full.heap-base)), "heap-MiB")
		b.ReportMetric(perService, "B/service")
		b.ReportMetric(perEndpoint, "B/endpoint")
		b.ReportMetric(full.load.Seconds(), "load-s")
		b.ReportMetric(float64(*scaleUpdates)/took.Seconds(), "updates/s")
		b.ReportMetric(r.took.Seconds(), "relist-s")
		b.ReportMetric(float64(r.peakRSS)/float64(r.steadyRSS), "relist-peak-RSS/steady")
		b.ReportMetric(float64(r.peakHeap)/float64(r.steadyHeap), "relist-peak-heap/steady")
	}
}

// BenchmarkAudit audits -scale.services services with -scale.endpoints endpoints each, in step
// with the API server: the CPU and the memory one audit takes (`make scale` runs it).
func BenchmarkAudit(b *testing.B) {
	if *scaleServices == 0 {
		b.Skip("BenchmarkAudit is `make scale`")
	}
	l := loadSynthetic(b, *scaleServices, *scaleEndpoints)
	defer l.stop()
	// The first audit also encodes the fake API's lists of the synthetic objects, once.
	if n, err := l.w.Audit(context.Background()); n != 0 || err != nil {
		b.Fatalf("an audit of a cluster in step repaired %d (%v)", n, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if n, err := l.w.Audit(context.Background()); n != 0 || err != nil {
			b.Fatalf("an audit of a cluster in step repaired %d (%v)", n, err)
		}
	}
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC() // the profile is of the heap at the last collection: this one
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

type loaded struct {
	k      *plugintest.Plugin
	w      *watcher.Watcher
	heap   int64
	load   time.Duration
	stop   func()
	relist func() relisted
	update func(n int) time.Duration // sends n slice updates through the watch; the time until all are served
}

// relisted is memory during a relist (every object arrives again while the old ones are held)
// against the steady state before it.
type relisted struct {
	steadyRSS, peakRSS, steadyHeap, peakHeap uint64
	took                                     time.Duration
}

// relist makes every watch fail with 410 Gone, as after an API server restart that lost the
// watch history, and samples memory until all three informers hold the new lists. The steady state
// is measured after returning freed memory to the OS, as a long-running server's scavenger does, so
// the ratio errs high.
func relist(t testing.TB, w *watcher.Watcher, current func(string) *watch.FakeWatcher) relisted {
	var r relisted
	runtime.GC()
	debug.FreeOSMemory()
	r.steadyRSS, r.steadyHeap = procStatus("VmRSS"), heapInUse()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("cannot reset the peak RSS (%v); the peak is since the start of the test", err)
	}
	resources := []string{"services", "endpointslices", "namespaces"}
	before := w.Versions()
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var max uint64
		for {
			max = maxOf(max, heapInUse())
			select {
			case <-done:
				peak <- max
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	start := time.Now()
	gone := apierrors.NewResourceExpired("the watch history is gone")
	for _, resource := range resources {
		current(resource).Error(&gone.ErrStatus)
	}
	waitForLong(t, "relist", func() bool {
		now := w.Versions()
		for _, r := range resources {
			if now[r] == before[r] {
				return false
			}
		}
		return w.Pending() == 0
	})
	r.took = time.Since(start)
	close(done)
	r.peakHeap = <-peak
	r.peakRSS = procStatus("VmHWM")
	return r
}

func maxOf(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// procStatus reads a kB figure such as VmRSS or VmHWM (the peak RSS) from /proc/self/status, in bytes.
func procStatus(field string) uint64 {
	raw, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb uint64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb << 10
		}
	}
	return 0
}

func heapInUse() uint64 {
	s := []runtimemetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	runtimemetrics.Read(s)
	return s[0].Value.Uint64()
}

// loadSynthetic serves generated lists to the real watcher and waits for the first sync; then it
// sends updates endpoint slice updates through the watch and waits until the last is served.
func loadSynthetic(t testing.TB, services, endpointsPer int) *loaded {
	stanza := "kubetree cluster.local in-addr.arpa ip6.arpa"
	switch {
	case *scaleZonal && *scaleTopology:
		stanza += " {\n\tzonal\n\tpods verified\n\ttopology\n}"
	case *scaleZonal:
		stanza += " {\n\tzonal\n}"
	case *scaleTopology:
		stanza += " {\n\tpods verified\n\ttopology\n}"
	}
	k, a := plugintest.Wired(t, stanza)
	k.Watch.StartupTimeout = 10 * time.Minute
	client := fake.NewClientset()
	// Each watch gets a new watcher, as after a relist; lists counts the lists served, and is the
	// resource version of the next one.
	var mu sync.Mutex
	watchers := map[string]*watch.FakeWatcher{}
	current := func(resource string) *watch.FakeWatcher {
		mu.Lock()
		defer mu.Unlock()
		return watchers[resource]
	}
	var lists atomic.Int64
	client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		resource := a.GetResource()
		// A small buffer, as a TCP stream is: the source cannot run far ahead of the decoder.
		fw := watch.NewFakeWithChanSize(64, false)
		watchers[resource.Resource] = fw
		return true, fw, nil
	})
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		list := syntheticList(a.GetResource(), services, endpointsPer)
		list.(meta.ListInterface).SetResourceVersion(fmt.Sprint(lists.Add(1)))
		return true, list, nil
	})
	versions := &k8stest.FakeVersions{Static: true, Source: func(r schema.GroupVersionResource) (k8sruntime.Object, error) {
		return syntheticList(r, services, endpointsPer), nil
	}}
	w := plugintest.WatcherFor(t, k, a, client, versions.Client(), nil)
	start := time.Now()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLong(t, "synthetic sync", k.Ready)
	waitForLong(t, "watches open", func() bool {
		return current("services") != nil && current("endpointslices") != nil && current("namespaces") != nil
	})
	l := &loaded{k: k, w: w, load: time.Since(start), stop: func() { w.Stop() }}
	l.relist = func() relisted { return relist(t, w, current) }
	l.heap = heap()
	l.update = func(updates int) time.Duration {
		start := time.Now()
		for i := range updates {
			current("endpointslices").Modify(syntheticSlice(i%services, endpointsPer, i+1))
		}
		last := syntheticSlice((updates-1)%services, endpointsPer, updates)
		name := plugintest.EndpointName(object.Endpoint{Addr: netip.MustParseAddr(last.Endpoints[0].Addresses[0])}) + "." +
			last.Labels[discovery.LabelServiceName] + "." + last.Namespace + ".svc.cluster.local."
		waitForLong(t, "updates applied", func() bool {
			if w.Pending() > 0 {
				return false
			}
			_, answer := plugintest.Ask(t, k, name, dns.TypeA)
			return len(answer) == 1
		})
		return time.Since(start)
	}
	return l
}

func syntheticList(r schema.GroupVersionResource, services, endpointsPer int) k8sruntime.Object {
	switch r.Resource {
	case "namespaces":
		l := &api.NamespaceList{}
		for i := range *scaleNS {
			l.Items = append(l.Items, api.Namespace{ObjectMeta: meta.ObjectMeta{Name: fmt.Sprintf("ns%d", i), ResourceVersion: "1"}})
		}
		return l
	case "services":
		l := &api.ServiceList{Items: make([]api.Service, 0, services)}
		for i := range services {
			l.Items = append(l.Items, *syntheticService(i))
		}
		return l
	case "pods":
		return &api.PodList{}
	case "nodes":
		l := &api.NodeList{}
		for i := range *scaleNodes {
			l.Items = append(l.Items, *syntheticNode(i))
		}
		return l
	default:
		l := &discovery.EndpointSliceList{}
		if endpointsPer == 0 {
			return l
		}
		l.Items = make([]discovery.EndpointSlice, 0, services)
		for i := range services {
			l.Items = append(l.Items, *syntheticSlice(i, endpointsPer, 0))
		}
		return l
	}
}

func syntheticService(i int) *api.Service {
	s := &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%*scaleNS), Name: fmt.Sprintf("svc%d", i), ResourceVersion: "1"},
		Spec:       api.ServiceSpec{Type: api.ServiceTypeClusterIP, Ports: []api.ServicePort{{Name: "http", Protocol: api.ProtocolTCP, Port: 80}}},
	}
	if float64(i%100) < *scaleHeadless*100 {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = api.ClusterIPNone, []string{api.ClusterIPNone}
	} else {
		ip := fmt.Sprintf("10.96.%d.%d", i/250%256, i%250+1)
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip}
	}
	return s
}

// syntheticSlice is service i's slice; version moves its addresses, so that each update changes DNS.
func syntheticSlice(i, endpointsPer, version int) *discovery.EndpointSlice {
	svc := syntheticService(i)
	name, port, proto := "http", int32(8080), api.ProtocolTCP
	s := &discovery.EndpointSlice{
		ObjectMeta: meta.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-1", ResourceVersion: fmt.Sprint(version + 1),
			Labels: map[string]string{discovery.LabelServiceName: svc.Name}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	ready := true
	for e := range endpointsPer {
		n := i*endpointsPer + e + version*7
		zone := fmt.Sprintf("zone-%c", 'a'+e%3) // as the EndpointSlice controller writes it from the node
		ep := discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 128+n>>16&63, n>>8&255, n&255)},
			Conditions: discovery.EndpointConditions{Ready: &ready}, Zone: &zone,
			TargetRef: &api.ObjectReference{Kind: "Pod", Namespace: svc.Namespace, Name: fmt.Sprintf("%s-%d", svc.Name, e)}}
		if *scaleTopology {
			// On a node of its zone, hinted for it, as the EndpointSlice controller writes it.
			node := fmt.Sprintf("node-%d", n%(*scaleNodes/3)*3+e%3)
			ep.NodeName = &node
			ep.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}
		}
		if e%2 == 0 && svc.Spec.ClusterIP == api.ClusterIPNone {
			h := fmt.Sprintf("host%d", e)
			ep.Hostname = &h
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// syntheticNode is node i, in zone-a, zone-b or zone-c as i counts.
func syntheticNode(i int) *api.Node {
	return &api.Node{ObjectMeta: meta.ObjectMeta{Name: fmt.Sprintf("node-%d", i), ResourceVersion: "1",
		Labels: map[string]string{api.LabelTopologyZone: fmt.Sprintf("zone-%c", 'a'+i%3)}}}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func heap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// waitForLong waits for what a million endpoints take.
func waitForLong(t testing.TB, what string, cond func() bool) {
	t.Helper()
	k8stest.WaitUntil(t, what, 20*time.Minute, cond)
}

// storedModels are the models of every synthetic service and slice as the watcher stores them, by key.
func storedModels(l *loaded, services int) (map[string]*object.Service, map[string]*object.EndpointSlice) {
	svcs, sls := map[string]*object.Service{}, map[string]*object.EndpointSlice{}
	for i := range services {
		svc, slices, _ := l.w.StoredService(object.KeyOf(syntheticService(i)), false)
		if svc != nil {
			svcs[object.KeyOf(svc)] = svc.Model
		}
		for _, sl := range slices {
			sls[object.KeyOf(sl)] = sl.Model
		}
	}
	return svcs, sls
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
	serviceModels, sliceModels := storedModels(l, services)

	l.relist()
	converges(t, l.k, services, endpointsPer, func(int) int { return 0 })
	changed := map[string]bool{}
	for i := range updates {
		changed[object.KeyOf(syntheticSlice(i, endpointsPer, 0))] = true
	}
	afterServices, afterSlices := storedModels(l, services)
	if len(afterSlices) != services || len(afterServices) != services {
		t.Fatalf("%d services and %d slices stored, want %d of each", len(afterServices), len(afterSlices), services)
	}
	for key, m := range afterSlices {
		if same := m == sliceModels[key]; same == changed[key] {
			t.Errorf("slice %s: model shared with the stored version: %v", key, same)
		}
	}
	for key, m := range afterServices {
		if m != serviceModels[key] {
			t.Errorf("service %s: an unchanged model was not shared", key)
		}
	}
}

// TestNamespaceNamesShared: the services of a namespace (and their models) hold one copy of its
// name between them, and so do its slices, though each object arrived with its own.
func TestNamespaceNamesShared(t *testing.T) {
	const services = 200
	l := loadSynthetic(t, services, 2)
	defer l.stop()
	held := map[string]map[string]*byte{"services": {}, "endpointslices": {}} // by informer
	hold := func(informer, what, ns string) {
		if p, ok := held[informer][ns]; ok && p != unsafe.StringData(ns) {
			t.Fatalf("%s holds a copy of its own of namespace %s", what, ns)
		}
		held[informer][ns] = unsafe.StringData(ns)
	}
	for i := range services {
		svc, sls, _ := l.w.StoredService(object.KeyOf(syntheticService(i)), false)
		hold("services", "service "+object.KeyOf(svc), svc.Namespace)
		hold("services", "the model of service "+object.KeyOf(svc), svc.Model.Namespace)
		for _, sl := range sls {
			hold("endpointslices", "slice "+object.KeyOf(sl), sl.Namespace)
		}
	}
	for informer, names := range held {
		if len(names) != *scaleNS {
			t.Errorf("%s: %d namespaces, want %d", informer, len(names), *scaleNS)
		}
	}
}
