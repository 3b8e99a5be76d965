// Command bench compares CoreDNS's in-tree kubernetes plugin with kubetree, and both with CoreDNS's
// whoami plugin as the ceiling, on a synthetic cluster served by a local control plane
// (hack/cluster.sh). It measures start-up, memory, query throughput and latency under dnsperf, CPU per
// query, agreement of the answers, and how fast a created or deleted service shows in DNS, and writes
// RESULTS.md. `make bench` runs it; see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// config is what the flags set.
type config struct {
	services    int
	sizes       []int
	headless    float64
	endpoints   int
	namespaces  int
	preset      string
	rounds      int
	duration    time.Duration
	warmup      time.Duration
	clients     int
	outstanding int
	queries     int
	sample      int
	propagation int
	startTrials int
	workers     int
	seed        uint64
	root        string
	out         string
	timeout     time.Duration
	keep        bool
	pods        []int // -pods: the pod dimension instead of the service run
	podChurn    int
	sliceChurn  int // -slice-updates: EndpointSlice updates timed in the main run
	profile     bool
	profileDir  string
	relist      bool
	modelHeap   bool
	goMemLimit  string
	memoryLimit string // -memory-limit: kubetree in a memory cgroup with this limit, e.g. 170Mi
	// -audit: what kubetree's audit costs the API server
	audit            bool
	auditBefore      string        // a bin/coredns built before the metadata-only audit, measured beside
	audits           int           // audits measured per server
	auditInterval    time.Duration // the servers' audit_interval
	auditIdle        time.Duration // the in-tree plugin idling, for its watch traffic and the API server's idle CPU
	controllerSlices bool          // EndpointSlices as the EndpointSlice controller writes them
	// -fleet: a relist storm of N replicas of each plugin
	fleet            int
	fleetPlugins     []string
	churn            int           // EndpointSlice updates a second throughout
	fleetSteady      time.Duration // before the restart
	fleetAfter       time.Duration // after every replica caught up
	fleetLimitInTree string        // the in-tree plugin's memory cgroup limit
	memGuard         float64       // stop when the machine's memory in use passes this
	cpuHogs          int           // -relist: busy loops beside the servers, for CPU contention
	// -steady: what a replica costs the API server under steady churn
	steady         bool
	steadyRate     int            // EndpointSlice updates a second
	steadyWindow   time.Duration  // one server's window
	steadySettle   time.Duration  // from a server's first right answer to its window
	steadyRounds   int            // rounds of every server and none
	steadyKubetree []steadyServer // further kubetree builds, -steady-kubetree
	steadyReplicas int            // replicas of a server in its window
	// -watch-cost: what one plain EndpointSlice watch costs the API server per event
	watchCost int // watches in a window
}

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&c.services, "services", 5000, "services in the synthetic cluster")
	sizes := fs.String("sizes", "", `service counts, below -services, at which both plugins' memory is also measured while the cluster is created (default: 10%, 20%, 40%, 70% of -services; "none": only the full size)`)
	fs.Float64Var(&c.headless, "headless", 0.2, "share of the services that are headless (0..1)")
	fs.IntVar(&c.endpoints, "endpoints", 10, "ready endpoints per service (one EndpointSlice each)")
	fs.IntVar(&c.namespaces, "namespaces", 20, "namespaces the services are spread over")
	fs.StringVar(&c.preset, "preset", "", `"large": 20000 services with 10 endpoints each (explicit flags still win)`)
	fs.IntVar(&c.rounds, "rounds", 5, "dnsperf rounds; each round runs every server once, in rotating order")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of one dnsperf run")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unrecorded dnsperf run per server before the rounds (0: none)")
	fs.IntVar(&c.clients, "c", 4, "dnsperf -c: clients (sockets)")
	fs.IntVar(&c.outstanding, "q", 100, "dnsperf -q: queries outstanding at once")
	fs.IntVar(&c.queries, "queries", 0, "lines in the dnsperf query file (0: max(100000, 20 per service))")
	fs.IntVar(&c.sample, "sample", 2000, "names of the query file checked for equal answers before the load")
	fs.IntVar(&c.propagation, "propagation", 50, "services created and deleted one at a time to time propagation")
	fs.IntVar(&c.startTrials, "start-trials", 5, "start-up measurements per plugin (the last process stays for the load)")
	fs.IntVar(&c.workers, "workers", 8, "concurrent API clients creating the cluster")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the query file and the correctness sample")
	fs.StringVar(&c.root, "root", "..", "the kubetree repository (bin/coredns, bin/etcd, ..., hack/cluster.sh)")
	fs.StringVar(&c.out, "out", "RESULTS.md", `where to write the results (markdown); "" for stdout only`)
	fs.DurationVar(&c.timeout, "timeout", 60*time.Minute, "give up (and clean up) after this long")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary directory (control plane state, Corefiles, logs)")
	pods := fs.String("pods", "", `the pod dimension instead: pod counts to measure at, e.g. "10000,100000" (writes -out, default PODS.md)`)
	fs.IntVar(&c.podChurn, "pod-churn", 10000, "with -pods: pod status changes (new addresses) to time")
	fs.IntVar(&c.sliceChurn, "slice-updates", 5000, "EndpointSlice updates (one endpoint moved, stamped with its trigger time) to time CPU per update and the DNS programming latency of both plugins (0: skip)")
	fs.BoolVar(&c.relist, "relist", false, `a full relist instead: peak RSS through start-up and through a restart of the API server, beside kubernetes (writes -out, default RELIST.md)`)
	fs.BoolVar(&c.modelHeap, "model-heap", true, "also measure the model's heap at 100k services and 1M endpoints (BenchmarkScale), beside the figure before external names, zonal and multicluster")
	fs.StringVar(&c.memoryLimit, "memory-limit", "", `with -relist: run kubetree in a memory cgroup with this limit, as deploy/'s container (e.g. 170Mi; needs root), and report the kernel's counts`)
	fs.BoolVar(&c.audit, "audit", false, `what kubetree's audit costs the API server instead: bytes sent and CPU per audit, beside the in-tree plugin's watch traffic (writes -out, default AUDIT.md)`)
	fs.StringVar(&c.auditBefore, "audit-before", "", "with -audit: a CoreDNS binary with an earlier kubetree, whose audit is measured beside bin/coredns's")
	fs.IntVar(&c.audits, "audits", 10, "with -audit: audits measured per server (and passes of each kind of direct list)")
	fs.DurationVar(&c.auditInterval, "audit-interval", 20*time.Second, "with -audit: the servers' audit_interval")
	fs.DurationVar(&c.auditIdle, "audit-idle", time.Minute, "with -audit: how long the in-tree plugin's traffic and the API server's idle CPU are measured")
	fs.BoolVar(&c.controllerSlices, "controller-slices", false, "EndpointSlices as the EndpointSlice controller writes them (serving and terminating conditions, node, zone, pod reference, owner, trigger time); default with -audit")
	fs.IntVar(&c.fleet, "fleet", 0, `a relist storm instead: this many replicas of each plugin against one API server, which is restarted (writes -out, default FLEET.md)`)
	plugins := fs.String("fleet-plugins", "kubetree,kubernetes", "with -fleet: the plugins whose storms are measured, in order")
	fs.IntVar(&c.churn, "churn", 300, "with -fleet: EndpointSlice updates a second throughout")
	fs.DurationVar(&c.fleetSteady, "fleet-steady", 30*time.Second, "with -fleet: how long the replicas run under the churn before the restart")
	fs.DurationVar(&c.fleetAfter, "fleet-after", 10*time.Second, "with -fleet: how long the storm goes on after every replica answers the change made after the restart")
	fs.StringVar(&c.fleetLimitInTree, "fleet-limit-in-tree", "2560Mi", "with -fleet: the memory cgroup limit of each in-tree replica")
	memGuard := fs.String("mem-guard", "18Gi", "with -fleet: stop when the machine's memory in use (MemTotal - MemAvailable) passes this")
	fs.IntVar(&c.cpuHogs, "cpu-hogs", 0, "with -relist: this many busy loops run beside the servers throughout (CPU contention, as a busy neighbour's)")
	fs.BoolVar(&c.steady, "steady", false, `what a replica costs the API server under steady EndpointSlice churn instead: the in-tree plugin, kubetree and -steady-kubetree one at a time, and no server, in rounds; then kubetree's audit (writes -out, default STEADY.md)`)
	fs.IntVar(&c.steadyRate, "steady-rate", 10, "with -steady: EndpointSlice updates a second throughout")
	fs.DurationVar(&c.steadyWindow, "steady-window", 3*time.Minute, "with -steady: how long each server (and no server) is measured per round")
	fs.DurationVar(&c.steadySettle, "steady-settle", 15*time.Second, "with -steady: from a server's first right answer to its window")
	fs.IntVar(&c.steadyRounds, "steady-rounds", 3, "with -steady: rounds; each measures every server and no server once")
	fs.IntVar(&c.steadyReplicas, "steady-replicas", 1, "with -steady: replicas of each server that watch at once in its window (figures are per replica): more of them lift a replica's cost above the API server's own variation")
	fs.IntVar(&c.watchCost, "watch-cost", 0, "what one plain EndpointSlice watch costs the API server per event instead: this many watches of the bench's own, then none, in rounds under -steady-rate's churn (-steady-window, -steady-rounds, -steady-settle; writes -out, default WATCHCOST.md)")
	steadyKubetree := fs.String("steady-kubetree", "", "with -steady: further kubetree builds measured beside bin/coredns's, name=path,...")
	fs.StringVar(&c.goMemLimit, "gomemlimit", "", `GOMEMLIMIT for the servers, e.g. 150MiB (deploy/'s Deployment)`)
	fs.BoolVar(&c.profile, "profile", false, "a 20 s CPU profile of each server during the pod changes (-pods) or the EndpointSlice updates (needs curl)")
	fs.StringVar(&c.profileDir, "profile-dir", os.TempDir(), "where -profile writes the profiles")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.relist && !set["out"] {
		c.out = "RELIST.md"
	}
	if c.audit && !set["out"] {
		c.out = "AUDIT.md"
	}
	if c.audit && !set["controller-slices"] {
		c.controllerSlices = true
	}
	if c.steady {
		if !set["out"] {
			c.out = "STEADY.md"
		}
		if !set["controller-slices"] {
			c.controllerSlices = true
		}
		if !set["audits"] {
			c.audits = 6
		}
		var err error
		if c.steadyKubetree, err = parseSteadyKubetree(*steadyKubetree); err != nil {
			return nil, err
		}
		if c.steadyRate < 1 || c.steadyRounds < 1 || c.steadyReplicas < 1 || c.steadyWindow < 10*time.Second {
			return nil, errors.New("-steady-rate, -steady-rounds and -steady-replicas must be at least 1, -steady-window at least 10s")
		}
		if !c.controllerSlices {
			return nil, errors.New("-steady: the churn writes EndpointSlices as the controller does; -controller-slices=false is not supported")
		}
	}
	if c.watchCost > 0 {
		if !set["out"] {
			c.out = "WATCHCOST.md"
		}
		if !set["audits"] {
			c.audits = 6
		}
		if !set["controller-slices"] {
			c.controllerSlices = true
		}
		if c.steadyRate < 1 || c.steadyRounds < 1 || c.steadyWindow < 10*time.Second || !c.controllerSlices {
			return nil, errors.New("-watch-cost: -steady-rate and -steady-rounds at least 1, -steady-window at least 10s, EndpointSlices as the controller writes them")
		}
	}
	if c.fleet > 0 {
		if !set["out"] {
			c.out = "FLEET.md"
		}
		if !set["controller-slices"] {
			c.controllerSlices = true
		}
		if !set["memory-limit"] {
			c.memoryLimit = "170Mi"
		}
		if !set["gomemlimit"] {
			c.goMemLimit = "150MiB"
		}
		c.fleetPlugins = strings.Split(*plugins, ",")
		for _, p := range c.fleetPlugins {
			if p != "kubernetes" && p != "kubetree" {
				return nil, fmt.Errorf("-fleet-plugins: kubernetes and kubetree, got %q", *plugins)
			}
		}
		g, err := resource.ParseQuantity(*memGuard)
		if err != nil {
			return nil, fmt.Errorf("-mem-guard: %w", err)
		}
		c.memGuard = float64(g.Value())
	}
	if c.audits < 1 || c.auditInterval < 10*time.Second || c.auditIdle < 10*time.Second {
		return nil, errors.New("-audits must be at least 1, -audit-interval (kubetree's shortest) and -audit-idle at least 10s")
	}
	if *pods != "" {
		for _, f := range strings.Split(*pods, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || (len(c.pods) > 0 && n <= c.pods[len(c.pods)-1]) {
				return nil, fmt.Errorf("-pods: growing pod counts such as 10000,100000, got %q", *pods)
			}
			c.pods = append(c.pods, n)
		}
		if !set["out"] {
			c.out = "PODS.md"
		}
	}
	switch c.preset {
	case "":
	case "large":
		if !set["services"] {
			c.services = 20000
		}
		if !set["endpoints"] {
			c.endpoints = 10
		}
	default:
		return nil, fmt.Errorf("unknown -preset %q (known: large)", c.preset)
	}
	if set["sizes"] {
		var err error
		if c.sizes, err = parseSizes(*sizes, c.services); err != nil {
			return nil, err
		}
	} else {
		c.sizes = defaultSizes(c.services)
	}
	if c.queries == 0 {
		c.queries = max(100000, 20*c.services)
	}
	switch {
	case c.services < 1 || c.namespaces < 1 || c.endpoints < 1:
		return nil, errors.New("-services, -namespaces and -endpoints must be at least 1")
	case c.headless < 0 || c.headless > 1:
		return nil, errors.New("-headless must be within 0..1")
	case c.endpoints > 1000:
		return nil, errors.New("-endpoints: at most 1000 (one EndpointSlice per service)")
	case c.services > 60000:
		return nil, errors.New("-services: at most 60000 (the service CIDR is a /16)")
	case c.rounds < 1 || c.duration < time.Second || c.startTrials < 1 || c.workers < 1:
		return nil, errors.New("-rounds, -start-trials and -workers must be at least 1, -duration at least 1s")
	case c.clients < 1 || c.outstanding < 1:
		return nil, errors.New("-c and -q must be at least 1")
	}
	root, err := filepath.Abs(c.root)
	if err != nil {
		return nil, err
	}
	c.root = root
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	runner := run
	switch {
	case len(cfg.pods) > 0:
		runner = runPods
	case cfg.relist:
		runner = runRelist
	case cfg.audit:
		runner = runAudit
	case cfg.fleet > 0:
		runner = runFleet
	case cfg.steady:
		runner = runSteady
	case cfg.watchCost > 0:
		runner = runWatchCost
	}
	if err := runner(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAILED:", err)
		os.Exit(1)
	}
}

// logf prints a progress line with the time since the start.
var began = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
}

// phases records how long each part of the run took.
type phases struct {
	names []string
	durs  []time.Duration
	cur   string
	at    time.Time
}

func (p *phases) start(name string) {
	p.end()
	p.cur, p.at = name, time.Now()
	logf("== %s", name)
}

func (p *phases) end() {
	if p.cur != "" {
		p.names = append(p.names, p.cur)
		p.durs = append(p.durs, time.Since(p.at))
		p.cur = ""
	}
}

func run(ctx context.Context, cfg *config) (err error) {
	res := newResults(cfg)
	ph := res.phases
	for _, b := range []string{"bin/coredns", "bin/etcd", "bin/kube-apiserver", "bin/kubectl", "hack/cluster.sh"} {
		if _, err := os.Stat(filepath.Join(cfg.root, b)); err != nil {
			return fmt.Errorf("%s missing (run `make build control-plane` in %s): %w", b, cfg.root, err)
		}
	}
	if _, err := exec.LookPath("dnsperf"); err != nil {
		return errors.New("dnsperf not found: apt-get update && apt-get install dnsperf")
	}
	coreDNSBinary = filepath.Join(cfg.root, "bin/coredns")
	res.machine = machineInfo(cfg.root)
	logf("kubetree bench: %d services (%.0f%% headless), %d endpoints each, %d namespaces; %d rounds of %s",
		cfg.services, cfg.headless*100, cfg.endpoints, cfg.namespaces, cfg.rounds, cfg.duration)

	dir, err := os.MkdirTemp("", "kubetree-bench-")
	if err != nil {
		return err
	}
	defer func() {
		if cfg.keep || (err != nil && ctx.Err() == nil) {
			logf("kept %s (control plane state, Corefiles, CoreDNS logs)", dir)
			return
		}
		os.RemoveAll(dir)
	}()

	// The control plane: stopped on every way out, also when start fails half way.
	ph.start("control plane start")
	cp := &controlPlane{root: cfg.root, dir: filepath.Join(dir, "cluster")}
	defer func() {
		logf("stopping the control plane")
		if err := cp.stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	if err := cp.start(ctx); err != nil {
		return err
	}
	res.k8sVersion = cp.version

	ph.start("create the cluster (memory of both plugins at each of -sizes on the way)")
	cl, err := populate(ctx, cp, cfg, func(cl *cluster) error {
		pt, err := measureSize(ctx, dir, cp.kubeconfig, cl, len(res.sizes))
		res.sizes = append(res.sizes, pt)
		return err
	})
	if err != nil {
		return err
	}
	res.cluster = cl

	qfile := filepath.Join(dir, "queries.txt")
	qs, err := writeQueryFile(qfile, cl, cfg)
	if err != nil {
		return err
	}
	res.queryMix = qs

	// The servers. Every process started is stopped on the way out.
	var procs []*server
	defer func() {
		for _, s := range procs {
			s.stop()
		}
	}()
	ph.start("start-up (whoami, then kubernetes and kubetree alternating)")
	whoami, err := startServer(ctx, dir, "whoami", 0, cp.kubeconfig)
	if err != nil {
		return err
	}
	procs = append(procs, whoami)
	st, err := whoami.waitStartup(ctx, "", "")
	if err != nil {
		return err
	}
	res.startups["whoami"] = append(res.startups["whoami"], st)
	probe := cl.probe()
	servers := map[string]*server{}
	if cfg.profile {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		serverPprof["kubernetes"], serverPprof["kubetree"] = ports[0], ports[1]
	}
	for trial := range cfg.startTrials {
		order := []string{"kubernetes", "kubetree"}
		if trial%2 == 1 {
			order = []string{"kubetree", "kubernetes"}
		}
		for _, p := range order {
			start := startServer
			if trial == cfg.startTrials-1 { // the servers that stay: what the API server sends them is counted
				start = func(ctx context.Context, dir, plugin string, trial int, kubeconfig string) (*server, error) {
					return startServerCounted(ctx, dir, plugin, trial, kubeconfig, func(addr, ready, metrics, kc string) string {
						return corefile(plugin, addr, ready, metrics, kc)
					})
				}
			}
			s, err := start(ctx, dir, p, trial, cp.kubeconfig)
			if err != nil {
				return err
			}
			procs = append(procs, s)
			st, err := s.waitStartup(ctx, probe.name, probe.ip)
			if err != nil {
				return err
			}
			logf("%s trial %d: ready after %s, first correct answer after %s (first reply of any kind %s, %s)",
				p, trial+1, ms(st.ready), ms(st.answer), ms(st.firstReply), st.firstRcode)
			res.startups[p] = append(res.startups[p], st)
			if trial < cfg.startTrials-1 {
				s.stop()
			} else {
				servers[p] = s
			}
		}
	}
	servers["whoami"] = whoami

	ph.start("memory after sync")
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	for _, name := range serverNames {
		m, err := servers[name].memory(ctx)
		if err != nil {
			return err
		}
		res.memSync[name] = m
		logf("%s after sync: RSS %s, heap %s", name, mib(m.rss), mib(m.heap))
	}

	ph.start("correctness (answers of kubernetes vs kubetree)")
	res.diff, err = compareAnswers(ctx, servers["kubernetes"].addr, servers["kubetree"].addr, res.queryMix, cl, cfg)
	if err != nil {
		return err
	}
	res.diff.print(os.Stderr)

	ph.start("query load (dnsperf)")
	res.runs, err = runLoad(ctx, servers, qfile, dir, cfg)
	if err != nil {
		return err
	}

	ph.start("memory after load")
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	for _, name := range serverNames {
		m, err := servers[name].memory(ctx)
		if err != nil {
			return err
		}
		res.memLoad[name] = m
		logf("%s after load: RSS %s, heap %s", name, mib(m.rss), mib(m.heap))
	}

	if cfg.propagation > 0 {
		ph.start("propagation (create / delete, one service at a time)")
		res.prop, err = propagation(ctx, cp, cl, servers, cfg.propagation)
		if err != nil {
			return err
		}
	}
	if cfg.sliceChurn > 0 {
		ph.start("EndpointSlice updates (CPU per update, DNS programming latency)")
		res.slices, err = sliceUpdates(ctx, cp, cl, servers, cfg.sliceChurn, cfg.workers, cfg.profile, serverPprof, cfg.profileDir)
		if err != nil {
			return err
		}
	}
	for _, s := range servers {
		if e := s.exited(); e != "" {
			return fmt.Errorf("%s exited during the run: %s", s.name, e)
		}
	}
	if cfg.modelHeap {
		ph.start("model heap at 100k services and 1M endpoints (BenchmarkScale), every option off, then topology on")
		if res.heap, err = measureModelHeap(ctx, cfg.root); err != nil {
			return err
		}
		logf("model heap: %.1f MiB (%.3f of %.1f MiB at %s)", res.heap.heapMiB, res.heap.heapMiB/heapBaselineMiB, heapBaselineMiB, heapBaseline)
		logf("model heap with topology: %.1f MiB at %d nodes, %.1f MiB at %d: %.0f B per node, %.1f B per endpoint",
			res.heap.topology.heapMiB[0], topologyNodes[0], res.heap.topology.heapMiB[1], topologyNodes[1],
			res.heap.topology.perNode, res.heap.topology.perEndpoint)
	}
	ph.end()
	res.ended = time.Now()

	if cfg.out != "" {
		if res.charts, err = res.writeCharts(filepath.Dir(cfg.out)); err != nil {
			return err
		}
	}
	report := res.markdown()
	fmt.Println()
	fmt.Println(res.table())
	fmt.Println(res.notes())
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, []byte(report), 0o644); err != nil {
			return err
		}
		logf("wrote %s", cfg.out)
	}
	logf("done in %s", time.Since(res.began).Round(time.Second))
	return nil
}

// serverNames is the column order everywhere.
var serverNames = []string{"kubernetes", "kubetree", "whoami"}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

func ms(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
