package sidebyside

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// markdown is the report.
func (r *results) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	r.header(p)
	r.resultsSection(p)
	r.chartsSection(p)
	if r.heap != nil {
		p("%s", r.heap.markdown())
	}
	r.rawNumbers(p)
	r.queryMixSection(p)
	r.correctness(p)
	r.trialsAndPhases(p)
	return b.String()
}

// header is the report's title, and what was run where and how.
func (r *results) header(p func(format string, args ...any)) {
	cfg, m, cl := r.cfg, r.machine, r.cluster
	p("# kubetree benchmark results\n\n")
	p("Written by `bench/` (see README.md); committed output of one run. Every number below comes from one\n")
	p("run in which the three servers were measured side by side, alternating; compare the ratios, not the\n")
	p("absolute numbers, which depend on a shared, noisy 2-core machine.\n\n")
	p("- date: %s (run took %s)\n", r.began.UTC().Format("2006-01-02 15:04 MST"), r.ended.Sub(r.began).Round(time.Second))
	p("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s; load average at the start %s, at the end %s\n",
		m.Nproc, m.CPU, m.Memory, m.Kernel, m.LoadStart, measure.Loadavg())
	p("- versions: %s, built with %s; kube-apiserver %s (kubernetes v1.37.2 from hack/tools); bench client-go %s, %s; dnsperf %s\n",
		m.Coredns, m.CoreDNSGo, r.k8sVersion, m.ClientGo, m.GoVersion, m.Dnsperf)
	p("- kubetree source (bin/coredns is built from the working tree): %s\n", m.Source)
	p("- command: %s\n", r.command())
	p("- cluster: %d namespaces, %d services (%d ClusterIP, %d headless), each with a named port (tcp `http`) and one EndpointSlice of %d ready endpoints (headless: hostnames on half of them); %d API objects, created in %s with %d concurrent clients\n",
		len(cl.Namespaces), len(cl.Services), len(cl.Services)-cl.Headless, cl.Headless, cl.Endpoints, cl.Objects, cl.Created.Round(100*time.Millisecond), cfg.Workers)
	p("- load: dnsperf `-c %d -q %d -l %s -t 1 -v`, UDP, no EDNS, %d rounds (+ a %s warm-up per server), servers in rotating order; query file of %d queries (below)\n",
		cfg.Clients, cfg.Outstanding, strings.TrimSuffix(fmt.Sprint(cfg.Duration.Seconds()), ".0"), cfg.Rounds, cfg.Warmup, len(r.queryMix.lines))
	opts := ""
	for _, o := range measure.PluginOptions {
		opts += "; " + o
	}
	p("- Corefiles: identical but for the plugin line — `bind 127.0.0.1`, `prometheus`, `ready`, then `kubernetes cluster.local in-addr.arpa ip6.arpa { kubeconfig …%s }`, the same with `kubetree`, or `whoami`; no `cache`, no `log`\n\n", opts)
}

// resultsSection is the table, and what its figures are.
func (r *results) resultsSection(p func(format string, args ...any)) {
	cfg := r.cfg
	p("## Results\n\n")
	p("%s\n", r.table())
	qps := r.perServer(func(x measure.RunResult) float64 { return x.QPS })
	if qps[1] >= 0.9*qps[2] {
		p("- kubetree's QPS is at or near whoami's (kubetree/whoami %.2f): at the ceiling of CoreDNS + dnsperf on this machine, where\n", qps[1]/qps[2])
		p("  round-to-round noise decides the order. Its QPS ratio to kubernetes is then a lower bound, and the CPU per query\n")
		p("  separates the three better than QPS does.\n")
	}
	p("- QPS, average latency: dnsperf's own statistics. p99: from dnsperf's per-query latencies (`-v`, written to a file and\n")
	p("  read after the run), i.e. under full load, dominated by queueing behind `-q %d` outstanding queries.\n", cfg.Outstanding)
	p("- CPU: utime+stime of the server process from /proc/PID/stat over each run, divided by the completed queries.\n")
	p("- RSS: VmRSS from /proc/PID/status; Go heap: `go_memstats_heap_alloc_bytes` from /metrics (median of 5 samples 200 ms apart).\n")
	p("  \"After sync\" is 5 s after the plugins answered, \"after load\" 2 s after the last dnsperf run. The growth rows subtract\n")
	p("  the RSS of the idle whoami server after sync (%s).\n", measure.MiB(r.memSync["whoami"].RSS))
	p("- start → ready: from exec to the ready plugin's 200; start → first correct answer: to the first UDP reply with the\n")
	p("  right address for the last service created (both polled in tight loops). kubernetes and kubetree were started\n")
	p("  alternately, one at a time; whoami ready is listed for scale. The trials spread widely on a shared machine:")
	for _, name := range []string{"kubernetes", "kubetree"} {
		var v []float64
		for _, st := range r.startups[name] {
			if st.Ready >= 0 {
				v = append(v, float64(st.Ready.Milliseconds()))
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
		p("  the slice stamped with `endpoints.kubernetes.io/last-change-trigger-time` (now), %d clients at once, in %s; both\n", cfg.Workers, sl.took.Round(100*time.Millisecond))
		p("  servers watching, and waited for until both answer the last one. CPU: utime+stime over the updates, less the\n")
		p("  server's idle CPU (kubernetes %.1f ms/s, kubetree %.1f ms/s, measured for 10 s before), divided by the updates.\n", sl.idle["kubernetes"]*1000, sl.idle["kubetree"]*1000)
		p("  Programming latency: each plugin's `dns_programming_duration_seconds` histogram over the updates (kubernetes %d,\n", sl.latency["kubernetes"].Count())
		p("  kubetree %d observations), quantiles estimated as Prometheus's histogram_quantile does (linear in the bucket); the\n", sl.latency["kubetree"].Count())
		p("  in-tree plugin stops the clock when it stores the slice, kubetree when it serves the change.\n\n")
	}
}

// chartsSection embeds the charts, and gives the memory at each cluster size.
func (r *results) chartsSection(p func(format string, args ...any)) {
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
		p("(the last row is the main run's \"after sync\"). RSS growth subtracts the idle whoami server's RSS (%s).\n\n", measure.MiB(r.memSync["whoami"].RSS))
		p("| services | endpoints | kubernetes RSS growth | kubetree RSS growth | ratio | kubernetes heap | kubetree heap | ratio |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		idle := r.memSync["whoami"].RSS
		for _, pt := range pts {
			k, t := pt.mem["kubernetes"], pt.mem["kubetree"]
			p("| %d | %d | %s | %s | %.2f | %s | %s | %.2f |\n", pt.services, pt.endpoints, measure.MiB(k.RSS-idle), measure.MiB(t.RSS-idle),
				(t.RSS-idle)/(k.RSS-idle), measure.MiB(k.Heap), measure.MiB(t.Heap), t.Heap/k.Heap)
		}
		p("\n")
	}
}

// rawNumbers are every dnsperf run's figures.
func (r *results) rawNumbers(p func(format string, args ...any)) {
	m := r.machine
	p("## Per-round raw numbers\n\n")
	p("The last column is the CPU the server and dnsperf got together, as a share of all %d CPUs: where it drops, something\n", m.Nproc)
	p("else on the machine took CPU during that run.\n\n")
	p("| round | server | QPS | avg latency | p50 | p99 | lost | server CPU s | CPU s / 100k | dnsperf CPU s | server+dnsperf CPU share |\n")
	p("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.runs {
		p("| %d | %s | %.0f | %.3f ms | %.3f ms | %.3f ms | %d | %.2f | %.3f | %.2f | %.0f%% |\n", x.Round, x.Server, x.QPS,
			x.AvgLat*1000, x.P50*1000, x.P99*1000, x.Lost, x.CPU, x.CPUPer100k(), x.DnsperfCPU, 100*(x.CPU+x.DnsperfCPU)/(x.Wall*float64(m.Nproc)))
	}
	p("\nQPS per round:\n\n")
	for _, name := range serverNames {
		var v []string
		for _, x := range r.runs {
			if x.Server == name {
				v = append(v, fmt.Sprintf("%.0f", x.QPS))
			}
		}
		p("- %s: %s\n", name, strings.Join(v, ", "))
	}
}

// queryMixSection is the query file's mix, and the rcodes seen.
func (r *results) queryMixSection(p func(format string, args ...any)) {
	cfg := r.cfg
	p("\n## Query mix\n\n")
	p("One file for all three servers (`-mix %s`), shuffled with seed %d:\n\n", cfg.Mix, cfg.Seed)
	p("| kind | share | queries | expected | name |\n| --- | ---: | ---: | --- | --- |\n")
	for k, kd := range r.queryMix.kinds {
		exp := kd.rcode
		if kd.name == "AAAA of IPv4-only service" {
			exp = "NOERROR, no answer (NODATA)"
		}
		p("| %s | %.0f%% | %d | %s | %s |\n", kd.name, 100*float64(r.queryMix.counts[k])/float64(len(r.queryMix.lines)), r.queryMix.counts[k], exp, kd.source)
	}
	p("\nResponse codes seen under load (all rounds) against the file's expectation (%s):\n\n", measure.Shares(r.queryMix.expectedRcodes(), 1))
	for _, name := range serverNames {
		all := map[string]int{}
		for _, x := range r.runs {
			if x.Server == name {
				for k, v := range x.Rcodes {
					all[k] += v
				}
			}
		}
		p("- %s: %s\n", name, measure.RcodeString(all))
	}
}

// correctness is how the two plugins' answers differ.
func (r *results) correctness(p func(format string, args ...any)) {
	cfg := r.cfg
	p("\n## Correctness: kubernetes vs kubetree\n\n")
	d := r.diff
	p("Before the load, %d questions were asked of both (UDP, EDNS 4096, TCP on truncation): the first %d distinct\n", d.checked, cfg.Sample)
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
}

// trialsAndPhases are the start-up trials, and how long each phase took.
func (r *results) trialsAndPhases(p func(format string, args ...any)) {
	p("## Start-up trials\n\n| trial | server | ready | first correct answer | first reply (rcode) |\n| ---: | --- | ---: | ---: | --- |\n")
	for _, name := range []string{"kubernetes", "kubetree", "whoami"} {
		for i, st := range r.startups[name] {
			p("| %d | %s | %s | %s | %s (%s) |\n", i+1, name, measure.Millis(st.Ready), measure.Millis(st.Answer), measure.Millis(st.FirstReply), measure.OrDash(st.FirstRcode))
		}
	}

	p("\n## Phases\n\n| phase | took |\n| --- | ---: |\n")
	for i, n := range r.phases.names {
		p("| %s | %s |\n", n, r.phases.durs[i].Round(100*time.Millisecond))
	}
	p("| total | %s |\n", r.ended.Sub(r.began).Round(time.Second))
}
