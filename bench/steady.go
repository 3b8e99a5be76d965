package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
)

// What a replica costs the API server under steady churn (-steady). On one synthetic cluster
// (EndpointSlices as the EndpointSlice controller writes them), EndpointSlices change at
// -steady-rate a second throughout the run, each update as the controller writes it when a pod
// loses or regains its readiness or is replaced. One server at a time, in -steady-replicas
// replicas, talks to the API server, each replica through a counting TCP proxy of its own: the
// in-tree kubernetes plugin, kubetree (bin/coredns) with its audit off, any further kubetree builds
// (-steady-kubetree), and then no server at all, in that order, -steady-rounds times, so that the
// shared machine's drift falls on all alike. Each window lasts -steady-window, from -steady-settle
// after every replica answered (the initial lists are not counted). A window's figures are its
// replicas' together; per replica, divided by their number.
//
// Per window: the bytes the API server sent through the proxy, and its CPU (utime+stime from
// /proc). A window lasts minutes, and the API server collects garbage about once a GB allocated
// at 1M endpoints, for a second or more: whether a window holds one or two collections would
// decide its CPU. So, as for the audit (-audit), the collector's CPU (its runtime's own count) is
// taken out of each window and charged back by what the window allocated, at the collector's CPU
// per allocated byte over the whole run. A replica's CPU is its window's less the no-server
// window's of the same round; the median of the rounds.
//
// Then kubetree's audit, measured in the same run under the same churn: each kubetree build with
// audit_interval -audit-interval, -audits audits after the first (measureServer, as -audit does).
// Per replica-hour: the watches' bytes and CPU, plus an audit's times the audits an hour at each
// interval of steadyIntervals, against the in-tree replica's.

// steadyIntervals are the audit intervals the report computes hourly figures at.
var steadyIntervals = []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 20 * time.Minute, 30 * time.Minute, 60 * time.Minute}

// steadyGoal is the bound: a kubetree replica costs the API server at most this many
// times an in-tree replica per hour, in bytes and in CPU.
const steadyGoal = 1.05

// steadyServer is one column of the report: a server name, its plugin and the binary it runs.
type steadyServer struct {
	name   string // kubernetes, kubetree, or a -steady-kubetree name; "" is no server
	plugin string // kubernetes or kubetree
	binary string
}

// parseSteadyKubetree reads -steady-kubetree: name=path,... of further kubetree builds.
func parseSteadyKubetree(v string) ([]steadyServer, error) {
	var out []steadyServer
	if v == "" {
		return nil, nil
	}
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	seen := map[string]bool{"kubernetes": true, "kubetree": true}
	for _, f := range strings.Split(v, ",") {
		name, path, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok || !valid.MatchString(name) || path == "" {
			return nil, fmt.Errorf("-steady-kubetree: name=path,... with names of lower-case letters, digits, '.' and '-', got %q", f)
		}
		if seen[name] {
			return nil, fmt.Errorf("-steady-kubetree: the name %q is taken", name)
		}
		seen[name] = true
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		out = append(out, steadyServer{name: name, plugin: "kubetree", binary: abs})
	}
	return out, nil
}

// steadyWindow is what one window moved.
type steadyWindow struct {
	round              int
	secs               float64
	down, up           float64 // bytes from / to the API server, through the proxy
	apiCPU             float64 // kube-apiserver's utime+stime
	steadyCPU          float64 // the same outside its busiest seconds (trimmedCPU)
	gcCPU              float64 // of which its collector's (go_cpu_classes_gc_total_cpu_seconds_total)
	alloc              float64 // its heap allocations (go_gc_heap_allocs_bytes_total), one scrape's included
	etcdCPU, serverCPU float64
	updates, failed    int64   // the churn's
	answer             float64 // seconds from exec to the first right answer, the last replica's (no server: 0)
	initial            float64 // bytes the API server sent before the window (the initial lists)
	replicas           int     // of the server, watching at once (no server: 0)
}

// perReplica is v, a figure of the window's replicas together, for one of them.
func (w steadyWindow) perReplica(v float64) float64 { return v / float64(max(w.replicas, 1)) }

// charged is the API server's CPU in w outside its busiest seconds (where its collections fall),
// with the collector charged back by w's allocations at gcPerByte.
func (w steadyWindow) charged(gcPerByte float64) float64 {
	return w.steadyCPU + w.alloc*gcPerByte
}

// steadyTrim is the share of a window's seconds, the busiest, that trimmedCPU leaves out.
const steadyTrim = 0.05

// trimmedCPU is the CPU of a window whose every second used perSecond, had its busiest seconds
// (steadyTrim of them) used the mean of the others: a collection of the API server's heap lasts a
// second or more and comes once or twice a window, or not at all, and it is charged by allocation
// instead.
func trimmedCPU(perSecond []float64) float64 {
	if len(perSecond) == 0 {
		return 0
	}
	s := slices.Clone(perSecond)
	slices.Sort(s)
	keep := s[:len(s)-int(float64(len(s))*steadyTrim)]
	var sum float64
	for _, v := range keep {
		sum += v
	}
	return sum / float64(len(keep)) * float64(len(s))
}

// steadyResult is the whole run.
type steadyResult struct {
	cluster      *cluster
	machine      machine
	version      string
	began, ended time.Time
	servers      []steadyServer
	sources      map[string]string         // by server name: what its binary was built from
	windows      map[string][]steadyWindow // by server name, "" for no server; one per round
	audits       map[string]*auditRun      // by kubetree server name
	scrapeAlloc  float64                   // what one scrape of the API server's metrics allocates
	// The API server's collector over the whole measurement.
	gcCPU, gcAlloc, gcCycles, liveHeap float64
	churnDone, churnFailed             int64
	churnFor                           time.Duration
}

func (res *steadyResult) gcPerByte() float64 {
	if res.gcAlloc <= 0 {
		return 0
	}
	return res.gcCPU / res.gcAlloc
}

func runSteady(ctx context.Context, cfg *config) error {
	began := time.Now()
	coreDNSBinary = filepath.Join(cfg.root, "bin/coredns")
	servers := append([]steadyServer{
		{name: "kubernetes", plugin: "kubernetes", binary: coreDNSBinary},
		{name: "kubetree", plugin: "kubetree", binary: coreDNSBinary},
	}, cfg.steadyKubetree...)
	for _, sv := range servers {
		if _, err := os.Stat(sv.binary); err != nil {
			return fmt.Errorf("%s missing (`make build` in %s): %w", sv.binary, cfg.root, err)
		}
	}
	return withControlPlane(ctx, cfg, "kubetree-bench-steady-", func(dir string, cp *controlPlane) error {
		res := &steadyResult{machine: machineInfo(cfg.root), version: cp.version, began: began, servers: servers,
			sources: map[string]string{}, windows: map[string][]steadyWindow{}, audits: map[string]*auditRun{}}
		for _, sv := range servers {
			res.sources[sv.name] = binarySource(sv.binary)
		}
		logf("== create the cluster")
		cl, err := populate(ctx, cp, cfg, nil)
		if err != nil {
			return err
		}
		res.cluster = cl
		if err := measureSteady(ctx, cfg, dir, cp, res); err != nil {
			return err
		}
		res.ended = time.Now()
		report := res.markdown(cfg)
		return publish(cfg, report)
	})
}

// binarySource is the commit a Go binary was built from (its VCS stamp), or its path.
func binarySource(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return path
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", with uncommitted changes"
			}
		}
	}
	if rev == "" {
		return path + " (no VCS stamp)"
	}
	return fmt.Sprintf("commit %.7s%s", rev, modified)
}

func measureSteady(ctx context.Context, cfg *config, dir string, cp *controlPlane, res *steadyResult) error {
	target, pids, err := cp.processes()
	if err != nil {
		return err
	}
	writer, err := protobufClient(cp.kubeconfig)
	if err != nil {
		return err
	}
	probe := res.cluster.probe()

	churnStart := time.Now()
	ch, stopChurn := startChurn(ctx, res.cluster, writer, cfg.steadyRate)
	defer stopChurn()
	if err := sleep(ctx, cfg.steadySettle); err != nil {
		return err
	}
	first, scrape, err := cp.scrapeCost(ctx)
	if err != nil {
		return err
	}
	res.scrapeAlloc = scrape

	order := append(slices.Clone(res.servers), steadyServer{})
	for round := range cfg.steadyRounds {
		for _, sv := range order {
			w, err := steadyWindowOf(ctx, cfg, dir, cp, target, pids, probe, ch, sv, round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, serverLabel(sv.name), err)
			}
			res.windows[sv.name] = append(res.windows[sv.name], w)
		}
	}

	// The audit of each kubetree build, under the same churn. Between audits the API server
	// allocates at the rate of that build's windows (the churn and its watches).
	for _, sv := range res.servers {
		if sv.plugin != "kubetree" {
			continue
		}
		var allocRates []float64
		for _, w := range res.windows[sv.name] {
			allocRates = append(allocRates, (w.alloc-res.scrapeAlloc)/w.secs)
		}
		rest := inTreeRun{scrapeAlloc: res.scrapeAlloc, apiAlloc: median(allocRates)}
		run, err := measureServer(ctx, cfg, dir, cp, target, pids, probe, sv.name+"-audit", sv.binary, rest)
		if err != nil {
			return fmt.Errorf("%s's audit: %w", sv.name, err)
		}
		res.audits[sv.name] = run
	}
	last, err := cp.apiMetrics(ctx)
	if err != nil {
		return err
	}
	res.gcCPU, res.gcAlloc, res.gcCycles = last.gcCPU-first.gcCPU, last.alloc-first.alloc, last.gcCycles-first.gcCycles
	res.liveHeap = last.liveHeap
	stopChurn()
	res.churnFor, res.churnDone, res.churnFailed = time.Since(churnStart), ch.done.Load(), ch.failed.Load()
	logf("churn: %d EndpointSlice updates in %s (%.2f/s), %d failed or dropped", res.churnDone, res.churnFor.Round(time.Second),
		float64(res.churnDone)/res.churnFor.Seconds(), res.churnFailed)
	return nil
}

// steadyCorefile is a server's Corefile: the plugin line alone, kubetree with its audit off.
func steadyCorefile(plugin, kubeconfig string) func(addr, ready, metrics string) string {
	return func(addr, ready, metrics string) string {
		opts := "kubeconfig " + kubeconfig
		if plugin == "kubetree" {
			opts += "\n        audit_interval 0"
		}
		return fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    ready %s\n    %s cluster.local in-addr.arpa ip6.arpa {\n        %s\n    }\n}\n",
			port(addr), metrics, ready, plugin, opts)
	}
}

// steadyWindowOf starts sv (unless it is no server), waits until it answers and -steady-settle
// more, and measures one window.
func steadyWindowOf(ctx context.Context, cfg *config, dir string, cp *controlPlane, target string, pids map[string]int,
	probe struct{ name, ip string }, ch *steadyChurn, sv steadyServer, round int) (steadyWindow, error) {
	w := steadyWindow{round: round}
	var servers []*server
	var proxies []*countingProxy
	defer func() {
		for _, s := range servers {
			s.stop()
		}
		for _, p := range proxies {
			p.close()
		}
	}()
	if sv.name != "" {
		serverBinary[sv.name] = sv.binary
		w.replicas = cfg.steadyReplicas
		for i := range w.replicas {
			trial := round*w.replicas + i
			p, kc, err := proxied(dir, fmt.Sprintf("%s-%d", sv.name, trial), cp.kubeconfig, target)
			if err != nil {
				return w, err
			}
			proxies = append(proxies, p)
			s, err := startServerConf(ctx, dir, sv.name, trial, steadyCorefile(sv.plugin, kc))
			if err != nil {
				return w, err
			}
			servers = append(servers, s)
		}
		for _, s := range servers {
			st, err := s.waitStartupWithin(ctx, probe.name, probe.ip, 10*time.Minute)
			if err != nil {
				return w, err
			}
			w.answer = max(w.answer, st.answer.Seconds())
		}
	}
	if err := sleep(ctx, cfg.steadySettle); err != nil {
		return w, err
	}
	watchers := func() (cpu, down, up float64, err error) {
		for i, s := range servers {
			c, err := s.cpu()
			if err != nil {
				return 0, 0, 0, err
			}
			cpu += c
			down += float64(proxies[i].down.Load())
			up += float64(proxies[i].up.Load())
		}
		return cpu, down, up, nil
	}
	if err := measureWindow(ctx, cfg.steadyWindow, cp, pids, ch, &w, watchers, fmt.Sprintf("round %d, %s", round+1, serverLabel(sv.name))); err != nil {
		return w, err
	}
	for _, s := range servers {
		if e := s.exited(); e != "" {
			return w, fmt.Errorf("exited during the window: %s", e)
		}
	}
	return w, nil
}

// measureWindow measures one window of d into w: the API server's and etcd's CPU, its collector
// and allocations, the churn's updates, and what watchers reports (their CPU and the bytes their
// proxies carried, so far).
func measureWindow(ctx context.Context, d time.Duration, cp *controlPlane, pids map[string]int, ch *steadyChurn, w *steadyWindow,
	watchers func() (cpu, down, up float64, err error), label string) error {
	type reading struct {
		at                time.Time
		api, etcd, server float64
		metrics           apiCounters
		down, up          float64
		updates, failed   int64
	}
	read := func() (reading, error) {
		var r reading
		var err error
		r.at = time.Now()
		if r.api, err = procCPU(pids["kube-apiserver"]); err != nil {
			return r, err
		}
		if r.etcd, err = procCPU(pids["etcd"]); err != nil {
			return r, err
		}
		if r.server, r.down, r.up, err = watchers(); err != nil {
			return r, err
		}
		r.updates, r.failed = ch.done.Load(), ch.failed.Load()
		r.metrics, err = cp.apiMetrics(ctx)
		return r, err
	}
	r0, err := read()
	if err != nil {
		return err
	}
	w.initial = r0.down
	var perSecond []float64
	tick := time.NewTicker(time.Second)
	prev := r0.api
	for end := r0.at.Add(d); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			tick.Stop()
			return context.Cause(ctx)
		case <-tick.C:
		}
		c, err := procCPU(pids["kube-apiserver"])
		if err != nil {
			tick.Stop()
			return err
		}
		perSecond, prev = append(perSecond, c-prev), c
	}
	tick.Stop()
	r1, err := read()
	if err != nil {
		return err
	}
	w.secs = r1.at.Sub(r0.at).Seconds()
	w.down, w.up = r1.down-r0.down, r1.up-r0.up
	w.apiCPU, w.etcdCPU, w.serverCPU = r1.api-r0.api, r1.etcd-r0.etcd, r1.server-r0.server
	// The seconds sampled, and what the window's end added after the last of them.
	w.steadyCPU = trimmedCPU(perSecond) + (r1.api - prev)
	w.gcCPU, w.alloc = r1.metrics.gcCPU-r0.metrics.gcCPU, r1.metrics.alloc-r0.metrics.alloc
	w.updates, w.failed = r1.updates-r0.updates, r1.failed-r0.failed
	logf("%s: %.2f updates/s; the API server sent %s/s, used %.3f CPU s/s (%.3f outside its busiest seconds; its collector %.3f by its own count), allocated %s/s",
		label, float64(w.updates)/w.secs, human(w.down/w.secs), w.apiCPU/w.secs, w.steadyCPU/w.secs, w.gcCPU/w.secs, human(w.alloc/w.secs))
	return nil
}

func serverLabel(name string) string {
	switch name {
	case "":
		return "no server"
	case "kubernetes":
		return "kubernetes (in-tree)"
	}
	return name
}

// steadyChurn updates EndpointSlices at a steady rate, each update as the EndpointSlice
// controller writes it for one pod: in turn, an endpoint loses its readiness, regains it, and its
// pod is replaced by one with a new name, UID, node and address. Every update is stamped with its
// trigger time. Services are taken round-robin, so a slice is rarely written twice in a row.
type steadyChurn struct {
	cl           *cluster
	rate         int
	done, failed atomic.Int64
	mu           []sync.Mutex                 // by service: one writer at a time
	slices       []*discoveryv1.EndpointSlice // by service, as last written; nil until then
	replaced     atomic.Int64                 // pods replaced so far, for their new addresses
}

func newSteadyChurn(cl *cluster, rate int) *steadyChurn {
	return &steadyChurn{cl: cl, rate: rate, mu: make([]sync.Mutex, len(cl.services)), slices: make([]*discoveryv1.EndpointSlice, len(cl.services))}
}

// replacedIP is the address of the n-th replacement pod: 10.224.0.0/11, clear of podIP's first
// 4M, movedIP's and -fleet's.
func replacedIP(n int) string { return podIP(6<<20 + n%(2<<20)) }

// update makes the n-th change: service n%len, endpoint (n/len)%endpoints; what happens to the
// endpoint goes round not-ready, ready, replaced with each pass over the services.
func (c *steadyChurn) update(ctx context.Context, writer kubernetes.Interface, n int) error {
	i := n % len(c.cl.services)
	s := c.cl.services[i]
	pass := n / len(c.cl.services)
	j := pass % c.cl.endpoints
	c.mu[i].Lock()
	defer c.mu[i].Unlock()
	slice := c.slices[i]
	if slice == nil {
		slice, _ = benchSlice(s, s.ips, true)
	} else {
		slice = slice.DeepCopy()
	}
	e := &slice.Endpoints[j]
	switch (pass / c.cl.endpoints) % 3 {
	case 0: // the pod's readiness probe fails
		e.Conditions.Ready, e.Conditions.Serving = ptr(false), ptr(false)
	case 1: // and passes again
		e.Conditions.Ready, e.Conditions.Serving = ptr(true), ptr(true)
	case 2: // the pod is replaced
		m := int(c.replaced.Add(1))
		e.Addresses = []string{replacedIP(m)}
		e.Conditions.Ready, e.Conditions.Serving, e.Conditions.Terminating = ptr(true), ptr(true), ptr(false)
		e.NodeName = ptr(fmt.Sprintf("node-%04d", m%5000))
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: s.ns,
			Name: fmt.Sprintf("%s-7d9f8b6c5d-r%05d", s.name, m), UID: uuid.NewUUID()}
	}
	slice.Annotations[corev1.EndpointsLastChangeTriggerTime] = time.Now().UTC().Format(time.RFC3339Nano)
	slice.ResourceVersion = "" // unconditional: the bench is the slices' only writer
	written, err := writer.DiscoveryV1().EndpointSlices(s.ns).Update(ctx, slice, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
	if err != nil {
		return err
	}
	c.slices[i] = written
	return nil
}

// run updates at c.rate a second until stop; what the writers cannot keep up with is counted as
// failed (the achieved rate is reported).
// startChurn starts the churn at rate updates a second; stop ends it and waits for its writers.
func startChurn(ctx context.Context, cl *cluster, writer kubernetes.Interface, rate int) (ch *steadyChurn, stop func()) {
	logf("== EndpointSlice updates at %d a second from now on", rate)
	ch = newSteadyChurn(cl, rate)
	done := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { ch.run(ctx, writer, done) })
	return ch, sync.OnceFunc(func() {
		close(done)
		bg.Wait()
	})
}

func (c *steadyChurn) run(ctx context.Context, writer kubernetes.Interface, stop chan struct{}) {
	tokens := make(chan int, 64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for n := range tokens {
				if err := c.update(ctx, writer, n); err != nil {
					if c.failed.Add(1) <= 3 && ctx.Err() == nil {
						logf("churn: %v", err)
					}
				} else {
					c.done.Add(1)
				}
			}
		})
	}
	paceTokens(ctx, stop, tokens, c.rate, &c.failed)
	wg.Wait()
}

// steadyFigures are one server's medians, per second.
type steadyFigures struct {
	down      float64 // bytes the API server sent
	cpu       float64 // API server CPU attributable to the replica (less the no-server window's), collector charged by allocation
	rawCPU    float64 // the same from the windows' CPU as measured, collector included as it fell
	perRound  []float64
	serverCPU float64
	// cpuPerUpdate is the API server CPU per EndpointSlice update attributable to the replica: the
	// window's CPU per update less the no-server window's, per replica. Where the churn's rate
	// differs between windows (the machine behind), it holds where the per-second figure does not.
	cpuPerUpdate float64
}

// figures are sv's medians over the rounds; the CPU is each round's less that round's no-server
// window's.
func (res *steadyResult) figures(name string) steadyFigures {
	gcb := res.gcPerByte()
	none := res.windows[""]
	var f steadyFigures
	var down, cpu, raw, own, perUpdate []float64
	for i, w := range res.windows[name] {
		down = append(down, w.perReplica(w.down/w.secs))
		own = append(own, w.perReplica(w.serverCPU/w.secs))
		if i < len(none) {
			n := none[i]
			cpu = append(cpu, w.perReplica(w.charged(gcb)/w.secs-n.charged(gcb)/n.secs))
			raw = append(raw, w.perReplica(w.apiCPU/w.secs-n.apiCPU/n.secs))
			if w.updates > 0 && n.updates > 0 {
				perUpdate = append(perUpdate, w.perReplica(w.charged(gcb)/float64(w.updates)-n.charged(gcb)/float64(n.updates)))
			}
		}
	}
	f.down, f.cpu, f.rawCPU, f.serverCPU, f.perRound = median(down), median(cpu), median(raw), median(own), cpu
	f.cpuPerUpdate = median(perUpdate)
	return f
}

// auditCost is one audit's bytes and API server CPU (its window's and the collector's share).
func (res *steadyResult) auditCost(name string) (bytes, cpu float64, ok bool) {
	r := res.audits[name]
	if r == nil {
		return 0, 0, false
	}
	return r.median(func(a auditWindow) float64 { return a.down }), r.apiCPU(res.gcPerByte()), true
}

// hourly is a kubetree build's bytes and CPU per replica-hour with an audit every iv (0: none).
func (res *steadyResult) hourly(name string, iv time.Duration) (bytes, cpu float64) {
	f := res.figures(name)
	bytes, cpu = f.down*3600, f.cpu*3600
	if ab, ac, ok := res.auditCost(name); ok && iv > 0 {
		k := 3600 / iv.Seconds()
		bytes, cpu = bytes+ab*k, cpu+ac*k
	}
	return bytes, cpu
}

// meets is the shortest interval of steadyIntervals at which name costs at most steadyGoal times
// the in-tree replica in bytes, and in CPU too unless bytesOnly; 0 and false if none.
func (res *steadyResult) meets(name string, bytesOnly bool) (time.Duration, bool) {
	base := res.figures("kubernetes")
	for _, iv := range steadyIntervals {
		b, c := res.hourly(name, iv)
		if b <= steadyGoal*base.down*3600 && (bytesOnly || c <= steadyGoal*base.cpu*3600) {
			return iv, true
		}
	}
	return 0, false
}

// cpuResolved says whether the in-tree replica's CPU came out above the API server's own variation
// (positive): below it, no ratio to it means anything, and the CPU half of the goal is not judged.
func (res *steadyResult) cpuResolved() bool { return res.figures("kubernetes").cpu > 0 }

func (res *steadyResult) markdown(cfg *config) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m, cl := res.machine, res.cluster
	p("# What a replica costs the API server under steady churn\n\n")
	p("Written by `bench/` (see README.md); committed output of one run.\n\n")
	cmd := fmt.Sprintf("cd bench && go run . -steady -services %d -endpoints %d -headless %.2f -steady-rate %d -steady-window %s -steady-rounds %d -steady-replicas %d -audits %d -audit-interval %s",
		cfg.services, cfg.endpoints, cfg.headless, cfg.steadyRate, cfg.steadyWindow, cfg.steadyRounds, cfg.steadyReplicas, cfg.audits, cfg.auditInterval)
	var extra []string
	for _, sv := range cfg.steadyKubetree {
		extra = append(extra, sv.name+"="+sv.binary)
	}
	if len(extra) > 0 {
		cmd += " -steady-kubetree " + strings.Join(extra, ",")
	}
	p("- command: `%s`\n", cmd)
	p("- date: %s (run took %s)\n", res.began.UTC().Format("2006-01-02 15:04 MST"), res.ended.Sub(res.began).Round(time.Second))
	p("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s, shared with other work; load average at the start %s, at the end %s\n",
		m.nproc, m.cpu, m.memory, m.kernel, m.loadStart, loadavg())
	p("- versions: kube-apiserver %s (etcd and kube-apiserver from `make control-plane`), %s\n", res.version, m.coredns)
	p("- bin/coredns (kubernetes and kubetree): %s; built from %s\n", m.source, res.sources["kubetree"])
	for _, sv := range cfg.steadyKubetree {
		p("- %s: `%s`, built from %s\n", sv.name, sv.binary, res.sources[sv.name])
	}
	p("- cluster: %d namespaces, %d services (%d headless), each with one EndpointSlice of %d endpoints as the EndpointSlice controller writes them: %d endpoints, %d API objects\n",
		len(cl.namespaces), len(cl.services), cl.headless, cl.endpoints, len(cl.services)*cl.endpoints, cl.objects)
	p("- churn: %d EndpointSlice updates a second throughout (achieved %.2f/s over %s, %d failed or dropped), protobuf, each one endpoint of one slice as the controller writes it: its pod not ready, ready again, or replaced (new name, UID, node and address), stamped with its trigger time; services taken round-robin\n\n",
		cfg.steadyRate, float64(res.churnDone)/res.churnFor.Seconds(), res.churnFor.Round(time.Second), res.churnFailed)

	gcb := res.gcPerByte()
	names := []string{}
	for _, sv := range res.servers {
		names = append(names, sv.name)
	}
	p("## The watches under churn\n\n")
	p("One server at a time talks to the API server, in %d replica(s), each through a TCP proxy that counts the bytes each way (TLS records included); kubetree with `audit_interval 0`. ", cfg.steadyReplicas)
	p("In each of %d rounds: %s, then no server, each for a window of %s from %s after every replica answered (the initial lists are not in the window). ",
		cfg.steadyRounds, strings.Join(names, ", "), cfg.steadyWindow, cfg.steadySettle)
	p("CPU is utime+stime from /proc, read every second. The API server collects garbage once its heap has grown by about as much as is live (%s here, the watch cache), then for a second or more, so a window may hold one collection, two or none: ", human(res.liveHeap))
	p("the busiest %.0f%% of a window's seconds are counted at the mean of its others, and the collector is charged instead by what the window allocated (go_gc_heap_allocs_bytes_total), at its CPU per allocated byte over the run by its runtime's count (go_cpu_classes_gc_total_cpu_seconds_total): %.3f s for %s (%.0f cycles), %.2f s per GB. ",
		steadyTrim*100, res.gcCPU, human(res.gcAlloc), res.gcCycles, gcb*1e9)
	p("A replica's CPU is its window's less the no-server window's of the same round (the churn's own cost), divided by the replicas; the median of the rounds.\n\n")
	p("| per replica-hour | %s |\n| --- |%s\n", strings.Join(names, " | "), strings.Repeat(" ---: |", len(names)))
	row := func(what string, f func(string) string) {
		p("| %s |", what)
		for _, n := range names {
			p(" %s |", f(n))
		}
		p("\n")
	}
	row("bytes sent by the API server (through the proxy)", func(n string) string { return human(res.figures(n).down * 3600) })
	row("&nbsp;&nbsp;per EndpointSlice update", func(n string) string {
		return human(res.figures(n).down / res.rate(n))
	})
	row("**API server CPU** (busiest seconds out, collector charged by allocation)", func(n string) string { return fmt.Sprintf("%.1f s", res.figures(n).cpu*3600) })
	row("&nbsp;&nbsp;each round", func(n string) string {
		var v []string
		for _, c := range res.figures(n).perRound {
			v = append(v, fmt.Sprintf("%.1f", c*3600))
		}
		return strings.Join(v, ", ")
	})
	row("API server CPU per EndpointSlice update (each window's per update, less no server's)", func(n string) string {
		return fmt.Sprintf("%.1f µs", res.figures(n).cpuPerUpdate*1e6)
	})
	row("API server CPU, the windows' as measured (collector as it fell)", func(n string) string { return fmt.Sprintf("%.1f s", res.figures(n).rawCPU*3600) })
	row("the server's own CPU", func(n string) string { return fmt.Sprintf("%.1f s", res.figures(n).serverCPU*3600) })
	row("initial list (bytes before the window, once)", func(n string) string {
		var v []float64
		for _, w := range res.windows[n] {
			v = append(v, w.perReplica(w.initial))
		}
		return human(median(v))
	})
	row("from exec to the first right answer", func(n string) string {
		var v []float64
		for _, w := range res.windows[n] {
			v = append(v, w.answer)
		}
		return fmt.Sprintf("%.1f s", median(v))
	})
	base := res.figures("kubernetes")
	row("bytes / in-tree", func(n string) string { return ratio(res.figures(n).down, base.down) })
	row("CPU / in-tree", func(n string) string { return ratio(res.figures(n).cpu, base.cpu) })
	p("\n")

	p("Every window (per second, its replicas together): the churn achieved, bytes the API server sent through the proxy, its CPU as measured, the same with its busiest seconds at the mean of the others, its collector's by its runtime's count (an estimate from the time its workers were scheduled, which on a busy machine runs high), its allocations, its CPU with the collector charged by allocation, etcd's and the server's CPU.\n\n")
	p("| round | server | updates/s | bytes/s | API server CPU | outside the busiest seconds | collector (its count) | allocated/s | charged CPU | etcd CPU | server CPU |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for round := range cfg.steadyRounds {
		for _, sv := range append(slices.Clone(res.servers), steadyServer{}) {
			ws := res.windows[sv.name]
			if round >= len(ws) {
				continue
			}
			w := ws[round]
			p("| %d | %s | %.2f | %s | %.4f | %.4f | %.4f | %s | %.4f | %.4f | %.4f |\n", round+1, serverLabel(sv.name), float64(w.updates)/w.secs,
				human(w.down/w.secs), w.apiCPU/w.secs, w.steadyCPU/w.secs, w.gcCPU/w.secs, human(w.alloc/w.secs), w.charged(gcb)/w.secs, w.etcdCPU/w.secs, w.serverCPU/w.secs)
		}
	}
	p("\n")

	p("## The audit under the same churn\n\n")
	p("Each kubetree build once more, with `audit_interval %s`: its first audit not counted, the next %d measured as `-audit` measures them (AUDIT.md): bytes through the proxy and the API server's CPU in each audit's window (%s before it to %s after it), less the rates between audits (the watches and the churn), the median; its allocations per audit, less the rate of the build's windows above, charged at the collector's rate.\n\n",
		cfg.auditInterval, cfg.audits, auditLead, auditTail)
	p("| per audit | bytes sent by the API server | API server CPU in the window | heap allocated | CPU with the collector's share | duration |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	var notInStep []string
	for _, sv := range res.servers {
		r := res.audits[sv.name]
		if r == nil {
			continue
		}
		p("| %s | %s | %.3f s | %s | %.3f s | %.3f s |\n", sv.name, human(r.median(func(a auditWindow) float64 { return a.down })),
			r.median(func(a auditWindow) float64 { return a.apiCPU }), human(r.alloc), r.apiCPU(gcb), r.median(func(a auditWindow) float64 { return a.took.Seconds() }))
		if len(r.other) > 0 {
			notInStep = append(notInStep, fmt.Sprintf("%s: audits that did not find the cluster in step: %q\n\n", sv.name, r.other))
		}
	}
	p("\n%s", strings.Join(notInStep, ""))

	p("## Per replica-hour, with the audit\n\n")
	p("A kubetree replica's watches (above) plus an hour of audits at each interval (its waits are drawn from ±20%% of it: 3600/interval audits an hour on average), against the in-tree replica's watches: %s and %.1f s of API server CPU an hour. The goal: at most %.2f× in both.\n\n",
		human(base.down*3600), base.cpu*3600, steadyGoal)
	p("| server | audit interval | bytes / replica-hour | / in-tree | API server CPU / replica-hour | / in-tree | both ≤ %.2f× |\n| --- | ---: | ---: | ---: | ---: | ---: | :---: |\n", steadyGoal)
	for _, sv := range res.servers {
		if sv.plugin != "kubetree" {
			continue
		}
		for _, iv := range append([]time.Duration{0}, steadyIntervals...) {
			bytes, cpu := res.hourly(sv.name, iv)
			ivs := "no audit"
			if iv > 0 {
				ivs = shortDuration(iv)
			}
			ok := "no"
			switch {
			case !res.cpuResolved() && bytes <= steadyGoal*base.down*3600:
				ok = "bytes yes, CPU not resolved"
			case !res.cpuResolved():
				ok = "bytes no"
			case bytes <= steadyGoal*base.down*3600 && cpu <= steadyGoal*base.cpu*3600:
				ok = "yes"
			}
			p("| %s | %s | %s | %s | %.1f s | %s | %s |\n", sv.name, ivs, human(bytes), ratio(bytes, base.down*3600), cpu, ratio(cpu, base.cpu*3600), ok)
		}
	}
	p("\n")
	for _, sv := range res.servers {
		if sv.plugin != "kubetree" {
			continue
		}
		switch iv, ok := res.meets(sv.name, !res.cpuResolved()); {
		case !res.cpuResolved() && ok:
			p("- %s: the shortest interval of %s that meets the goal in bytes is **%s**; CPU not judged: the in-tree replica's CPU did not come out above the API server's own variation in this run.\n", sv.name, intervalList(), shortDuration(iv))
		case !res.cpuResolved():
			p("- %s: no interval of %s meets the goal in bytes; CPU not judged: the in-tree replica's CPU did not come out above the API server's own variation in this run.\n", sv.name, intervalList())
		case ok:
			p("- %s: the shortest interval of %s that meets the goal in both bytes and CPU is **%s**.\n", sv.name, intervalList(), shortDuration(iv))
		default:
			p("- %s: no interval of %s meets the goal in both bytes and CPU.\n", sv.name, intervalList())
		}
	}
	p("\n")
	return b.String()
}

// rate is the churn achieved over name's windows, updates a second.
func (res *steadyResult) rate(name string) float64 {
	var v []float64
	for _, w := range res.windows[name] {
		v = append(v, float64(w.updates)/w.secs)
	}
	return median(v)
}

func intervalList() string {
	var v []string
	for _, iv := range steadyIntervals {
		v = append(v, shortDuration(iv))
	}
	return strings.Join(v, ", ")
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f", a/b)
}
