package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
)

// What kubetree's audit costs the API server (-audit). On one synthetic cluster (EndpointSlices as
// the EndpointSlice controller writes them, -controller-slices), one server at a time talks to the
// API server through a counting TCP proxy of its own:
//
//  1. the in-tree kubernetes plugin: the bytes of its initial list, then -audit-idle of its watches
//     alone, which is all it asks for after that list;
//  2. with -audit-before, kubetree built before the metadata-only audit; then bin/coredns's. Each
//     runs with audit_interval -audit-interval; the first audit is not counted, the next -audits are;
//  3. the audit's metadata lists asked for directly: one list per resource uncompressed, and
//     gzip-compressed (as kubetree asks), and in pages of 500, with the resources unchanged for
//     minutes and just changed: what compression and paging would trade.
//
// Per audit: the bytes the API server sent through the proxy (TLS records included), the bytes of
// its LIST responses and their number (its own metrics, apiserver_response_sizes and
// apiserver_request_total), and CPU. The CPU of kube-apiserver, etcd and kubetree (utime+stime,
// sampled every 50 ms) is taken in the audit's window, from 0.5 s before it starts (its log line
// gives its end and duration) to 2 s after it ends, less what each used per second between
// audits; the median of the audits. That leaves out most of the API server's garbage collection,
// which runs when its heap has grown by as much as is live (~1 GB here: the watch cache), so rarely
// within a window and then for a second or more. Its share is charged by what the audit allocates:
// the API server's heap allocations per audit (go_gc_heap_allocs_bytes_total, less the rate at
// rest) times the collector's CPU per allocated byte over the whole run
// (go_cpu_classes_gc_total_cpu_seconds_total). Per replica-hour: an audit's bytes and CPU times the
// audits an hour at a given interval.

// Window margins around an audit, for the CPU its requests cost.
const (
	auditLead = 500 * time.Millisecond
	auditTail = 2 * time.Second
)

// auditCandidates are the intervals the report computes hourly figures at.
var auditCandidates = []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute}

// auditResult is the whole run.
type auditResult struct {
	cluster *cluster
	machine machine
	version string
	began   time.Time
	ended   time.Time
	inTree  inTreeRun
	runs    []*auditRun // before (with -audit-before), after
	// The audit's metadata lists asked for directly, by page size and compression, after no object
	// changed for quietFor.
	passes   []listPass
	quietFor time.Duration
	// The API server's collector over the whole measurement.
	gcCPU, gcAlloc, gcCycles float64
	liveHeap                 float64
}

// gcPerByte is the API server's collector CPU per byte it allocated, over the measurement.
func (res *auditResult) gcPerByte() float64 {
	if res.gcAlloc <= 0 {
		return 0
	}
	return res.gcCPU / res.gcAlloc
}

// inTreeRun is the in-tree plugin: its initial list and its watches idling.
type inTreeRun struct {
	initial   float64       // bytes the API server sent from start until 5 s after ready
	idleBytes float64       // bytes sent during the idle period
	idleFor   time.Duration // its length
	apiCPU    float64       // kube-apiserver CPU seconds per second meanwhile
	apiAlloc  float64       // kube-apiserver heap bytes allocated per second meanwhile
	// What one scrape of the API server's /metrics makes it allocate: two readings of its
	// allocation counter always have one scrape's worth between them.
	scrapeAlloc float64
}

// auditRun is one kubetree's audits.
type auditRun struct {
	name     string
	binary   string
	initial  float64 // bytes the API server sent from start until ready (the initial list)
	audits   []auditWindow
	lists    map[string]float64 // LIST requests per audit, by resource (the API server's count)
	listSize map[string]float64 // LIST response bytes per audit, by resource (the API server's count)
	alloc    float64            // the API server's heap allocations per audit, less its rate at rest
	idle     rates              // per second between audits
	other    []string           // audit log lines other than "in step"
}

// auditWindow is one audit: when it ended, how long it said it took, and what each counter moved
// in its window, less the idle rate.
type auditWindow struct {
	end       time.Time
	took      time.Duration
	down, up  float64 // bytes from / to the API server
	apiCPU    float64 // seconds
	etcdCPU   float64
	serverCPU float64
}

// rates is what each counter moves per second.
type rates struct{ down, up, apiCPU, etcdCPU, serverCPU float64 }

// listPass is what one pass of the audit's metadata lists, asked for directly, cost.
type listPass struct {
	page     int64 // 0: one list, as kubetree asks
	gzip     bool
	changed  bool // each resource changed just before
	passes   int
	requests int
	bytes    float64 // sent by the API server, per pass
	apiCPU   float64 // its CPU seconds per pass (median), less its rate at rest
	alloc    float64 // its heap allocations per pass
}

func runAudit(ctx context.Context, cfg *config) error {
	began := time.Now()
	coreDNSBinary = filepath.Join(cfg.root, "bin/coredns")
	for _, b := range append([]string{coreDNSBinary}, cfg.auditBefore) {
		if b == "" {
			continue
		}
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s missing (`make build` in %s; -audit-before: see README.md): %w", b, cfg.root, err)
		}
	}
	return withControlPlane(ctx, cfg, "kubetree-bench-audit-", func(dir string, cp *controlPlane) error {
		res := &auditResult{machine: machineInfo(cfg.root), version: cp.version, began: began}
		logf("== create the cluster")
		cl, err := populate(ctx, cp, cfg, nil)
		if err != nil {
			return err
		}
		res.cluster = cl
		if err := measureAudits(ctx, cfg, dir, cp, res); err != nil {
			return err
		}
		res.ended = time.Now()
		report := res.markdown(cfg)
		return publish(cfg, report)
	})
}

func measureAudits(ctx context.Context, cfg *config, dir string, cp *controlPlane, res *auditResult) error {
	target, pids, err := cp.processes()
	if err != nil {
		return err
	}
	probe := res.cluster.probe()
	first, err := cp.apiMetrics(ctx)
	if err != nil {
		return err
	}

	// The in-tree plugin: its initial list, then its watches alone.
	logf("== the in-tree kubernetes plugin: initial list, then %s of watches", cfg.auditIdle)
	proxy, kubeconfig, err := proxied(dir, "kubernetes", cp.kubeconfig, target)
	if err != nil {
		return err
	}
	defer proxy.close()
	s, err := startServer(ctx, dir, "kubernetes", 0, kubeconfig)
	if err != nil {
		return err
	}
	defer s.stop()
	if _, err := s.waitStartup(ctx, probe.name, probe.ip); err != nil {
		return err
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	res.inTree.initial = float64(proxy.down.Load())
	api0, err := procCPU(pids["kube-apiserver"])
	if err != nil {
		return err
	}
	m0, scrape, err := cp.scrapeCost(ctx)
	if err != nil {
		return err
	}
	res.inTree.scrapeAlloc = scrape
	start, down0 := time.Now(), proxy.down.Load()
	if err := sleep(ctx, cfg.auditIdle); err != nil {
		return err
	}
	res.inTree.idleFor = time.Since(start)
	res.inTree.idleBytes = float64(proxy.down.Load() - down0)
	api1, err := procCPU(pids["kube-apiserver"])
	if err != nil {
		return err
	}
	m1, err := cp.apiMetrics(ctx)
	if err != nil {
		return err
	}
	res.inTree.apiCPU = (api1 - api0) / res.inTree.idleFor.Seconds()
	// Since the second reading (m0's allocations and one scrape's), less the scrape of m1.
	res.inTree.apiAlloc = (m1.alloc - (m0.alloc + scrape) - scrape) / res.inTree.idleFor.Seconds()
	logf("kubernetes: initial list %s, then %.0f bytes in %s", mib(res.inTree.initial), res.inTree.idleBytes, res.inTree.idleFor.Round(time.Second))
	s.stop()
	proxy.close()

	var servers [][2]string
	if cfg.auditBefore != "" {
		servers = append(servers, [2]string{"kubetree-before", cfg.auditBefore})
	}
	servers = append(servers, [2]string{"kubetree", coreDNSBinary})
	for _, sv := range servers {
		run, err := measureServer(ctx, cfg, dir, cp, target, pids, probe, sv[0], sv[1], res.inTree)
		if err != nil {
			return fmt.Errorf("%s: %w", sv[0], err)
		}
		res.runs = append(res.runs, run)
	}
	res.quietFor = time.Since(res.cluster.done)
	logf("== the audit's metadata lists, asked for directly (no object changed for %s)", res.quietFor.Round(time.Second))
	for _, v := range []listPass{{}, {gzip: true}, {page: 500}, {page: 500, changed: true}} {
		if v.changed {
			// One change to each resource: its watch cache keeps a snapshot at that revision, from
			// which it can serve the pages after the first.
			if err := touch(ctx, cp, res.cluster); err != nil {
				return err
			}
		}
		pass, err := measureListPasses(ctx, dir, cp, target, pids["kube-apiserver"], res.inTree, v, cfg.audits)
		if err != nil {
			return err
		}
		res.passes = append(res.passes, pass)
	}
	last, err := cp.apiMetrics(ctx)
	if err != nil {
		return err
	}
	res.gcCPU, res.gcAlloc, res.gcCycles = last.gcCPU-first.gcCPU, last.alloc-first.alloc, last.gcCycles-first.gcCycles
	res.liveHeap = last.liveHeap
	return nil
}

// touch changes an annotation of one namespace, one service and one EndpointSlice of cl.
func touch(ctx context.Context, cp *controlPlane, cl *cluster) error {
	s := cl.services[0]
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"kubetree.bench/touched":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	if _, err := cp.client.CoreV1().Namespaces().Patch(ctx, s.ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	if _, err := cp.client.CoreV1().Services(s.ns).Patch(ctx, s.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	_, err := cp.client.DiscoveryV1().EndpointSlices(s.ns).Patch(ctx, s.name+"-bench", types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// measureListPasses lists what kubetree's audit lists (the names and versions of every service,
// EndpointSlice and namespace, protobuf) as v says (in one list, or in pages; gzip asked for or
// not), v.passes times, through a counting proxy; one pass at a time, with the API server's CPU
// rate at rest measured before and subtracted.
func measureListPasses(ctx context.Context, dir string, cp *controlPlane, target string, apiPID int, rest inTreeRun, v listPass, n int) (listPass, error) {
	out := v
	out.passes = n
	page, gz := v.page, v.gzip
	name := fmt.Sprintf("lists-%d-gzip-%v-changed-%v", page, gz, v.changed)
	proxy, kc, err := proxied(dir, name, cp.kubeconfig, target)
	if err != nil {
		return out, err
	}
	defer proxy.close()
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return out, err
	}
	rc.QPS, rc.Burst = 1000, 1000
	rc.DisableCompression = !gz
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return out, err
	}
	c0, err := procCPU(apiPID)
	if err != nil {
		return out, err
	}
	if err := sleep(ctx, 10*time.Second); err != nil {
		return out, err
	}
	c1, err := procCPU(apiPID)
	if err != nil {
		return out, err
	}
	restCPU := (c1 - c0) / 10
	m0, err := cp.apiMetrics(ctx)
	if err != nil {
		return out, err
	}
	var cpus []float64
	t0 := time.Now()
	for range n {
		if err := sleep(ctx, time.Second); err != nil {
			return out, err
		}
		c0, err := procCPU(apiPID)
		if err != nil {
			return out, err
		}
		b0, start := proxy.down.Load(), time.Now()
		out.requests = 0
		for _, r := range auditedResources {
			opts := metav1.ListOptions{Limit: page}
			for {
				l, err := md.Resource(r).List(ctx, opts)
				if err != nil {
					return out, err
				}
				out.requests++
				if opts.Continue = l.Continue; opts.Continue == "" {
					break
				}
			}
		}
		took := time.Since(start)
		if err := sleep(ctx, auditTail); err != nil { // as in the audits' windows
			return out, err
		}
		c1, err := procCPU(apiPID)
		if err != nil {
			return out, err
		}
		out.bytes += float64(proxy.down.Load() - b0)
		cpus = append(cpus, c1-c0-restCPU*(took+auditTail).Seconds())
	}
	m1, err := cp.apiMetrics(ctx)
	if err != nil {
		return out, err
	}
	out.bytes /= float64(n)
	out.apiCPU = median(cpus)
	out.alloc = (m1.alloc - m0.alloc - rest.scrapeAlloc - rest.apiAlloc*time.Since(t0).Seconds()) / float64(n)
	logf("%s: %s, %.3f s of the API server's CPU and %s of its heap a pass", out.label(), human(out.bytes), out.apiCPU, human(out.alloc))
	return out, nil
}

// auditedResources are what kubetree's audit lists by default.
var auditedResources = []schema.GroupVersionResource{
	corev1.SchemeGroupVersion.WithResource("services"),
	corev1.SchemeGroupVersion.WithResource("namespaces"),
	discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
}

// measureServer runs one kubetree with the audit on, and measures -audits audits after the first.
// rest has the API server's heap allocation at rest and per scrape of its metrics.
func measureServer(ctx context.Context, cfg *config, dir string, cp *controlPlane, target string, pids map[string]int,
	probe struct{ name, ip string }, name, binary string, rest inTreeRun) (*auditRun, error) {
	logf("== %s (%s): %d audits every %s", name, binary, cfg.audits, cfg.auditInterval)
	run := &auditRun{name: name, binary: binary}
	proxy, kubeconfig, err := proxied(dir, name, cp.kubeconfig, target)
	if err != nil {
		return nil, err
	}
	defer proxy.close()
	serverBinary[name] = binary
	s, err := startServerConf(ctx, dir, name, 0, func(addr, ready, metrics string) string {
		return fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    ready %s\n    kubetree cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig %s\n        audit_interval %s\n    }\n}\n",
			port(addr), metrics, ready, kubeconfig, cfg.auditInterval)
	})
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if _, err := s.waitStartup(ctx, probe.name, probe.ip); err != nil {
		return nil, err
	}
	run.initial = float64(proxy.down.Load())
	smp := startSampler(map[string]int{"kube-apiserver": pids["kube-apiserver"], "etcd": pids["etcd"], "server": s.cmd.Process.Pid}, proxy)
	defer smp.stop()
	follow := newLogFollower(s.log)

	// The first audit is not counted: it may overlap the end of start-up.
	if _, err := follow.next(ctx, s, 3*cfg.auditInterval); err != nil {
		return nil, err
	}
	m0, err := cp.apiMetrics(ctx)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	for len(run.audits) < cfg.audits {
		a, err := follow.next(ctx, s, 3*cfg.auditInterval+time.Minute)
		if err != nil {
			return nil, err
		}
		if !a.inStep {
			run.other = append(run.other, a.line)
		}
		run.audits = append(run.audits, auditWindow{end: a.end, took: a.took})
		logf("%s: audit %d took %s", name, len(run.audits), a.took)
	}
	if err := sleep(ctx, auditTail+500*time.Millisecond); err != nil {
		return nil, err
	}
	m1, err := cp.apiMetrics(ctx)
	if err != nil {
		return nil, err
	}
	span := time.Since(t0)
	smp.stop()
	run.lists, run.listSize = map[string]float64{}, map[string]float64{}
	n := float64(len(run.audits))
	for r, v := range m1.lists {
		if d := v - m0.lists[r]; d > 0 {
			run.lists[r] = d / n
		}
	}
	for r, v := range m1.sizes {
		if d := v - m0.sizes[r]; d > 0 {
			run.listSize[r] = d / n
		}
	}
	run.alloc = (m1.alloc - m0.alloc - rest.scrapeAlloc - rest.apiAlloc*span.Seconds()) / n
	run.windows(smp.samples())
	logf("%s: per audit %s sent by the API server, %.2f s of its CPU in the window (median), %s of its heap allocated", name,
		human(run.median(func(a auditWindow) float64 { return a.down })), run.median(func(a auditWindow) float64 { return a.apiCPU }), human(run.alloc))
	return run, nil
}

// windows fills in each audit's counters from the samples: what moved in its window, less the
// rate between audits times the window's length.
func (r *auditRun) windows(samples []sample) {
	type span struct{ from, to time.Time }
	var busy []span
	for _, a := range r.audits {
		busy = append(busy, span{a.end.Add(-a.took - auditLead), a.end.Add(auditTail)})
	}
	// Idle: from the end of each window to the start of the next.
	var idle sample
	var idleFor float64
	for i := 0; i+1 < len(busy); i++ {
		d := diff(at(samples, busy[i].to), at(samples, busy[i+1].from))
		idle = idle.plus(d)
		idleFor += busy[i+1].from.Sub(busy[i].to).Seconds()
	}
	if idleFor > 0 {
		r.idle = rates{down: idle.down / idleFor, up: idle.up / idleFor, apiCPU: idle.cpu["kube-apiserver"] / idleFor,
			etcdCPU: idle.cpu["etcd"] / idleFor, serverCPU: idle.cpu["server"] / idleFor}
	}
	for i, b := range busy {
		d := diff(at(samples, b.from), at(samples, b.to))
		secs := b.to.Sub(b.from).Seconds()
		a := &r.audits[i]
		a.down = d.down - r.idle.down*secs
		a.up = d.up - r.idle.up*secs
		a.apiCPU = d.cpu["kube-apiserver"] - r.idle.apiCPU*secs
		a.etcdCPU = d.cpu["etcd"] - r.idle.etcdCPU*secs
		a.serverCPU = d.cpu["server"] - r.idle.serverCPU*secs
	}
}

// median is f's median over the audits.
func (r *auditRun) median(f func(auditWindow) float64) float64 {
	var v []float64
	for _, a := range r.audits {
		v = append(v, f(a))
	}
	return median(v)
}

func (r *auditRun) spread(f func(auditWindow) float64) (lo, hi float64) {
	var v []float64
	for _, a := range r.audits {
		v = append(v, f(a))
	}
	return slices.Min(v), slices.Max(v)
}

// apiCPU is the API server's CPU per audit: the median in the audits' windows, and the collector's
// share of what they allocated.
func (r *auditRun) apiCPU(gcPerByte float64) float64 {
	return r.median(func(a auditWindow) float64 { return a.apiCPU }) + r.alloc*gcPerByte
}

// sample is the counters at one moment: CPU seconds by process, bytes through the proxy.
type sample struct {
	at       time.Time
	cpu      map[string]float64
	down, up float64
}

func diff(a, b sample) sample {
	d := sample{at: b.at, cpu: map[string]float64{}, down: b.down - a.down, up: b.up - a.up}
	for k, v := range b.cpu {
		d.cpu[k] = v - a.cpu[k]
	}
	return d
}

func (s sample) plus(d sample) sample {
	out := sample{cpu: map[string]float64{}, down: s.down + d.down, up: s.up + d.up}
	for k, v := range s.cpu {
		out.cpu[k] = v
	}
	for k, v := range d.cpu {
		out.cpu[k] += v
	}
	return out
}

// at is the last sample taken at or before t (the first if none).
func at(samples []sample, t time.Time) sample {
	i, _ := slices.BinarySearchFunc(samples, t, func(s sample, t time.Time) int {
		if s.at.After(t) {
			return 1
		}
		return -1
	})
	return samples[max(i-1, 0)]
}

// sampler reads the processes' CPU times and the proxy's byte counts every 50 ms.
type sampler struct {
	mu      sync.Mutex
	taken   []sample
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

func startSampler(pids map[string]int, p *countingProxy) *sampler {
	s := &sampler{done: make(chan struct{}), stopped: make(chan struct{})}
	take := func() {
		smp := sample{at: time.Now(), cpu: map[string]float64{}, down: float64(p.down.Load()), up: float64(p.up.Load())}
		for name, pid := range pids {
			if v, err := procCPU(pid); err == nil {
				smp.cpu[name] = v
			}
		}
		s.mu.Lock()
		s.taken = append(s.taken, smp)
		s.mu.Unlock()
	}
	take()
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				take()
				return
			case <-t.C:
				take()
			}
		}
	}()
	return s
}

func (s *sampler) stop() {
	s.once.Do(func() { close(s.done) })
	<-s.stopped
}

func (s *sampler) samples() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.taken)
}

// countingProxy forwards TCP connections from a loopback port to the API server and counts the
// bytes each way.
type countingProxy struct {
	l        net.Listener
	target   string
	down, up atomic.Int64 // from the API server, to it
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	once     sync.Once
}

func newCountingProxy(target string) (*countingProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{l: l, target: target}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *countingProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { copyCounting(out, in, &p.up) })
		p.wg.Go(func() { copyCounting(in, out, &p.down) })
	}
}

// copyCounting copies until either side closes, then closes both.
func copyCounting(dst, src net.Conn, n *atomic.Int64) {
	_, _ = io.Copy(&countingWriter{dst, n}, src)
	dst.Close()
	src.Close()
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

func (p *countingProxy) close() {
	p.once.Do(func() {
		p.l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}

// proxied starts a counting proxy to target and writes a copy of kubeconfig that goes through it.
func proxied(dir, name, kubeconfig, target string) (*countingProxy, string, error) {
	p, err := newCountingProxy(target)
	if err != nil {
		return nil, "", err
	}
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		p.close()
		return nil, "", err
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + p.l.Addr().String()
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		p.close()
		return nil, "", err
	}
	return p, path, nil
}

// processes is the API server's address (host:port, from the kubeconfig) and the PIDs of
// kube-apiserver and etcd.
func (cp *controlPlane) processes() (target string, pids map[string]int, err error) {
	if target, err = apiServerAddr(cp.kubeconfig); err != nil {
		return "", nil, err
	}
	pids = map[string]int{}
	for _, p := range []string{"kube-apiserver", "etcd"} {
		if pids[p], err = readPID(filepath.Join(cp.dir, p+".pid")); err != nil {
			return "", nil, err
		}
	}
	return target, pids, nil
}

// scrapeCost reads the API server's metrics twice: the first reading, and what one scrape made
// it allocate (two readings of its allocation counter always have one scrape's worth between them).
func (cp *controlPlane) scrapeCost(ctx context.Context) (apiCounters, float64, error) {
	first, err := cp.apiMetrics(ctx)
	if err != nil {
		return first, 0, err
	}
	second, err := cp.apiMetrics(ctx)
	if err != nil {
		return first, 0, err
	}
	return first, second.alloc - first.alloc, nil
}

// apiServerAddr is host:port of the API server in kubeconfig's current context.
func apiServerAddr(kubeconfig string) (string, error) {
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", err
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return "", fmt.Errorf("%s: no current context", kubeconfig)
	}
	c, ok := kc.Clusters[ctx.Cluster]
	if !ok {
		return "", fmt.Errorf("%s: no cluster %q", kubeconfig, ctx.Cluster)
	}
	u, err := url.Parse(c.Server)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// apiCounters are the API server's own counters at one moment.
type apiCounters struct {
	lists, sizes           map[string]float64 // LIST requests and response bytes so far, by resource
	alloc, gcCPU, gcCycles float64            // heap bytes allocated, the collector's CPU seconds, its cycles
	liveHeap               float64            // the heap live after the last collection
}

// apiMetrics reads the API server's counters from its /metrics.
func (cp *controlPlane) apiMetrics(ctx context.Context) (apiCounters, error) {
	c := apiCounters{lists: map[string]float64{}, sizes: map[string]float64{}}
	raw, err := cp.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return c, fmt.Errorf("the API server's metrics: %w", err)
	}
	resource := regexp.MustCompile(`[{,]resource="([^"]*)"`)
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "go_gc_heap_allocs_bytes_total":
			c.alloc = v
		case "go_cpu_classes_gc_total_cpu_seconds_total":
			c.gcCPU = v
		case "go_gc_cycles_total_gc_cycles_total":
			c.gcCycles = v
		case "go_gc_heap_live_bytes":
			c.liveHeap = v
		}
		var into map[string]float64
		switch {
		case strings.HasPrefix(l, "apiserver_request_total{"):
			into = c.lists
		case strings.HasPrefix(l, "apiserver_response_sizes_sum{"):
			into = c.sizes
		default:
			continue
		}
		if m := resource.FindStringSubmatch(l); m != nil && strings.Contains(l, `verb="LIST"`) {
			into[m[1]] += v
		}
	}
	return c, sc.Err()
}

// logFollower reads a server's log as it grows and finds the audits' log lines.
type logFollower struct {
	path string
	off  int64
	rest string
}

// auditLine is one audit's log line: when it was seen, what the audit said it took, and whether
// it found the cluster in step.
type auditLine struct {
	end    time.Time
	took   time.Duration
	inStep bool
	line   string
}

func newLogFollower(path string) *logFollower {
	f := &logFollower{path: path}
	if st, err := os.Stat(path); err == nil {
		f.off = st.Size()
	}
	return f
}

var auditEnd = regexp.MustCompile(`audit: (in step with the API server|\d+ objects repaired) \(([^)]+)\)\s*$`)

// next waits up to limit for the next audit's log line (polling every 20 ms).
func (f *logFollower) next(ctx context.Context, s *server, limit time.Duration) (auditLine, error) {
	deadline := time.Now().Add(limit)
	for {
		b, err := f.read()
		if err != nil {
			return auditLine{}, err
		}
		now := time.Now()
		f.rest += b
		for {
			i := strings.IndexByte(f.rest, '\n')
			if i < 0 {
				break
			}
			line := f.rest[:i]
			f.rest = f.rest[i+1:]
			if m := auditEnd.FindStringSubmatch(line); m != nil {
				took, err := time.ParseDuration(m[2])
				if err != nil {
					return auditLine{}, fmt.Errorf("audit log line %q: %w", line, err)
				}
				return auditLine{end: now, took: took, inStep: strings.HasPrefix(m[1], "in step"), line: line}, nil
			}
			if strings.Contains(line, "audit: ") && strings.Contains(line, "[WARNING]") {
				return auditLine{}, fmt.Errorf("the audit failed: %s", line)
			}
		}
		if e := s.exited(); e != "" {
			return auditLine{}, fmt.Errorf("exited: %s", e)
		}
		if now.After(deadline) {
			return auditLine{}, errors.New("no audit within " + limit.String())
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return auditLine{}, err
		}
	}
}

func (f *logFollower) read() (string, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	if _, err := fh.Seek(f.off, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(fh)
	f.off += int64(len(b))
	return string(b), err
}

// markdown is the report.
func (res *auditResult) markdown(cfg *config) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m, cl := res.machine, res.cluster
	endpoints := len(cl.services) * cl.endpoints
	p("# The audit's cost to the API server\n\n")
	cmd := fmt.Sprintf("cd bench && go run . -audit -services %d -endpoints %d -headless %.2f -audits %d -audit-interval %s",
		cfg.services, cfg.endpoints, cfg.headless, cfg.audits, cfg.auditInterval)
	if cfg.auditBefore != "" {
		cmd += " -audit-before " + cfg.auditBefore
	}
	if !cfg.controllerSlices {
		cmd += " -controller-slices=false"
	}
	p("Written by `bench/` (see README.md); committed output of one run.\n\n")
	p("- command: `%s`\n", cmd)
	p("- date: %s (run took %s)\n", res.began.UTC().Format("2006-01-02 15:04 MST"), res.ended.Sub(res.began).Round(time.Second))
	p("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s, shared with other builds; load average at the start %s, at the end %s\n",
		m.nproc, m.cpu, m.memory, m.kernel, m.loadStart, loadavg())
	p("- versions: kube-apiserver %s (etcd and kube-apiserver from `make control-plane`), %s\n", res.version, m.coredns)
	p("- kubetree source (bin/coredns): %s\n", m.source)
	shape := "as the EndpointSlice controller writes them (serving and terminating conditions, node, zone, pod name and UID per endpoint; owner, managed-by label and trigger time per slice)"
	if !cfg.controllerSlices {
		shape = "with addresses, the ready condition and hostnames only"
	}
	p("- cluster: %d namespaces, %d services (%d headless), each with one EndpointSlice of %d endpoints, %s: %d endpoints, %d API objects\n\n",
		len(cl.namespaces), len(cl.services), cl.headless, cl.endpoints, shape, endpoints, cl.objects)

	gcb := res.gcPerByte()
	p("## Per audit\n\n")
	p("One server at a time talks to the API server, through a TCP proxy that counts the bytes each way (TLS records included). ")
	p("Each kubetree runs with `audit_interval %s`; its first audit is not counted, the next %d are: the median, and the lowest and highest. ", cfg.auditInterval, cfg.audits)
	p("CPU is utime+stime from /proc, sampled every 50 ms, in each audit's window (from %s before it starts to %s after it ends), less each process's CPU per second between audits. ", auditLead, auditTail)
	p("The API server's garbage collection mostly falls outside the windows: with %s live (the watch cache), it collects after about as much has been allocated, then for a second or more. ", human(res.liveHeap))
	p("Its share is charged by allocation: over this run the collector used %.3f s of CPU for %s allocated (%.0f cycles), %.2f s per GB; an audit is charged its allocations (go_gc_heap_allocs_bytes_total, less the rate at rest) at that rate.\n\n",
		res.gcCPU, human(res.gcAlloc), res.gcCycles, gcb*1e9)
	names := []string{}
	for _, r := range res.runs {
		names = append(names, r.label())
	}
	p("| per audit | %s |", strings.Join(names, " | "))
	if len(res.runs) == 2 {
		p(" after/before |")
	}
	p("\n| --- |%s", strings.Repeat(" ---: |", len(res.runs)))
	if len(res.runs) == 2 {
		p(" ---: |")
	}
	p("\n")
	row := func(what string, f func(*auditRun) float64, format func(float64) string, spread func(*auditRun) string) {
		p("| %s |", what)
		for _, r := range res.runs {
			s := format(f(r))
			if spread != nil {
				s += " " + spread(r)
			}
			p(" %s |", s)
		}
		if len(res.runs) == 2 {
			if before := f(res.runs[0]); before != 0 {
				p(" %.3f |", f(res.runs[1])/before)
			} else {
				p(" — |")
			}
		}
		p("\n")
	}
	window := func(f func(auditWindow) float64, format func(float64) string) (func(*auditRun) float64, func(*auditRun) string) {
		return func(r *auditRun) float64 { return r.median(f) }, func(r *auditRun) string {
			lo, hi := r.spread(f)
			return "(" + format(lo) + "–" + format(hi) + ")"
		}
	}
	sum := func(m map[string]float64) float64 {
		var s float64
		for _, v := range m {
			s += v
		}
		return s
	}
	fBytes := func(v float64) string { return human(v) }
	fCount := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	fSec := func(v float64) string { return fmt.Sprintf("%.3f s", v) }
	f, s := window(func(a auditWindow) float64 { return a.down }, fBytes)
	row("bytes sent by the API server (through the proxy)", f, fBytes, s)
	row("LIST response bytes (apiserver_response_sizes)", func(r *auditRun) float64 { return sum(r.listSize) }, fBytes, nil)
	for _, resource := range []string{"endpointslices", "services", "namespaces"} {
		row("&nbsp;&nbsp;of which "+resource, func(r *auditRun) float64 { return r.listSize[resource] }, fBytes, nil)
	}
	row("LIST requests (apiserver_request_total)", func(r *auditRun) float64 { return sum(r.lists) }, fCount, nil)
	f, s = window(func(a auditWindow) float64 { return a.up }, fBytes)
	row("bytes sent to the API server", f, fBytes, s)
	f, s = window(func(a auditWindow) float64 { return a.apiCPU }, fSec)
	row("kube-apiserver CPU in the audit's window", f, fSec, s)
	row("kube-apiserver heap allocated", func(r *auditRun) float64 { return r.alloc }, fBytes, nil)
	row("&nbsp;&nbsp;its collector's share", func(r *auditRun) float64 { return r.alloc * gcb }, fSec, nil)
	row("**kube-apiserver CPU** (window + collector's share)", func(r *auditRun) float64 { return r.apiCPU(gcb) }, fSec, nil)
	f, s = window(func(a auditWindow) float64 { return a.etcdCPU }, fSec)
	row("etcd CPU in the window (within the noise of its CPU at rest)", f, fSec, s)
	f, s = window(func(a auditWindow) float64 { return a.serverCPU }, fSec)
	row("kubetree CPU in the window", f, fSec, s)
	f, s = window(func(a auditWindow) float64 { return a.took.Seconds() }, fSec)
	row("duration (kubetree's log; its client paces requests at 5 a second after 10)", f, fSec, s)
	p("\n")
	if res.runs[0].lists["services"] != float64(int(res.runs[0].lists["services"])) {
		p("LIST requests of services come in fractions because the API server lists every service itself now and then (its ClusterIP repair loop); its responses count in the response bytes too, not in the bytes through the proxy.\n\n")
	}
	for _, r := range res.runs {
		if len(r.other) > 0 {
			p("%s: audits that did not find the cluster in step: %q\n\n", r.label(), r.other)
		}
		p("%s between audits: the API server sent %.0f bytes/s (watches, HTTP/2 pings) and used %.3f CPU s/s; etcd %.3f, kubetree %.3f. Its initial list: %s.\n\n",
			r.label(), r.idle.down, r.idle.apiCPU, r.idle.etcdCPU, r.idle.serverCPU, human(r.initial))
	}

	p("## Per replica-hour\n\n")
	it := res.inTree
	watchPerHour := it.idleBytes / it.idleFor.Seconds() * 3600
	p("The in-tree kubernetes plugin asks for nothing after its initial list (%s here, gzip-compressed: client-go's default transport asks for it) but its watches: %s an hour (%s measured over %s of an idle cluster: bookmarks and HTTP/2 frames). ",
		human(it.initial), human(watchPerHour), human(it.idleBytes), it.idleFor.Round(time.Second))
	p("kubetree's watches cost the same; the audit comes on top of them. An hour of audits at each interval (its waits are drawn from ±20%% of it, so it audits 3600/interval times an hour on average), ")
	p("as bytes, as that many initial lists of the in-tree plugin, and as API server CPU (window + collector's share); and for a fleet of 313 replicas (the DNS autoscaler's linear mode at 5,000 nodes):\n\n")
	p("| server | interval | API server bytes / replica-hour | in-tree initial lists / replica-hour | API server CPU / replica-hour | 313 replicas: bytes/s | 313 replicas: API server cores |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	p("| kubernetes (in-tree) | — | %s | %.4f | — | %s/s | — |\n", human(watchPerHour), watchPerHour/it.initial, human(watchPerHour*313/3600))
	for _, r := range res.runs {
		down := r.median(func(a auditWindow) float64 { return a.down })
		cpu := r.apiCPU(gcb)
		for _, iv := range auditCandidates {
			perHour := 3600 / iv.Seconds()
			p("| %s | %s | %s | %.2f | %.2f s | %s/s | %.3f |\n", r.label(), shortDuration(iv), human(down*perHour), down*perHour/it.initial,
				cpu*perHour, human(down*perHour*313/3600), cpu*perHour*313/3600)
		}
	}
	if len(res.runs) == 2 {
		before, after := res.runs[0], res.runs[1]
		bd := before.median(func(a auditWindow) float64 { return a.down })
		ad := after.median(func(a auditWindow) float64 { return a.down })
		bc, ac := before.apiCPU(gcb), after.apiCPU(gcb)
		p("\nBefore/after, per audit: %.1f for the bytes, %.1f for the API server's CPU. Per replica-hour, the audit before every 5m (its default) over the audit now every ", bd/ad, bc/ac)
		var parts []string
		for _, iv := range auditCandidates {
			k := iv.Seconds() / (5 * time.Minute).Seconds()
			parts = append(parts, fmt.Sprintf("%s: %.0f for the bytes, %.0f for the CPU", shortDuration(iv), bd/ad*k, bc/ac*k))
		}
		p("%s.\n", strings.Join(parts, "; "))
	}

	p("\n## One list or pages, compressed or not\n\n")
	p("The audit's metadata lists (services, EndpointSlices and namespaces, protobuf, resourceVersion \"\") asked for directly, %d passes each way, one pass at a time, through a counting proxy, without client-side pacing, after no object had changed for %s. ", cfg.audits, res.quietFor.Round(time.Second))
	p("CPU from the start of a pass to %s after it, less the API server's rate at rest (median); heap allocated per pass from its metrics, less its rate at rest; the collector's share at %.2f s per GB on top. ", auditTail, gcb*1e9)
	p("A page after the first is served from the watch cache's snapshot at the list's revision; a resource that has not changed since etcd was last compacted (every 5 minutes) has none, and the API server reads the page from etcd and decodes every object of it in full. ")
	p("kubetree asks for one list, gzip-compressed (its gzipTransport; the API server compresses a list once it passes 128 KiB).\n\n")
	p("| a pass of the metadata lists | requests | bytes sent by the API server | kube-apiserver CPU | its heap allocated | CPU with the collector's share |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, ps := range res.passes {
		p("| %s | %d | %s | %.3f s | %s | %.3f s |\n", ps.label(), ps.requests, human(ps.bytes), ps.apiCPU, human(ps.alloc), ps.apiCPU+ps.alloc*gcb)
	}
	return b.String()
}

func (ps listPass) label() string {
	how := "one list"
	if ps.page > 0 {
		how = fmt.Sprintf("pages of %d", ps.page)
	}
	if ps.gzip {
		how += ", gzip"
	} else {
		how += ", uncompressed"
	}
	if ps.page > 0 && ps.changed {
		how += ", each resource changed just before"
	} else if ps.page > 0 {
		how += ", resources unchanged"
	}
	if ps.page == 0 && ps.gzip {
		how += " (as kubetree)"
	}
	return how
}

func (r *auditRun) label() string {
	if r.name == "kubetree-before" {
		return "kubetree before (full lists)"
	}
	return "kubetree (metadata lists)"
}

func shortDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// human is a byte count in B, kB, MB or GB (powers of 1000, as network traffic is counted).
func human(v float64) string {
	switch a := max(v, -v); {
	case a >= 1e9:
		return fmt.Sprintf("%.2f GB", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2f MB", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.1f kB", v/1e3)
	}
	return fmt.Sprintf("%.0f B", v)
}
