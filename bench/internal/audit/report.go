package audit

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// markdown is the report.
func (res *auditResult) markdown(cfg Options) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	res.header(p, cfg)
	res.perAudit(p, cfg)
	res.perHour(p)
	res.lists(p, cfg)
	return b.String()
}

// header is the report's title, and what was run where.
func (res *auditResult) header(p func(format string, args ...any), cfg Options) {
	m, cl := res.Machine, res.Cluster
	endpoints := len(cl.Services) * cl.Endpoints
	p("# The audit's cost to the API server\n\n")
	cmd := fmt.Sprintf("cd bench && go run . -audit -services %d -endpoints %d -headless %.2f -audits %d -audit-interval %s",
		cfg.Services, cfg.Endpoints, cfg.Headless, cfg.Audits, cfg.Interval)
	if cfg.Before != "" {
		cmd += " -audit-before " + cfg.Before
	}
	if !cfg.ControllerSlices {
		cmd += " -controller-slices=false"
	}
	p("Written by `bench/` (see README.md); committed output of one run.\n\n")
	p("- command: `%s`\n", cmd)
	p("- date: %s (run took %s)\n", res.Began.UTC().Format("2006-01-02 15:04 MST"), res.Ended.Sub(res.Began).Round(time.Second))
	p("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s, shared with other builds; load average at the start %s, at the end %s\n",
		m.Nproc, m.CPU, m.Memory, m.Kernel, m.LoadStart, measure.Loadavg())
	p("- versions: kube-apiserver %s (etcd and kube-apiserver from `make control-plane`), %s\n", res.Version, m.Coredns)
	p("- kubetree source (bin/coredns): %s\n", m.Source)
	shape := "as the EndpointSlice controller writes them (serving and terminating conditions, node, zone, pod name and UID per endpoint; owner, managed-by label and trigger time per slice)"
	if !cfg.ControllerSlices {
		shape = "with addresses, the ready condition and hostnames only"
	}
	p("- cluster: %d namespaces, %d services (%d headless), each with one EndpointSlice of %d endpoints, %s: %d endpoints, %d API objects\n\n",
		len(cl.Namespaces), len(cl.Services), cl.Headless, cl.Endpoints, shape, endpoints, cl.Objects)
}

// perAudit is what one audit costs, by kubetree build.
func (res *auditResult) perAudit(p func(format string, args ...any), cfg Options) {
	gcb := res.gc.PerByte()
	p("## Per audit\n\n")
	p("One server at a time talks to the API server, through a TCP proxy that counts the bytes each way (TLS records included). ")
	p("Each kubetree runs with `audit_interval %s`; its first audit is not counted, the next %d are: the median, and the lowest and highest. ", cfg.Interval, cfg.Audits)
	p("CPU is utime+stime from /proc, sampled every 50 ms, in each audit's window (from %s before it starts to %s after it ends), less each process's CPU per second between audits. ", apicost.AuditLead, apicost.AuditTail)
	p("The API server's garbage collection mostly falls outside the windows: with %s live (the watch cache), it collects after about as much has been allocated, then for a second or more. ", measure.Human(res.gc.LiveHeap))
	p("Its share is charged by allocation: over this run the collector used %.3f s of CPU for %s allocated (%.0f cycles), %.2f s per GB; an audit is charged its allocations (go_gc_heap_allocs_bytes_total, less the rate at rest) at that rate.\n\n",
		res.gc.CPU, measure.Human(res.gc.Alloc), res.gc.Cycles, gcb*1e9)
	res.auditTable(p)
	if res.runs[0].Lists["services"] != float64(int(res.runs[0].Lists["services"])) {
		p("LIST requests of services come in fractions because the API server lists every service itself now and then (its ClusterIP repair loop); its responses count in the response bytes too, not in the bytes through the proxy.\n\n")
	}
	for _, r := range res.runs {
		if len(r.Other) > 0 {
			p("%s: audits that did not find the cluster in step: %q\n\n", runLabel(r), r.Other)
		}
		p("%s between audits: the API server sent %.0f bytes/s (watches, HTTP/2 pings) and used %.3f CPU s/s; etcd %.3f, kubetree %.3f. Its initial list: %s.\n\n",
			runLabel(r), r.Idle.Down, r.Idle.APICPU, r.Idle.EtcdCPU, r.Idle.ServerCPU, measure.Human(r.Initial))
	}
}

// auditTable is the table of perAudit: a column for each kubetree build, and with two the ratio.
func (res *auditResult) auditTable(p func(format string, args ...any)) {
	gcb := res.gc.PerByte()
	names := []string{}
	for _, r := range res.runs {
		names = append(names, runLabel(r))
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
	row := func(what string, f func(*apicost.AuditRun) float64, format func(float64) string, spread func(*apicost.AuditRun) string) {
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
	window := func(f func(apicost.AuditWindow) float64, format func(float64) string) (func(*apicost.AuditRun) float64, func(*apicost.AuditRun) string) {
		return func(r *apicost.AuditRun) float64 { return r.Median(f) }, func(r *apicost.AuditRun) string {
			lo, hi := r.Spread(f)
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
	fBytes := func(v float64) string { return measure.Human(v) }
	fCount := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	fSec := func(v float64) string { return fmt.Sprintf("%.3f s", v) }
	f, s := window(func(a apicost.AuditWindow) float64 { return a.Down }, fBytes)
	row("bytes sent by the API server (through the proxy)", f, fBytes, s)
	row("LIST response bytes (apiserver_response_sizes)", func(r *apicost.AuditRun) float64 { return sum(r.ListSize) }, fBytes, nil)
	for _, resource := range []string{"endpointslices", "services", "namespaces"} {
		row("&nbsp;&nbsp;of which "+resource, func(r *apicost.AuditRun) float64 { return r.ListSize[resource] }, fBytes, nil)
	}
	row("LIST requests (apiserver_request_total)", func(r *apicost.AuditRun) float64 { return sum(r.Lists) }, fCount, nil)
	f, s = window(func(a apicost.AuditWindow) float64 { return a.Up }, fBytes)
	row("bytes sent to the API server", f, fBytes, s)
	f, s = window(func(a apicost.AuditWindow) float64 { return a.APICPU }, fSec)
	row("kube-apiserver CPU in the audit's window", f, fSec, s)
	row("kube-apiserver heap allocated", func(r *apicost.AuditRun) float64 { return r.Alloc }, fBytes, nil)
	row("&nbsp;&nbsp;its collector's share", func(r *apicost.AuditRun) float64 { return r.Alloc * gcb }, fSec, nil)
	row("**kube-apiserver CPU** (window + collector's share)", func(r *apicost.AuditRun) float64 { return r.APICPU(gcb) }, fSec, nil)
	f, s = window(func(a apicost.AuditWindow) float64 { return a.EtcdCPU }, fSec)
	row("etcd CPU in the window (within the noise of its CPU at rest)", f, fSec, s)
	f, s = window(func(a apicost.AuditWindow) float64 { return a.ServerCPU }, fSec)
	row("kubetree CPU in the window", f, fSec, s)
	f, s = window(func(a apicost.AuditWindow) float64 { return a.Took.Seconds() }, fSec)
	row("duration (kubetree's log; its client paces requests at 5 a second after 10)", f, fSec, s)
	p("\n")
}

// perHour is what an hour of audits costs at each of auditCandidates, beside the in-tree
// plugin's watches.
func (res *auditResult) perHour(p func(format string, args ...any)) {
	gcb := res.gc.PerByte()
	p("## Per replica-hour\n\n")
	it := res.inTree
	watchPerHour := it.idleBytes / it.idleFor.Seconds() * 3600
	p("The in-tree kubernetes plugin asks for nothing after its initial list (%s here, gzip-compressed: client-go's default transport asks for it) but its watches: %s an hour (%s measured over %s of an idle cluster: bookmarks and HTTP/2 frames). ",
		measure.Human(it.initial), measure.Human(watchPerHour), measure.Human(it.idleBytes), it.idleFor.Round(time.Second))
	p("kubetree's watches cost the same; the audit comes on top of them. An hour of audits at each interval (its waits are drawn from ±20%% of it, so it audits 3600/interval times an hour on average), ")
	p("as bytes, as that many initial lists of the in-tree plugin, and as API server CPU (window + collector's share); and for a fleet of 313 replicas (the DNS autoscaler's linear mode at 5,000 nodes):\n\n")
	p("| server | interval | API server bytes / replica-hour | in-tree initial lists / replica-hour | API server CPU / replica-hour | 313 replicas: bytes/s | 313 replicas: API server cores |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	p("| kubernetes (in-tree) | — | %s | %.4f | — | %s/s | — |\n", measure.Human(watchPerHour), watchPerHour/it.initial, measure.Human(watchPerHour*313/3600))
	for _, r := range res.runs {
		down := r.Median(func(a apicost.AuditWindow) float64 { return a.Down })
		cpu := r.APICPU(gcb)
		for _, iv := range auditCandidates {
			perHour := 3600 / iv.Seconds()
			p("| %s | %s | %s | %.2f | %.2f s | %s/s | %.3f |\n", runLabel(r), measure.ShortDuration(iv), measure.Human(down*perHour), down*perHour/it.initial,
				cpu*perHour, measure.Human(down*perHour*313/3600), cpu*perHour*313/3600)
		}
	}
	if len(res.runs) == 2 {
		before, after := res.runs[0], res.runs[1]
		bd := before.Median(func(a apicost.AuditWindow) float64 { return a.Down })
		ad := after.Median(func(a apicost.AuditWindow) float64 { return a.Down })
		bc, ac := before.APICPU(gcb), after.APICPU(gcb)
		p("\nBefore/after, per audit: %.1f for the bytes, %.1f for the API server's CPU. Per replica-hour, the audit before every 5m (its default) over the audit now every ", bd/ad, bc/ac)
		var parts []string
		for _, iv := range auditCandidates {
			k := iv.Seconds() / (5 * time.Minute).Seconds()
			parts = append(parts, fmt.Sprintf("%s: %.0f for the bytes, %.0f for the CPU", measure.ShortDuration(iv), bd/ad*k, bc/ac*k))
		}
		p("%s.\n", strings.Join(parts, "; "))
	}
}

// lists is what the audit's lists cost asked for directly: in one list or in pages, compressed
// or not.
func (res *auditResult) lists(p func(format string, args ...any), cfg Options) {
	gcb := res.gc.PerByte()
	p("\n## One list or pages, compressed or not\n\n")
	p("The audit's metadata lists (services, EndpointSlices and namespaces, protobuf, resourceVersion \"\") asked for directly, %d passes each way, one pass at a time, through a counting proxy, without client-side pacing, after no object had changed for %s. ", cfg.Audits, res.quietFor.Round(time.Second))
	p("CPU from the start of a pass to %s after it, less the API server's rate at rest (median); heap allocated per pass from its metrics, less its rate at rest; the collector's share at %.2f s per GB on top. ", apicost.AuditTail, gcb*1e9)
	p("A page after the first is served from the watch cache's snapshot at the list's revision; a resource that has not changed since etcd was last compacted (every 5 minutes) has none, and the API server reads the page from etcd and decodes every object of it in full. ")
	p("kubetree's audit asks for one list of each, uncompressed (`Accept-Encoding: identity`, internal/watcher/audit.go): gzip would cut the bytes tenfold, but at the audit's interval the bytes are not what binds, and compressing them costs the API server CPU on every pass.\n\n")
	p("| a pass of the metadata lists | requests | bytes sent by the API server | kube-apiserver CPU | its heap allocated | CPU with the collector's share |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, ps := range res.passes {
		p("| %s | %d | %s | %.3f s | %s | %.3f s |\n", ps.label(), ps.requests, measure.Human(ps.bytes), ps.apiCPU, measure.Human(ps.alloc), ps.apiCPU+ps.alloc*gcb)
	}
}

// runLabel is a kubetree build's column in the report.
func runLabel(r *apicost.AuditRun) string {
	if r.Name == "kubetree-before" {
		return "kubetree before (full lists)"
	}
	return "kubetree (metadata lists)"
}
