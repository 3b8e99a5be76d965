package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubetree/kubetree/internal/k8stest"
)

var (
	soakDuration = flag.Duration("soak.duration", 20*time.Second, "how long TestSoak mutates the API and queries bin/coredns (`make soak` runs 10m)")
	// soakWindow is how long after the API acknowledged a write the state before it may still be
	// served. Propagation takes milliseconds; the window is generous on purpose, so that the soak
	// checks correctness (no answer that was never right, no state that stays wrong) and not speed.
	soakWindow = flag.Duration("soak.window", 5*time.Second, "TestSoak: how long a superseded state may still be answered")
)

const (
	soakNamespaces = 2
	soakServices   = 8  // service names per namespace, s0..s7: created, updated, deleted, re-created
	soakSlices     = 12 // EndpointSlice names per namespace, e0..e11: each labeled for some service name
	soakIPs        = 24 // endpoint addresses 10.244.77.1-24, shared by every slice of both namespaces
	soakLoaders    = 4  // query goroutines
	soakLoaderQPS  = 125
	soakMutateGap  = 25 * time.Millisecond // mean pause between API writes (some come in bursts)
	soakTimeout    = 2 * time.Second       // per query
)

var soakHostnames = []string{"h0", "h1", "h2", "h3"}

func soakIP(i int) string { return fmt.Sprintf("10.244.77.%d", i+1) }

// TestSoak: a mutator goroutine creates, updates and deletes services (ClusterIP and headless) and
// EndpointSlices (endpoints added, removed, made not ready, given hostnames, moved to another
// service) through the real API server, while loader goroutines query bin/coredns over UDP at a
// bounded rate for service names that exist and that were deleted, per-endpoint names, SRV and PTR
// records. Every answer is checked against a model of what was written: for each query name, the
// history of (write issued, write acknowledged, expected answer). An answer is right if it is the
// expected answer of a state that held at some moment between -soak.window before the query was
// sent and the moment its reply came; anything else is WRONG, and the test fails on any. Once the
// writes stop, every name the soak ever asked about must answer exactly as the model says (deleted
// names NXDOMAIN), and the model must equal what the API server holds. CoreDNS's heap, RSS and
// goroutines are reported; the test fails only on goroutine growth of more than 50.
func TestSoak(t *testing.T) {
	s := newSoak(t)
	witnessCtx, stopWitness := context.WithCancel(bg)
	witnessDone := s.witness(witnessCtx)
	defer func() { stopWitness(); witnessDone() }()
	c := startCoreDNS(t)
	eventually(t, "ready", 30*time.Second, c.isReady)
	for _, ns := range s.ns {
		c.waitRcode(t, ns.name+".svc.cluster.local.", dns.TypeA, dns.RcodeSuccess) // the namespace is served
	}
	startMem := sampleCoreDNS(t, c)

	s.start = time.Now()
	deadline := s.start.Add(*soakDuration)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { s.mutate(deadline) })
	loaders := make([]*soakLoader, soakLoaders)
	for i := range loaders {
		loaders[i] = &soakLoader{s: s, c: c, rng: rand.New(rand.NewPCG(s.seed, uint64(i+1)))}
		wg.Go(func() { loaders[i].run(stop) })
	}
	maxHeap := startMem.heap
	sampler := make(chan struct{})
	go func() {
		defer close(sampler)
		for time.Now().Before(deadline) {
			select {
			case <-time.After(5 * time.Second):
			case <-stop:
				return
			}
			if h, ok := metricValue(c, "go_memstats_heap_alloc_bytes"); ok && int64(h) > maxHeap {
				maxHeap = int64(h)
			}
		}
	}()
	// The mutator ends at the deadline (or at its first failed write); then the load stops.
	for time.Now().Before(deadline) && s.failed() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	s.stopMutating()
	close(stop)
	wg.Wait()
	<-sampler
	elapsed := time.Since(s.start)
	if err := s.failed(); err != nil {
		t.Fatalf("API write failed, the model is no longer known: %v", err)
	}

	var tally soakTally
	for _, l := range loaders {
		tally.add(&l.tally)
	}
	// The final full comparison: every name ever asked about, with the writes over.
	settled, final := s.finalCheck(t, c)
	s.compareWithAPI(t)
	endMem := sampleCoreDNS(t, c)

	ops := make([]string, 0, len(s.ops))
	for op, n := range s.ops {
		ops = append(ops, fmt.Sprintf("%s %d", op, n))
	}
	sort.Strings(ops)
	report(t, "ran %s (seed %d, window %s): %d API writes (%.0f/s: %s); %d queries checked (%.0f/s over UDP by %d goroutines): %d answers with records, %d NXDOMAIN, %d NODATA, %d other; %d right for the state at query time, %d for a superseded state within the window (oldest superseded %s before the query), %d WRONG, %d without a reply",
		elapsed.Round(time.Second), s.seed, *soakWindow, s.writes, float64(s.writes)/elapsed.Seconds(), strings.Join(ops, ", "),
		tally.checked, float64(tally.checked)/elapsed.Seconds(), soakLoaders, tally.records, tally.nxdomain, tally.nodata, tally.other,
		tally.current, tally.stale, tally.maxStale.Round(time.Millisecond), len(tally.wrong)+tally.moreWrong, tally.noReply)
	var lat []time.Duration
	for _, w := range s.log {
		lat = append(lat, w.acked.Sub(w.issued))
	}
	if len(lat) > 0 {
		report(t, "API write latency (sent to acknowledged): median %s, max %s; %s", median(lat).Round(time.Millisecond), slices.Max(lat).Round(time.Millisecond), s.witnessSummary())
	}
	if tally.maxStale > time.Second {
		t.Logf("not failing, but propagation took far longer than usual for this answer:\n%s\ncoredns output:\n%s", s.describe(tally.stalest), c.out.String())
	}
	report(t, "final comparison after the writes stopped, over UDP and TCP: %d names, exact after %d pass(es) in %s (%d with records, %d NXDOMAIN, %d NODATA; %d service names, %d endpoint names, %d PTR)",
		final.names, final.passes, settled.Round(time.Millisecond), final.records, final.nxdomain, final.nodata, final.services, final.endpoints, final.ptr)
	report(t, "coredns: Go heap %s at start, %s at end (max sampled %s); RSS %s -> %s; goroutines %d -> %d",
		mib(startMem.heap), mib(endMem.heap), mib(maxHeap), mib(startMem.rss), mib(endMem.rss), startMem.goroutines, endMem.goroutines)

	if n := len(tally.wrong) + tally.moreWrong; n > 0 {
		var b strings.Builder
		for _, w := range tally.wrong {
			b.WriteString("\n" + s.describe(w))
		}
		t.Errorf("%d WRONG answers out of %d; the first %d:%s", n, tally.checked, len(tally.wrong), b.String())
	}
	// A reply lost on loopback is not an answer to check, but more than a few means CoreDNS stalled.
	if tally.noReply > tally.checked/1000+3 {
		t.Errorf("%d queries got no reply within %s (%d checked); first: %s", tally.noReply, soakTimeout, tally.checked, tally.firstNoReply)
	}
	if endMem.goroutines > startMem.goroutines+50 {
		t.Errorf("coredns goroutines grew from %d to %d", startMem.goroutines, endMem.goroutines)
	}
	if tally.checked == 0 || s.writes == 0 {
		t.Errorf("nothing happened: %d writes, %d queries", s.writes, tally.checked)
	}
}

// ---------------------------------------------------------------- the model of what was written

type soakService struct {
	headless  bool
	clusterIP string // of a ClusterIP service
	port      string // the name of its one port (80/TCP): "http" or "web"
	obj       *api.Service
}

type soakEndpoint struct {
	ip, hostname string
	ready        *bool // nil: unset, which counts as ready
}

func (e soakEndpoint) isReady() bool { return e.ready == nil || *e.ready }

func (e soakEndpoint) label() string {
	if e.hostname != "" {
		return e.hostname
	}
	return strings.ReplaceAll(e.ip, ".", "-")
}

type soakSlice struct {
	service  string // the kubernetes.io/service-name label
	port     string // the slice's one port: "http" or "web"
	portNum  int32
	eps      []soakEndpoint
	obj      *discovery.EndpointSlice
	contents string // for the write log
}

type soakNamespace struct {
	name   string
	svcs   map[string]*soakService
	slices map[string]*soakSlice
}

type soakKey struct {
	name  string
	qtype uint16
}

func (k soakKey) String() string { return k.name + " " + dns.TypeToString[k.qtype] }

// soakEntry is one expected answer of a name, from the write that made it so: the write was sent at
// issued and acknowledged by the API server at acked (zero for the state before any write).
type soakEntry struct {
	issued, acked time.Time
	want          string
	write         int // index into soak.log, -1 for the initial state
}

type soakWrite struct {
	issued, acked time.Time
	what          string
	object        string // "service ns/name" or "slice ns/name"
	rv            string // the resourceVersion the write made; "" for a delete
}

type soak struct {
	t      *testing.T
	client kubernetes.Interface // without client-go's default limit of 5 requests a second
	seed   uint64
	start  time.Time
	ns     []*soakNamespace

	mu       sync.RWMutex
	history  map[soakKey][]soakEntry // every name ever asked about -> its expected answers over time
	inflight time.Time               // when the write under way was sent; zero when none is
	log      []soakWrite             // every write, in order
	deleted  []string                // cluster IPs of deleted services, most recent last
	stopped  bool
	err      error

	// The mutator's own: read by the loaders only under mu.
	writes int
	ops    map[string]int

	// What a watch of the test's own saw, and when: tells a late API server from a late CoreDNS.
	seenMu  sync.Mutex
	seen    map[string]time.Time   // "service ns/name rv" -> first seen
	seenDel map[string][]time.Time // "service ns/name" -> every time it was seen deleted
}

func newSoak(t *testing.T) *soak {
	s := &soak{t: t, seed: rand.Uint64() % 1_000_000, history: map[soakKey][]soakEntry{}, ops: map[string]int{},
		seen: map[string]time.Time{}, seenDel: map[string][]time.Time{}}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.vars["KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 200 // the mutator paces itself
	s.client = kubernetes.NewForConfigOrDie(cfg)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000, 36)
	for i := range soakNamespaces {
		name := newNamespace(t, fmt.Sprintf("soak-%c-%s", 'a'+i, suffix))
		s.ns = append(s.ns, &soakNamespace{name: name, svcs: map[string]*soakService{}, slices: map[string]*soakSlice{}})
	}
	// Every name starts out NXDOMAIN: the namespaces are new.
	for _, ns := range s.ns {
		for i := range soakServices {
			svc := svcName(ns.name, fmt.Sprintf("s%d", i))
			s.track(soakKey{svc, dns.TypeA})
			s.track(soakKey{svc, dns.TypeAAAA})
			s.track(soakKey{"_http._tcp." + svc, dns.TypeSRV})
			s.track(soakKey{"_web._tcp." + svc, dns.TypeSRV})
			for _, label := range soakLabels() {
				s.track(soakKey{label + "." + svc, dns.TypeA})
			}
		}
	}
	for i := range soakIPs {
		rev, _ := dns.ReverseAddr(soakIP(i))
		s.track(soakKey{rev, dns.TypePTR})
	}
	return s
}

// soakLabels are every endpoint name the soak can give: hostnames and dashed addresses.
func soakLabels() []string {
	out := slices.Clone(soakHostnames)
	for i := range soakIPs {
		out = append(out, strings.ReplaceAll(soakIP(i), ".", "-"))
	}
	return out
}

func (s *soak) track(k soakKey) {
	if _, ok := s.history[k]; !ok {
		s.history[k] = []soakEntry{{want: "NXDOMAIN", write: -1}}
	}
}

// expected computes every positive answer of the model (as formatted by soakAnswer); every other
// name is NXDOMAIN. It follows the DNS schema kubetree implements (README): a ClusterIP service
// answers its cluster IP; a headless one every ready endpoint address, and does not exist without
// one; each ready endpoint is named by its hostname, else its dashed address; SRV records of a
// ClusterIP service target the service, of a headless one each endpoint of the slices with that
// port, weight 100 spread evenly; PTR of a cluster IP is its service, of an endpoint address every
// endpoint name with it.
func (s *soak) expected() map[soakKey]string {
	out := map[soakKey]string{}
	clusterPTR := map[string][]string{}
	endpointPTR := map[string][]string{}
	for _, ns := range s.ns {
		for name, svc := range ns.svcs {
			fq := svcName(ns.name, name)
			var ready []soakEndpoint
			srv := map[string][]string{} // port name -> SRV rdata without the weight
			for _, sl := range ns.slices {
				if sl.service != name {
					continue
				}
				for _, e := range sl.eps {
					if e.isReady() {
						ready = append(ready, e)
						srv[sl.port] = append(srv[sl.port], fmt.Sprintf("%d %s.%s", sl.portNum, e.label(), fq))
					}
				}
			}
			if svc.headless && len(ready) == 0 {
				continue
			}
			if svc.headless {
				var ips []string
				for _, e := range ready {
					ips = append(ips, e.ip)
				}
				out[soakKey{fq, dns.TypeA}] = soakRecords(ips)
			} else {
				out[soakKey{fq, dns.TypeA}] = soakRecords([]string{svc.clusterIP})
				clusterPTR[svc.clusterIP] = append(clusterPTR[svc.clusterIP], fq)
			}
			out[soakKey{fq, dns.TypeAAAA}] = soakRecords(nil) // IPv4 only: NODATA
			for _, p := range []string{"http", "web"} {
				var rdata []string
				if !svc.headless && svc.port == p {
					rdata = []string{"0 100 80 " + fq}
				}
				if svc.headless {
					targets := slices.Compact(slices.Sorted(slices.Values(srv[p])))
					for _, tgt := range targets {
						rdata = append(rdata, fmt.Sprintf("0 %d %s", max(1, 100/len(targets)), tgt))
					}
				}
				if len(rdata) > 0 {
					out[soakKey{"_" + p + "._tcp." + fq, dns.TypeSRV}] = soakRecords(rdata)
				}
			}
			byLabel := map[string][]string{}
			for _, e := range ready {
				byLabel[e.label()] = append(byLabel[e.label()], e.ip)
				endpointPTR[e.ip] = append(endpointPTR[e.ip], e.label()+"."+fq)
			}
			for label, ips := range byLabel {
				out[soakKey{label + "." + fq, dns.TypeA}] = soakRecords(ips)
			}
		}
	}
	for ip, names := range endpointPTR {
		if _, ok := clusterPTR[ip]; !ok {
			rev, _ := dns.ReverseAddr(ip)
			out[soakKey{rev, dns.TypePTR}] = soakRecords(names)
		}
	}
	for ip, names := range clusterPTR {
		rev, _ := dns.ReverseAddr(ip)
		out[soakKey{rev, dns.TypePTR}] = soakRecords(names)
	}
	return out
}

// soakRecords formats a NOERROR answer: the rdata, sorted, without repeats.
func soakRecords(rdata []string) string {
	return "NOERROR:" + strings.Join(slices.Compact(slices.Sorted(slices.Values(rdata))), ",")
}

// soakAnswer formats a reply as expected() does.
func soakAnswer(m *dns.Msg) string {
	prefix := ""
	if m.Truncated {
		prefix = "TC "
	}
	switch m.Rcode {
	case dns.RcodeNameError:
		return prefix + "NXDOMAIN"
	case dns.RcodeSuccess:
		return prefix + soakRecords(answers(m))
	}
	return prefix + dns.RcodeToString[m.Rcode]
}

// write runs one API write and, once it is acknowledged, applies it to the model and appends every
// name's new expected answer to its history.
func (s *soak) write(what, object string, do func(ctx context.Context) (rv string, err error), apply func()) bool {
	s.mu.Lock()
	if s.stopped || s.err != nil {
		s.mu.Unlock()
		return false
	}
	issued := time.Now()
	s.inflight = issued
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	rv, err := do(ctx)
	cancel()
	acked := time.Now()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight = time.Time{}
	if err != nil {
		s.err = fmt.Errorf("%s: %w", what, err)
		return false
	}
	apply()
	s.writes++
	s.log = append(s.log, soakWrite{issued: issued, acked: acked, what: what, object: object, rv: rv})
	exp := s.expected()
	for k := range exp {
		s.track(k) // a new cluster IP's PTR
	}
	for k, h := range s.history {
		want, ok := exp[k]
		if !ok {
			want = "NXDOMAIN"
		}
		if h[len(h)-1].want != want {
			s.history[k] = append(h, soakEntry{issued: issued, acked: acked, want: want, write: len(s.log) - 1})
		}
	}
	if s.writes%200 == 0 {
		s.prune(acked)
	}
	return true
}

// prune drops expected answers that no query still to be checked can match: those superseded
// more than the window (and a minute of slack for replies and checks under way) ago.
func (s *soak) prune(now time.Time) {
	cutoff := now.Add(-*soakWindow - time.Minute)
	for k, h := range s.history {
		i := 0
		for i+1 < len(h) && h[i+1].acked.Before(cutoff) {
			i++
		}
		if i > 0 {
			s.history[k] = slices.Clone(h[i:])
		}
	}
}

func (s *soak) stopMutating() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

func (s *soak) failed() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.err
}

// settledBefore reports whether every write sent before t is in the history.
func (s *soak) settledBefore(t time.Time) bool {
	return s.inflight.IsZero() || t.Before(s.inflight)
}

// ---------------------------------------------------------------- the mutator

func (s *soak) mutate(deadline time.Time) {
	rng := rand.New(rand.NewPCG(s.seed, 0))
	for time.Now().Before(deadline) && s.failed() == nil {
		ns := s.ns[rng.IntN(len(s.ns))]
		if rng.IntN(100) < 40 {
			s.mutateService(rng, ns)
		} else {
			s.mutateSlice(rng, ns)
		}
		if rng.IntN(10) > 0 { // one time in ten, the next write follows at once
			time.Sleep(time.Duration(rng.Int64N(int64(2 * soakMutateGap))))
		}
	}
}

func (s *soak) mutateService(rng *rand.Rand, ns *soakNamespace) {
	name := fmt.Sprintf("s%d", rng.IntN(soakServices))
	client := s.client.CoreV1().Services(ns.name)
	create := func(headlessKind bool, op string) {
		port := []string{"http", "web"}[rng.IntN(2)]
		obj := k8stest.ClusterIPService(ns.name, name, nil, k8stest.TCP(port, 80))
		kind := "ClusterIP"
		if headlessKind {
			obj, kind = k8stest.HeadlessService(ns.name, name, k8stest.TCP(port, 80)), "headless"
		}
		var out *api.Service
		s.write(fmt.Sprintf("%s %s/%s: %s, port %s", op, ns.name, name, kind, port), "service "+ns.name+"/"+name,
			func(ctx context.Context) (rv string, err error) {
				if out, err = client.Create(ctx, obj, meta.CreateOptions{}); err == nil {
					rv = out.ResourceVersion
				}
				return rv, err
			},
			func() {
				s.ops[op]++
				ns.svcs[name] = &soakService{headless: headlessKind, clusterIP: out.Spec.ClusterIP, port: port, obj: out}
			})
	}
	remove := func(op string) bool {
		svc := ns.svcs[name]
		return s.write(fmt.Sprintf("%s %s/%s", op, ns.name, name), "service "+ns.name+"/"+name,
			func(ctx context.Context) (string, error) { return "", client.Delete(ctx, name, meta.DeleteOptions{}) },
			func() {
				s.ops[op]++
				delete(ns.svcs, name)
				if !svc.headless {
					s.deleted = append(s.deleted, svc.clusterIP)
					if len(s.deleted) > 64 {
						s.deleted = s.deleted[1:]
					}
				}
			})
	}
	update := func(op, what string, change func(*api.Service)) {
		svc := ns.svcs[name]
		obj := svc.obj.DeepCopy()
		change(obj)
		var out *api.Service
		s.write(fmt.Sprintf("%s %s/%s: %s", op, ns.name, name, what), "service "+ns.name+"/"+name,
			func(ctx context.Context) (rv string, err error) {
				if out, err = client.Update(ctx, obj, meta.UpdateOptions{}); err == nil {
					rv = out.ResourceVersion
				}
				return rv, err
			},
			func() {
				s.ops[op]++
				svc.obj, svc.port = out, out.Spec.Ports[0].Name
			})
	}

	svc := ns.svcs[name]
	if svc == nil {
		create(rng.IntN(2) == 0, "service-create")
		return
	}
	switch r := rng.IntN(100); {
	case r < 35:
		remove("service-delete")
	case r < 50:
		// A service cannot change between ClusterIP and headless in place: delete and create at once.
		if remove("service-delete") {
			create(!svc.headless, "service-recreate")
		}
	case r < 80:
		port := map[string]string{"http": "web", "web": "http"}[svc.port]
		update("service-port", "port renamed to "+port, func(o *api.Service) { o.Spec.Ports[0].Name = port })
	default:
		// Nothing DNS shows changes.
		update("service-touch", "annotation only", func(o *api.Service) {
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			o.Annotations["soak"] = strconv.Itoa(rng.IntN(1000))
		})
	}
}

func (s *soak) mutateSlice(rng *rand.Rand, ns *soakNamespace) {
	name := fmt.Sprintf("e%d", rng.IntN(soakSlices))
	client := s.client.DiscoveryV1().EndpointSlices(ns.name)
	cur := ns.slices[name]
	put := func(op string, next *soakSlice) {
		obj := soakSliceObject(ns.name, name, next)
		if cur != nil {
			obj.ResourceVersion = cur.obj.ResourceVersion
		}
		var out *discovery.EndpointSlice
		s.write(fmt.Sprintf("%s %s/%s: service %s, port %s:%d, endpoints [%s]", op, ns.name, name, next.service, next.port, next.portNum, next.contents),
			"slice "+ns.name+"/"+name,
			func(ctx context.Context) (rv string, err error) {
				if cur == nil {
					out, err = client.Create(ctx, obj, meta.CreateOptions{})
				} else {
					out, err = client.Update(ctx, obj, meta.UpdateOptions{})
				}
				if err == nil {
					rv = out.ResourceVersion
				}
				return rv, err
			},
			func() {
				s.ops[op]++
				next.obj = out
				ns.slices[name] = next
			})
	}
	if cur == nil {
		next := &soakSlice{service: s.pickService(rng, ns)}
		next.port, next.portNum = soakSlicePort(rng)
		next.eps = soakEndpoints(rng)
		next.contents = soakContents(next.eps)
		put("slice-create", next)
		return
	}
	next := &soakSlice{service: cur.service, port: cur.port, portNum: cur.portNum, eps: slices.Clone(cur.eps)}
	op := ""
	switch r := rng.IntN(100); {
	case r < 35:
		op = "slice-endpoints"
		next.eps = soakEndpoints(rng)
		if rng.IntN(5) == 0 {
			next.port, next.portNum = soakSlicePort(rng)
		}
	case r < 65:
		// One endpoint changes: readiness, hostname, or one is added or removed.
		op = "slice-endpoint"
		switch i := rng.IntN(len(next.eps) + 1); {
		case i == len(next.eps):
			next.eps = append(next.eps, soakEndpoint{ip: soakIP(rng.IntN(soakIPs)), hostname: soakHostname(rng), ready: soakReadiness(rng)})
		case rng.IntN(2) == 0:
			next.eps[i].ready = soakReadiness(rng)
		case rng.IntN(2) == 0:
			next.eps[i].hostname = soakHostname(rng)
		default:
			next.eps = slices.Delete(next.eps, i, i+1)
		}
	case r < 75:
		op = "slice-move"
		next.service = s.pickService(rng, ns)
	default:
		s.write(fmt.Sprintf("slice-delete %s/%s", ns.name, name), "slice "+ns.name+"/"+name,
			func(ctx context.Context) (string, error) { return "", client.Delete(ctx, name, meta.DeleteOptions{}) },
			func() { s.ops["slice-delete"]++; delete(ns.slices, name) })
		return
	}
	next.contents = soakContents(next.eps)
	put(op, next)
}

// pickService names a slice's service: mostly one that exists.
func (s *soak) pickService(rng *rand.Rand, ns *soakNamespace) string {
	if rng.IntN(5) > 0 && len(ns.svcs) > 0 {
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range ns.svcs {
				if !yield(n) {
					return
				}
			}
		})
		return names[rng.IntN(len(names))]
	}
	return fmt.Sprintf("s%d", rng.IntN(soakServices))
}

func soakSlicePort(rng *rand.Rand) (string, int32) {
	switch rng.IntN(4) {
	case 0:
		return "web", 8080
	case 1:
		return "http", 8081
	}
	return "http", 8080
}

// soakEndpoints makes 0 to 6 endpoints: addresses from the shared pool (now and then one twice),
// half with a hostname (which may repeat), a quarter not ready, some with readiness unset.
func soakEndpoints(rng *rand.Rand) []soakEndpoint {
	n := rng.IntN(7)
	perm := rng.Perm(soakIPs)
	var out []soakEndpoint
	for i := range n {
		ip := soakIP(perm[i])
		if i > 0 && rng.IntN(10) == 0 {
			ip = out[rng.IntN(len(out))].ip
		}
		out = append(out, soakEndpoint{ip: ip, hostname: soakHostname(rng), ready: soakReadiness(rng)})
	}
	return out
}

func soakHostname(rng *rand.Rand) string {
	if rng.IntN(2) == 0 {
		return ""
	}
	return soakHostnames[rng.IntN(len(soakHostnames))]
}

func soakReadiness(rng *rand.Rand) *bool {
	switch r := rng.IntN(100); {
	case r < 15:
		return nil
	case r < 40:
		return new(false)
	}
	return new(true)
}

func soakContents(eps []soakEndpoint) string {
	var parts []string
	for _, e := range eps {
		p := e.ip
		if e.hostname != "" {
			p += " " + e.hostname
		}
		switch {
		case e.ready == nil:
			p += " (ready unset)"
		case !*e.ready:
			p += " (not ready)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func soakSliceObject(ns, name string, sl *soakSlice) *discovery.EndpointSlice {
	var eps []k8stest.Endpoint
	for _, e := range sl.eps {
		eps = append(eps, k8stest.Endpoint{Addrs: []string{e.ip}, Hostname: e.hostname,
			NotReady: e.ready != nil && !*e.ready, Unknown: e.ready == nil})
	}
	return k8stest.Slice(ns, sl.service, name, discovery.AddressTypeIPv4,
		k8stest.SlicePorts(k8stest.SlicePort(sl.port, api.ProtocolTCP, sl.portNum)), eps...)
}

// ---------------------------------------------------------------- the loaders

type soakResult struct {
	key     soakKey
	sent    time.Time
	replied time.Time
	got     string
}

type soakWrong struct {
	soakResult
	wants []soakEntry // what the name was expected to be around then
}

type soakTally struct {
	checked, records, nxdomain, nodata, other, current, stale, noReply, moreWrong int
	maxStale                                                                      time.Duration
	stalest                                                                       soakWrong // the answer behind maxStale
	wrong                                                                         []soakWrong
	firstNoReply                                                                  string
}

func (t *soakTally) add(o *soakTally) {
	t.checked += o.checked
	t.records += o.records
	t.nxdomain += o.nxdomain
	t.nodata += o.nodata
	t.other += o.other
	t.current += o.current
	t.stale += o.stale
	t.noReply += o.noReply
	if o.maxStale > t.maxStale {
		t.maxStale, t.stalest = o.maxStale, o.stalest
	}
	if t.firstNoReply == "" {
		t.firstNoReply = o.firstNoReply
	}
	for _, w := range o.wrong {
		if len(t.wrong) < 10 {
			t.wrong = append(t.wrong, w)
		} else {
			t.moreWrong++
		}
	}
	t.moreWrong += o.moreWrong
}

type soakLoader struct {
	s       *soak
	c       *coreDNS
	rng     *rand.Rand
	pending []soakResult // answers waiting for the write under way to be acknowledged
	tally   soakTally
}

func (l *soakLoader) run(stop chan struct{}) {
	tick := time.NewTicker(time.Second / soakLoaderQPS)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			for len(l.pending) > 0 { // the mutator has stopped: every write is in the history
				l.checkPending()
				time.Sleep(time.Millisecond)
			}
			return
		case <-tick.C:
		}
		key := l.pick()
		sent := time.Now()
		m, err := soakAsk("udp", l.c.addr, key)
		replied := time.Now()
		if err != nil {
			l.tally.noReply++
			if l.tally.firstNoReply == "" {
				l.tally.firstNoReply = fmt.Sprintf("%s at %s: %v", key, sent.Sub(l.s.start).Round(time.Millisecond), err)
			}
		} else {
			l.pending = append(l.pending, soakResult{key: key, sent: sent, replied: replied, got: soakAnswer(m)})
		}
		l.checkPending()
	}
}

// pick chooses what to ask: service names (existing or not), endpoint names (mostly of endpoints
// the service's slices list, ready or not), SRV, and PTR of endpoint addresses and cluster IPs
// (live or of deleted services).
func (l *soakLoader) pick() soakKey {
	s, rng := l.s, l.rng
	s.mu.RLock()
	defer s.mu.RUnlock()
	ns := s.ns[rng.IntN(len(s.ns))]
	name := fmt.Sprintf("s%d", rng.IntN(soakServices))
	fq := svcName(ns.name, name)
	switch r := rng.IntN(100); {
	case r < 25:
		return soakKey{fq, dns.TypeA}
	case r < 30:
		return soakKey{fq, dns.TypeAAAA}
	case r < 40:
		return soakKey{[]string{"_http", "_web"}[rng.IntN(2)] + "._tcp." + fq, dns.TypeSRV}
	case r < 75:
		var labels []string
		for _, sl := range ns.slices {
			if sl.service == name {
				for _, e := range sl.eps {
					labels = append(labels, e.label())
				}
			}
		}
		slices.Sort(labels) // map order must not matter for the seed
		if len(labels) == 0 || rng.IntN(10) < 3 {
			labels = soakLabels()
		}
		return soakKey{labels[rng.IntN(len(labels))] + "." + fq, dns.TypeA}
	case r < 88:
		rev, _ := dns.ReverseAddr(soakIP(rng.IntN(soakIPs)))
		return soakKey{rev, dns.TypePTR}
	}
	ips := slices.Clone(s.deleted)
	for _, ns := range s.ns {
		for _, svc := range ns.svcs {
			if !svc.headless {
				ips = append(ips, svc.clusterIP)
			}
		}
	}
	if len(ips) == 0 {
		return soakKey{fq, dns.TypeA}
	}
	slices.Sort(ips)
	rev, _ := dns.ReverseAddr(ips[rng.IntN(len(ips))])
	return soakKey{rev, dns.TypePTR}
}

func soakAsk(network, addr string, key soakKey) (*dns.Msg, error) {
	client := &dns.Client{Net: network, Timeout: soakTimeout, UDPSize: dns.DefaultMsgSize}
	m := new(dns.Msg)
	m.SetQuestion(key.name, key.qtype)
	m.SetEdns0(dns.DefaultMsgSize, false) // large headless answers must not come truncated
	r, _, err := client.Exchange(m, addr)
	return r, err
}

func (l *soakLoader) checkPending() {
	s := l.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	kept := l.pending[:0]
	for _, r := range l.pending {
		if !s.settledBefore(r.replied) {
			kept = append(kept, r)
			continue
		}
		l.check(r)
	}
	l.pending = kept
}

// check judges one answer, under s.mu. Entry i of a name's history may be answered from the moment
// its write was sent until the window has passed after the next one was acknowledged.
func (l *soakLoader) check(r soakResult) {
	h := l.s.history[r.key]
	t := &l.tally
	t.checked++
	switch {
	case r.got == "NXDOMAIN":
		t.nxdomain++
	case r.got == "NOERROR:":
		t.nodata++
	case strings.HasPrefix(r.got, "NOERROR:"):
		t.records++
	default:
		t.other++
	}
	right, current := false, false
	var age time.Duration // how long before the query the freshest state it matches was superseded
	var around []soakEntry
	for i, e := range h {
		if e.issued.After(r.replied) {
			break
		}
		last := i+1 == len(h)
		if !last && h[i+1].acked.Add(*soakWindow).Before(r.sent) {
			continue
		}
		around = append(around, e)
		if e.want != r.got {
			continue
		}
		if last || !h[i+1].acked.Before(r.sent) {
			current = true
		} else if a := r.sent.Sub(h[i+1].acked); !right || a < age {
			age = a
		}
		right = true
	}
	switch {
	case current:
		t.current++
	case right:
		t.stale++
		if age > t.maxStale {
			t.maxStale, t.stalest = age, soakWrong{soakResult: r, wants: around}
		}
	case len(t.wrong) < 10:
		t.wrong = append(t.wrong, soakWrong{soakResult: r, wants: around})
	default:
		t.moreWrong++
	}
}

// describe tells a wrong answer with the name's expected answers around it and the writes behind them.
func (s *soak) describe(w soakWrong) string {
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "start"
		}
		return t.Sub(s.start).Round(time.Millisecond).String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %s: got %q (asked at %s, reply at %s); want one of:", w.key, w.got, rel(w.sent), rel(w.replied))
	for _, e := range w.wants {
		what := "initial state"
		if e.write >= 0 {
			w := s.log[e.write]
			what = w.what
			if seen, ok := s.witnessed(w); ok {
				what += fmt.Sprintf(" (the test's own watch saw it at %s)", rel(seen))
			} else {
				what += " (the test's own watch did not see it)"
			}
		}
		fmt.Fprintf(&b, "\n    %q since write sent %s, acked %s: %s", e.want, rel(e.issued), rel(e.acked), what)
	}
	return b.String()
}

// ---------------------------------------------------------------- the end

type soakFinal struct{ passes, names, records, nxdomain, nodata, services, endpoints, ptr int }

// finalCheck waits until every name ever asked about answers exactly as the model says, over UDP
// and TCP, and fails the test if that does not happen within 30 s.
func (s *soak) finalCheck(t *testing.T, c *coreDNS) (time.Duration, soakFinal) {
	t.Helper()
	start := time.Now()
	var f soakFinal
	var bad []string
	for {
		f, bad = soakFinal{}, nil
		f.passes++
		for k, h := range s.history {
			want := h[len(h)-1].want
			f.names++
			switch {
			case want == "NXDOMAIN":
				f.nxdomain++
			case want == "NOERROR:":
				f.nodata++
			default:
				f.records++
			}
			switch {
			case k.qtype == dns.TypePTR:
				f.ptr++
			case k.qtype == dns.TypeA && strings.Count(k.name, ".") == 5:
				f.services++
			case k.qtype == dns.TypeA:
				f.endpoints++
			}
			for _, network := range []string{"udp", "tcp"} {
				var got string
				m, err := soakAsk(network, c.addr, k)
				if err != nil {
					got = err.Error()
				} else {
					got = soakAnswer(m)
				}
				if got != want {
					bad = append(bad, fmt.Sprintf("%s over %s: got %q, want %q", k, network, got, want))
				}
			}
		}
		if len(bad) == 0 || time.Since(start) > 30*time.Second {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%d names still wrong 30 s after the writes stopped; the first:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n  "))
	}
	return time.Since(start), f
}

// compareWithAPI checks the model against what the API server holds: if they differ, the soak's
// bookkeeping is wrong, not kubetree.
func (s *soak) compareWithAPI(t *testing.T) {
	t.Helper()
	for _, ns := range s.ns {
		svcs, err := env.client.CoreV1().Services(ns.name).List(bg, meta.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, o := range svcs.Items {
			got = append(got, fmt.Sprintf("%s %s %s %s", o.Name, o.Spec.ClusterIP, o.Spec.Ports[0].Name, o.ResourceVersion))
		}
		for name, svc := range ns.svcs {
			ip := svc.clusterIP
			if svc.headless {
				ip = api.ClusterIPNone
			}
			want = append(want, fmt.Sprintf("%s %s %s %s", name, ip, svc.port, svc.obj.ResourceVersion))
		}
		sls, err := env.client.DiscoveryV1().EndpointSlices(ns.name).List(bg, meta.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range sls.Items {
			got = append(got, fmt.Sprintf("%s %s %s", o.Name, o.Labels[discovery.LabelServiceName], o.ResourceVersion))
			if sl := ns.slices[o.Name]; sl != nil && !slices.Equal(soakSliceEndpoints(o.Endpoints), soakSliceEndpoints(soakSliceObject(ns.name, o.Name, sl).Endpoints)) {
				t.Errorf("slice %s/%s: endpoints in the API %v, in the model %v", ns.name, o.Name,
					soakSliceEndpoints(o.Endpoints), soakSliceEndpoints(soakSliceObject(ns.name, o.Name, sl).Endpoints))
			}
		}
		for name, sl := range ns.slices {
			want = append(want, fmt.Sprintf("%s %s %s", name, sl.service, sl.obj.ResourceVersion))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("namespace %s: the API holds\n  %s\nbut the model\n  %s", ns.name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

func soakSliceEndpoints(eps []discovery.Endpoint) []string {
	var out []string
	for _, e := range eps {
		h, r := "", "unset"
		if e.Hostname != nil {
			h = *e.Hostname
		}
		if e.Conditions.Ready != nil {
			r = strconv.FormatBool(*e.Conditions.Ready)
		}
		out = append(out, fmt.Sprintf("%v/%s/%s", e.Addresses, h, r))
	}
	return out
}

type coreDNSMem struct{ heap, rss, goroutines int64 }

func sampleCoreDNS(t *testing.T, c *coreDNS) coreDNSMem {
	t.Helper()
	var m coreDNSMem
	heap, ok1 := metricValue(c, "go_memstats_heap_alloc_bytes")
	g, ok2 := metricValue(c, "go_goroutines")
	if !ok1 || !ok2 {
		t.Fatalf("no go_memstats_heap_alloc_bytes or go_goroutines at http://%s/metrics", c.metrics)
	}
	m.heap, m.goroutines = int64(heap), int64(g)
	m.rss = processMemory(t, c).rss
	return m
}

// metricValue reads one unlabeled metric from CoreDNS's prometheus endpoint.
func metricValue(c *coreDNS, name string) (float64, bool) {
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// witness watches services and slices in the soak's namespaces with a watch of the test's own and
// notes when each object version arrives; it returns a function that waits for the watches to end
// once ctx is done.
func (s *soak) witness(ctx context.Context) func() {
	var wg sync.WaitGroup
	for _, ns := range s.ns {
		for _, kind := range []string{"service", "slice"} {
			wg.Go(func() { s.watch(ctx, kind, ns.name) })
		}
	}
	return wg.Wait
}

func (s *soak) watch(ctx context.Context, kind, ns string) {
	rv := ""
	for ctx.Err() == nil {
		opts := meta.ListOptions{ResourceVersion: rv}
		var w watch.Interface
		var err error
		if kind == "service" {
			w, err = s.client.CoreV1().Services(ns).Watch(ctx, opts)
		} else {
			w, err = s.client.DiscoveryV1().EndpointSlices(ns).Watch(ctx, opts)
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			o, ok := ev.Object.(meta.Object)
			if ev.Type == watch.Error || !ok {
				rv = "" // start over from now: what is missed only goes without a witness
				break
			}
			rv = o.GetResourceVersion()
			object := kind + " " + ns + "/" + o.GetName()
			s.seenMu.Lock()
			if ev.Type == watch.Deleted {
				s.seenDel[object] = append(s.seenDel[object], now)
			} else if _, ok := s.seen[object+" "+rv]; !ok {
				s.seen[object+" "+rv] = now
			}
			s.seenMu.Unlock()
		}
		w.Stop()
	}
}

// witnessed says when the test's own watch saw what write w made.
func (s *soak) witnessed(w soakWrite) (time.Time, bool) {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	if w.rv != "" {
		t, ok := s.seen[w.object+" "+w.rv]
		return t, ok
	}
	for _, t := range s.seenDel[w.object] {
		if !t.Before(w.issued) {
			return t, true
		}
	}
	return time.Time{}, false
}

func (s *soak) witnessSummary() string {
	var delays []time.Duration
	for _, w := range s.log {
		if t, ok := s.witnessed(w); ok {
			delays = append(delays, t.Sub(w.acked))
		}
	}
	if len(delays) == 0 {
		return "the test's own watch saw none of the writes"
	}
	return fmt.Sprintf("the test's own watch saw %d of %d writes, median %s and at most %s after the acknowledgement",
		len(delays), len(s.log), median(delays).Round(time.Millisecond), slices.Max(delays).Round(time.Millisecond))
}
