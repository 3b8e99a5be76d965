package main

import (
	"debug/buildinfo"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// results is everything the report shows.
type results struct {
	cfg        *config
	args       []string
	began      time.Time
	ended      time.Time
	phases     *phases
	machine    machine
	k8sVersion string
	cluster    *cluster
	queryMix   *querySet
	startups   map[string][]startup
	memSync    map[string]mem
	memLoad    map[string]mem
	diff       *diffReport
	runs       []runResult
	prop       *propResult
	slices     *sliceResult // -slice-updates
	sizes      []sizePoint  // memory at the smaller sizes (-sizes)
	heap       *modelHeap   // the model's heap at 1M endpoints, unless -model-heap=false
	charts     []chart      // written next to the report
}

func newResults(cfg *config) *results {
	return &results{
		cfg: cfg, args: os.Args[1:], began: time.Now(), phases: &phases{},
		startups: map[string][]startup{}, memSync: map[string]mem{}, memLoad: map[string]mem{},
	}
}

type machine struct {
	nproc                                      int
	cpu, memory, kernel, loadStart             string
	coredns, coreDNSGo, dnsperf, clientGo, go_ string
	source                                     string // the kubetree commit bin/coredns was built from
}

// sourceState is the repository's commit and the uncommitted files that go into bin/coredns (the
// plugin's non-test Go files, go.mod/go.sum, cmd/coredns): make bench builds from the working tree.
func sourceState(root string) string {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%h %s").Output()
	if err != nil {
		return "unknown (no git)"
	}
	subject := strings.TrimSpace(string(out))
	if len(subject) > 90 {
		subject = subject[:90] + "…"
	}
	src := "commit " + subject
	st, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--", ".", ":!bench", ":!test", ":!hack", ":!deploy").Output()
	var dirty []string
	for _, l := range strings.Split(string(st), "\n") {
		if len(l) < 4 {
			continue
		}
		f := strings.TrimSpace(l[3:])
		if (strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") && !strings.Contains(f, "/")) ||
			f == "go.mod" || f == "go.sum" || strings.HasPrefix(f, "cmd/") {
			dirty = append(dirty, f)
		}
	}
	if len(dirty) > 0 {
		src += "; plus uncommitted changes in " + strings.Join(dirty, ", ")
	}
	return src
}

func machineInfo(root string) machine {
	m := machine{nproc: runtime.NumCPU(), go_: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				var kb float64
				fmt.Sscan(v, &kb)
				m.memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	m.kernel = readTrim("/proc/sys/kernel/osrelease")
	m.source = sourceState(root)
	m.loadStart = loadavg()
	if out, err := exec.Command(root+"/bin/coredns", "-version").Output(); err == nil {
		m.coredns = strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", ", ")
	}
	if bi, err := buildinfo.ReadFile(root + "/bin/coredns"); err == nil {
		m.coreDNSGo = bi.GoVersion
		for _, d := range bi.Deps {
			if d.Path == "github.com/coredns/coredns" {
				m.coredns += " (module github.com/coredns/coredns " + d.Version + ")"
			}
		}
	}
	out, _ := exec.Command("dnsperf", "-h").CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "Version "); ok {
			m.dnsperf = strings.TrimSpace(v)
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/client-go" {
				m.clientGo = d.Version
			}
		}
	}
	return m
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func loadavg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// row is one metric: a value per server (NaN: not applicable), how to print it, and whether the
// kubetree/whoami ratio means anything.
type row struct {
	metric      string
	v           [3]float64 // kubernetes, kubetree, whoami
	format      func(float64) string
	whoamiRatio bool
}

func (r *results) perServer(f func(runResult) float64) [3]float64 {
	var out [3]float64
	for i, name := range serverNames {
		var v []float64
		for _, run := range r.runs {
			if run.server == name {
				v = append(v, f(run))
			}
		}
		out[i] = median(v)
	}
	return out
}

func (r *results) rows() []row {
	nan := math.NaN()
	fQPS := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	fMs := func(v float64) string { return fmt.Sprintf("%.3f ms", v*1000) }
	fMsShort := func(v float64) string { return fmt.Sprintf("%.1f ms", v*1000) }
	fCPU := func(v float64) string { return fmt.Sprintf("%.3f s", v) }
	fMiB := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	idle := r.memSync["whoami"].rss
	memRow := func(name string, m map[string]mem, f func(mem) float64, growth bool) row {
		var v [3]float64
		for i, s := range serverNames {
			v[i] = f(m[s])
			if growth {
				v[i] -= idle
			}
		}
		if growth {
			v[2] = nan
		}
		return row{metric: name, v: v, format: fMiB, whoamiRatio: !growth}
	}
	startRow := func(name string, f func(startup) time.Duration) row {
		var v [3]float64
		for i, s := range serverNames {
			var d []float64
			for _, st := range r.startups[s] {
				if x := f(st); x >= 0 {
					d = append(d, x.Seconds())
				}
			}
			v[i] = nan
			if len(d) > 0 {
				v[i] = median(d)
			}
		}
		return row{metric: name, v: v, format: fMsShort}
	}
	rows := []row{
		{metric: "QPS (median of rounds)", v: r.perServer(func(x runResult) float64 { return x.qps }), format: fQPS, whoamiRatio: true},
		{metric: "avg latency (median of rounds)", v: r.perServer(func(x runResult) float64 { return x.avgLat }), format: fMs, whoamiRatio: true},
		{metric: "p99 latency under load (median of rounds)", v: r.perServer(func(x runResult) float64 { return x.p99 }), format: fMs, whoamiRatio: true},
		{metric: "CPU s per 100k queries (median)", v: r.perServer(runResult.cpuPer100k), format: fCPU, whoamiRatio: true},
		memRow("RSS after sync", r.memSync, func(m mem) float64 { return m.rss }, false),
		memRow("RSS after load", r.memLoad, func(m mem) float64 { return m.rss }, false),
		memRow("RSS growth over idle whoami, after sync", r.memSync, func(m mem) float64 { return m.rss }, true),
		memRow("RSS growth over idle whoami, after load", r.memLoad, func(m mem) float64 { return m.rss }, true),
		memRow("Go heap (heap_alloc) after sync", r.memSync, func(m mem) float64 { return m.heap }, false),
		memRow("Go heap (heap_alloc) after load", r.memLoad, func(m mem) float64 { return m.heap }, false),
		startRow(fmt.Sprintf("start → ready (median of %d)", r.cfg.startTrials), func(s startup) time.Duration { return s.ready }),
		startRow(fmt.Sprintf("start → first correct answer (median of %d)", r.cfg.startTrials), func(s startup) time.Duration { return s.answer }),
	}
	rows[10].whoamiRatio = true
	if p := r.prop; p != nil {
		pr := func(name string, m map[string][]time.Duration, f func([]time.Duration) time.Duration) row {
			return row{metric: name, v: [3]float64{f(m["kubernetes"]).Seconds(), f(m["kubetree"]).Seconds(), nan}, format: fMsShort}
		}
		mx := func(v []time.Duration) time.Duration { return slices.Max(v) }
		rows = append(rows,
			pr(fmt.Sprintf("propagation: create → answer, median (n=%d)", p.n), p.create, medianDur),
			pr("propagation: create → answer, max", p.create, mx),
			pr("propagation: delete → NXDOMAIN, median", p.del, medianDur),
			pr("propagation: delete → NXDOMAIN, max", p.del, mx),
		)
	}
	if sl := r.slices; sl != nil {
		fUs := func(v float64) string { return fmt.Sprintf("%.0f µs", v*1e6) }
		q := func(p string, q float64) float64 {
			if d := sl.latency[p].quantile(q); d >= 0 {
				return d.Seconds()
			}
			return nan
		}
		rows = append(rows,
			row{metric: fmt.Sprintf("CPU per EndpointSlice update, idle taken off (%d updates)", sl.n+1),
				v: [3]float64{sl.perUpdate("kubernetes"), sl.perUpdate("kubetree"), nan}, format: fUs},
			row{metric: "bytes from the API server per EndpointSlice update (TLS records included), idle taken off",
				v: [3]float64{sl.bytes["kubernetes"] / float64(sl.n+1), sl.bytes["kubetree"] / float64(sl.n+1), nan}, format: func(v float64) string { return fmt.Sprintf("%.0f B", v) }},
			row{metric: "context switches per EndpointSlice update (every thread)",
				v: [3]float64{sl.switches["kubernetes"] / float64(sl.n+1), sl.switches["kubetree"] / float64(sl.n+1), nan}, format: func(v float64) string { return fmt.Sprintf("%.1f", v) }},
			row{metric: "DNS programming latency during the updates, p50", v: [3]float64{q("kubernetes", 0.5), q("kubetree", 0.5), nan}, format: fMsShort},
			row{metric: "DNS programming latency during the updates, p99", v: [3]float64{q("kubernetes", 0.99), q("kubetree", 0.99), nan}, format: fMsShort},
		)
	}
	return rows
}

// table is the results table in markdown.
func (r *results) table() string {
	var b strings.Builder
	b.WriteString("| metric | kubernetes | kubetree | whoami | kubetree/kubernetes | kubetree/whoami |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: |\n")
	cell := func(f func(float64) string, v float64) string {
		if math.IsNaN(v) {
			return "—"
		}
		return f(v)
	}
	ratio := func(a, b float64) string {
		if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, x := range r.rows() {
		wr := "—"
		if x.whoamiRatio {
			wr = ratio(x.v[1], x.v[2])
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.metric,
			cell(x.format, x.v[0]), cell(x.format, x.v[1]), cell(x.format, x.v[2]), ratio(x.v[1], x.v[0]), wr)
	}
	return b.String()
}

// notes is what stdout shows under the table.
func (r *results) notes() string {
	var b strings.Builder
	fmt.Fprintf(&b, "p99 latency: from dnsperf -v per-query latencies of the load runs (dnsperf %s supports -v).\n", r.machine.dnsperf)
	fmt.Fprintf(&b, "QPS per round (rounds rotate the server order):\n")
	for _, name := range serverNames {
		var v []string
		for _, x := range r.runs {
			if x.server == name {
				v = append(v, fmt.Sprintf("%.0f", x.qps))
			}
		}
		fmt.Fprintf(&b, "  %-10s %s\n", name, strings.Join(v, ", "))
	}
	return b.String()
}

func (r *results) command() string {
	cmd := "cd bench && go run ."
	if len(r.args) > 0 {
		cmd += " " + strings.Join(r.args, " ")
		return fmt.Sprintf("`make bench BENCH_FLAGS='%s'` (= `%s`)", strings.Join(r.args, " "), cmd)
	}
	return fmt.Sprintf("`make bench` (= `%s`)", cmd)
}

func (r *results) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	cfg, m, cl := r.cfg, r.machine, r.cluster
	p("# kubetree benchmark results\n\n")
	p("Written by `bench/` (see README.md); committed output of one run. Every number below comes from one\n")
	p("run in which the three servers were measured side by side, alternating; compare the ratios, not the\n")
	p("absolute numbers, which depend on a shared, noisy 2-core machine.\n\n")
	p("- date: %s (run took %s)\n", r.began.UTC().Format("2006-01-02 15:04 MST"), r.ended.Sub(r.began).Round(time.Second))
	p("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s; load average at the start %s, at the end %s\n",
		m.nproc, m.cpu, m.memory, m.kernel, m.loadStart, loadavg())
	p("- versions: %s, built with %s; kube-apiserver %s (kubernetes v1.37.2 from hack/tools); bench client-go %s, %s; dnsperf %s\n",
		m.coredns, m.coreDNSGo, r.k8sVersion, m.clientGo, m.go_, m.dnsperf)
	p("- kubetree source (bin/coredns is built from the working tree): %s\n", m.source)
	p("- command: %s\n", r.command())
	p("- cluster: %d namespaces, %d services (%d ClusterIP, %d headless), each with a named port (tcp `http`) and one EndpointSlice of %d ready endpoints (headless: hostnames on half of them); %d API objects, created in %s with %d concurrent clients\n",
		len(cl.namespaces), len(cl.services), len(cl.services)-cl.headless, cl.headless, cl.endpoints, cl.objects, cl.created.Round(100*time.Millisecond), cfg.workers)
	p("- load: dnsperf `-c %d -q %d -l %s -t 1 -v`, UDP, no EDNS, %d rounds (+ a %s warm-up per server), servers in rotating order; query file of %d queries (below)\n",
		cfg.clients, cfg.outstanding, strings.TrimSuffix(fmt.Sprint(cfg.duration.Seconds()), ".0"), cfg.rounds, cfg.warmup, len(r.queryMix.lines))
	p("- Corefiles: identical but for the plugin line — `bind 127.0.0.1`, `prometheus`, `ready`, then `kubernetes cluster.local in-addr.arpa ip6.arpa { kubeconfig … }`, the same with `kubetree`, or `whoami`; no `cache`, no `log`\n\n")

	p("## Results\n\n")
	p("%s\n", r.table())
	qps := r.perServer(func(x runResult) float64 { return x.qps })
	if qps[1] >= 0.9*qps[2] {
		p("- kubetree's QPS is at or near whoami's (kubetree/whoami %.2f): at the ceiling of CoreDNS + dnsperf on this machine, where\n", qps[1]/qps[2])
		p("  round-to-round noise decides the order. Its QPS ratio to kubernetes is then a lower bound, and the CPU per query\n")
		p("  separates the three better than QPS does.\n")
	}
	p("- QPS, average latency: dnsperf's own statistics. p99: from dnsperf's per-query latencies (`-v`, written to a file and\n")
	p("  read after the run), i.e. under full load, dominated by queueing behind `-q %d` outstanding queries.\n", cfg.outstanding)
	p("- CPU: utime+stime of the server process from /proc/PID/stat over each run, divided by the completed queries.\n")
	p("- RSS: VmRSS from /proc/PID/status; Go heap: `go_memstats_heap_alloc_bytes` from /metrics (median of 5 samples 200 ms apart).\n")
	p("  \"After sync\" is 5 s after the plugins answered, \"after load\" 2 s after the last dnsperf run. The growth rows subtract\n")
	p("  the RSS of the idle whoami server after sync (%s).\n", mib(r.memSync["whoami"].rss))
	p("- start → ready: from exec to the ready plugin's 200; start → first correct answer: to the first UDP reply with the\n")
	p("  right address for the last service created (both polled in tight loops). kubernetes and kubetree were started\n")
	p("  alternately, one at a time; whoami ready is listed for scale. The trials spread widely on a shared machine:")
	for _, name := range []string{"kubernetes", "kubetree"} {
		var v []float64
		for _, st := range r.startups[name] {
			if st.ready >= 0 {
				v = append(v, float64(st.ready.Milliseconds()))
			}
		}
		if len(v) > 0 {
			p(" %s %.0f–%.0f ms;", name, slices.Min(v), slices.Max(v))
		}
	}
	p(" see the start-up trials below.\n")
	if r.prop != nil {
		p("- propagation: %d ClusterIP services created one at a time; from the API Create (Delete) call returning to the first\n", r.prop.n)
		p("  reply with the cluster IP (NXDOMAIN), polling both plugins concurrently over UDP in tight loops. Timeouts (30 s): kubernetes %d, kubetree %d.\n\n",
			r.prop.timeouts["kubernetes"], r.prop.timeouts["kubetree"])
	}

	if sl := r.slices; sl != nil {
		p("- EndpointSlice updates: %d, one endpoint of one service's slice moved to a new address each (as a pod moving),\n", sl.n+1)
		p("  the slice stamped with `endpoints.kubernetes.io/last-change-trigger-time` (now), %d clients at once, in %s; both\n", cfg.workers, sl.took.Round(100*time.Millisecond))
		p("  servers watching, and waited for until both answer the last one. CPU: utime+stime over the updates, less the\n")
		p("  server's idle CPU (kubernetes %.1f ms/s, kubetree %.1f ms/s, measured for 10 s before), divided by the updates.\n", sl.idle["kubernetes"]*1000, sl.idle["kubetree"]*1000)
		p("  Programming latency: each plugin's `dns_programming_duration_seconds` histogram over the updates (kubernetes %d,\n", sl.latency["kubernetes"].count())
		p("  kubetree %d observations), quantiles estimated as Prometheus's histogram_quantile does (linear in the bucket); the\n", sl.latency["kubetree"].count())
		p("  in-tree plugin stops the clock when it stores the slice, kubetree when it serves the change.\n\n")
	}

	if len(r.charts) > 0 {
		p("## Charts\n\n")
		for _, c := range r.charts {
			p("![%s](%s)\n\n", c.title, c.file)
		}
		p("Memory: RSS growth is the process's RSS less the idle whoami server's; the Go heap is `go_memstats_heap_alloc_bytes`.\n")
		p("QPS and CPU: bars at the median of the rounds, a point per round.\n")
		if r.prop != nil {
			p("Propagation: the share of the %d creates (deletes) answered within the time on the x axis.\n", r.prop.n)
		}
		p("\n")
	}
	if pts := r.sizeSeries(); len(pts) > 1 {
		p("## Memory against cluster size\n\n")
		p("Both plugins started on the cluster as it grew, each measured 5 s after it answered for the last service created\n")
		p("(the last row is the main run's \"after sync\"). RSS growth subtracts the idle whoami server's RSS (%s).\n\n", mib(r.memSync["whoami"].rss))
		p("| services | endpoints | kubernetes RSS growth | kubetree RSS growth | ratio | kubernetes heap | kubetree heap | ratio |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		idle := r.memSync["whoami"].rss
		for _, pt := range pts {
			k, t := pt.mem["kubernetes"], pt.mem["kubetree"]
			p("| %d | %d | %s | %s | %.2f | %s | %s | %.2f |\n", pt.services, pt.endpoints, mib(k.rss-idle), mib(t.rss-idle),
				(t.rss-idle)/(k.rss-idle), mib(k.heap), mib(t.heap), t.heap/k.heap)
		}
		p("\n")
	}

	if r.heap != nil {
		p("%s", r.heap.markdown())
	}

	p("## Per-round raw numbers\n\n")
	p("The last column is the CPU the server and dnsperf got together, as a share of all %d CPUs: where it drops, something\n", m.nproc)
	p("else on the machine took CPU during that run.\n\n")
	p("| round | server | QPS | avg latency | p50 | p99 | lost | server CPU s | CPU s / 100k | dnsperf CPU s | server+dnsperf CPU share |\n")
	p("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.runs {
		p("| %d | %s | %.0f | %.3f ms | %.3f ms | %.3f ms | %d | %.2f | %.3f | %.2f | %.0f%% |\n", x.round, x.server, x.qps,
			x.avgLat*1000, x.p50*1000, x.p99*1000, x.lost, x.cpu, x.cpuPer100k(), x.dnsperfCPU, 100*(x.cpu+x.dnsperfCPU)/(x.wall*float64(m.nproc)))
	}
	p("\nQPS per round:\n\n")
	for _, name := range serverNames {
		var v []string
		for _, x := range r.runs {
			if x.server == name {
				v = append(v, fmt.Sprintf("%.0f", x.qps))
			}
		}
		p("- %s: %s\n", name, strings.Join(v, ", "))
	}

	p("\n## Query mix\n\n")
	p("One file for all three servers, shuffled with seed %d:\n\n", cfg.seed)
	p("| kind | share | queries | expected | name |\n| --- | ---: | ---: | --- | --- |\n")
	for k, kd := range kinds {
		exp := kd.rcode
		if kd.name == "AAAA of IPv4-only service" {
			exp = "NOERROR, no answer (NODATA)"
		}
		p("| %s | %.0f%% | %d | %s | %s |\n", kd.name, 100*float64(r.queryMix.counts[k])/float64(len(r.queryMix.lines)), r.queryMix.counts[k], exp, kd.source)
	}
	p("\nResponse codes seen under load (all rounds) against the file's expectation (%s):\n\n", shares(r.queryMix.expectedRcodes()))
	for _, name := range serverNames {
		all := map[string]int{}
		for _, x := range r.runs {
			if x.server == name {
				for k, v := range x.rcodes {
					all[k] += v
				}
			}
		}
		p("- %s: %s\n", name, rcodeString(all))
	}

	p("\n## Correctness: kubernetes vs kubetree\n\n")
	d := r.diff
	p("Before the load, %d questions were asked of both (UDP, EDNS 4096, TCP on truncation): the first %d distinct\n", d.checked, cfg.sample)
	p("questions of the query file plus extra ones not in the load (PTR, SRV on the bare name and other SRV forms,\n")
	p("AAAA and SRV of endpoint names, TXT, upper case, the apex, names that do not exist). Compared: rcode and sorted\n")
	p("answer records (SRV without weight; SOA without serial, a timestamp in both), then SRV weights, the authority\n")
	p("section, the additional section and TTLs.\n\n")
	kinds := make([]string, 0, len(d.byKind))
	for k := range d.byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	p("<details><summary>questions per kind</summary>\n\n")
	for _, k := range kinds {
		p("- %s: %d\n", k, d.byKind[k])
	}
	p("\n</details>\n\n")
	loadQ, loadD, extraQ, extraD := 0, 0, 0, 0
	for k, n := range d.byKind {
		if strings.HasPrefix(k, "extra:") {
			extraQ += n
		} else {
			loadQ += n
		}
	}
	for _, c := range d.classes {
		for _, x := range d.diffs[c] {
			if strings.HasPrefix(x.kind, "extra:") {
				extraD++
			} else {
				loadD++
			}
		}
	}
	p("Of the %d questions from the load mix, %d differ; of the %d extra questions, %d differ", loadQ, loadD, extraQ, extraD)
	p(" (a question can differ in more than one way).\n\n")
	if d.total() == 0 {
		p("No differences.\n")
	}
	for _, c := range d.classes {
		p("**%s: %d**\n\n", c, len(d.diffs[c]))
		kinds, by := d.groups(c)
		for _, k := range kinds {
			p("- %s: %d of %d questions, e.g.\n", k, len(by[k]), d.byKind[k])
			for _, x := range by[k][:min(2, len(by[k]))] {
				p("  - `%s`\n    - kubernetes: `%s`\n    - kubetree: `%s`\n", x.question, x.a, x.b)
			}
		}
		p("\n")
	}

	p("## Start-up trials\n\n| trial | server | ready | first correct answer | first reply (rcode) |\n| ---: | --- | ---: | ---: | --- |\n")
	for _, name := range []string{"kubernetes", "kubetree", "whoami"} {
		for i, st := range r.startups[name] {
			p("| %d | %s | %s | %s | %s (%s) |\n", i+1, name, ms(st.ready), ms(st.answer), ms(st.firstReply), orDash(st.firstRcode))
		}
	}

	p("\n## Phases\n\n| phase | took |\n| --- | ---: |\n")
	for i, n := range r.phases.names {
		p("| %s | %s |\n", n, r.phases.durs[i].Round(100*time.Millisecond))
	}
	p("| total | %s |\n", r.ended.Sub(r.began).Round(time.Second))
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func shares(m map[string]float64) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", k, 100*m[k]))
	}
	return strings.Join(parts, ", ")
}

// publish prints a mode's report, and writes it to -out when one is given.
func publish(cfg *config, report string) error {
	fmt.Println(report)
	if cfg.out == "" {
		return nil
	}
	if err := os.WriteFile(cfg.out, []byte(report), 0o644); err != nil {
		return err
	}
	logf("wrote %s", cfg.out)
	return nil
}
