package steady

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// markdown is the report.
func (res *steadyResult) markdown(cfg Options) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	res.header(p, cfg)
	res.watches(p, cfg)
	res.windowTable(p, cfg)
	res.auditTable(p, cfg)
	res.perHour(p)
	return b.String()
}

// header is the report's title, and what was run where.
func (res *steadyResult) header(p func(format string, args ...any), cfg Options) {
	m, cl := res.Machine, res.Cluster
	p("# What a replica costs the API server under steady churn\n\n")
	p("Written by `bench/` (see README.md); committed output of one run.\n\n")
	cmd := fmt.Sprintf("cd bench && go run . -steady -services %d -endpoints %d -headless %.2f -steady-rate %d -steady-window %s -steady-rounds %d -steady-replicas %d -audits %d -audit-interval %s",
		cfg.Services, cfg.Endpoints, cfg.Headless, cfg.Rate, cfg.Window, cfg.Rounds, cfg.Replicas, cfg.Audits, cfg.Interval)
	var extra []string
	for _, sv := range cfg.Kubetree {
		extra = append(extra, sv.name+"="+sv.binary)
	}
	if len(extra) > 0 {
		cmd += " -steady-kubetree " + strings.Join(extra, ",")
	}
	p("- command: `%s`\n", cmd)
	p("- date: %s (run took %s)\n", res.Began.UTC().Format("2006-01-02 15:04 MST"), res.Ended.Sub(res.Began).Round(time.Second))
	p("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s, shared with other work; load average at the start %s, at the end %s\n",
		m.Nproc, m.CPU, m.Memory, m.Kernel, m.LoadStart, measure.Loadavg())
	p("- versions: kube-apiserver %s (etcd and kube-apiserver from `make control-plane`), %s\n", res.Version, m.Coredns)
	p("- bin/coredns (kubernetes and kubetree): %s; built from %s\n", m.Source, res.sources["kubetree"])
	for _, sv := range cfg.Kubetree {
		p("- %s: `%s`, built from %s\n", sv.name, sv.binary, res.sources[sv.name])
	}
	p("- cluster: %d namespaces, %d services (%d headless), each with one EndpointSlice of %d endpoints as the EndpointSlice controller writes them: %d endpoints, %d API objects\n",
		len(cl.Namespaces), len(cl.Services), cl.Headless, cl.Endpoints, len(cl.Services)*cl.Endpoints, cl.Objects)
	p("- churn: %d EndpointSlice updates a second throughout (achieved %.2f/s over %s, %d failed or dropped), protobuf, each one endpoint of one slice as the controller writes it: its pod not ready, ready again, or replaced (new name, UID, node and address), stamped with its trigger time; services taken round-robin\n\n",
		cfg.Rate, float64(res.churnDone)/res.churnFor.Seconds(), res.churnFor.Round(time.Second), res.churnFailed)
}

// watches is what each server's watches cost per replica-hour under the churn.
func (res *steadyResult) watches(p func(format string, args ...any), cfg Options) {
	gcb := res.gc.PerByte()
	names := []string{}
	for _, sv := range res.servers {
		names = append(names, sv.name)
	}
	p("## The watches under churn\n\n")
	p("One server at a time talks to the API server, in %d replica(s), each through a TCP proxy that counts the bytes each way (TLS records included); kubetree with `audit_interval 0`. ", cfg.Replicas)
	p("In each of %d rounds: %s, then no server, each for a window of %s from %s after every replica answered (the initial lists are not in the window). ",
		cfg.Rounds, strings.Join(names, ", "), cfg.Window, cfg.Settle)
	p("CPU is utime+stime from /proc, read every second. The API server collects garbage once its heap has grown by about as much as is live (%s here, the watch cache), then for a second or more, so a window may hold one collection, two or none: ", measure.Human(res.gc.LiveHeap))
	p("the busiest %.0f%% of a window's seconds are counted at the mean of its others, and the collector is charged instead by what the window allocated (go_gc_heap_allocs_bytes_total), at its CPU per allocated byte over the run by its runtime's count (go_cpu_classes_gc_total_cpu_seconds_total): %.3f s for %s (%.0f cycles), %.2f s per GB. ",
		apicost.Trim*100, res.gc.CPU, measure.Human(res.gc.Alloc), res.gc.Cycles, gcb*1e9)
	p("A replica's CPU is its window's less the no-server window's of the same round (the churn's own cost), divided by the replicas; the median of the rounds.\n\n")
	p("| per replica-hour | %s |\n| --- |%s\n", strings.Join(names, " | "), strings.Repeat(" ---: |", len(names)))
	row := func(what string, f func(string) string) {
		p("| %s |", what)
		for _, n := range names {
			p(" %s |", f(n))
		}
		p("\n")
	}
	row("bytes sent by the API server (through the proxy)", func(n string) string { return measure.Human(res.figures(n).down * 3600) })
	row("&nbsp;&nbsp;per EndpointSlice update", func(n string) string {
		return measure.Human(res.figures(n).down / res.rate(n))
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
			v = append(v, w.PerReplica(w.Initial))
		}
		return measure.Human(measure.Median(v))
	})
	row("from exec to the first right answer", func(n string) string {
		var v []float64
		for _, w := range res.windows[n] {
			v = append(v, w.Answer)
		}
		return fmt.Sprintf("%.1f s", measure.Median(v))
	})
	base := res.figures("kubernetes")
	row("bytes / in-tree", func(n string) string { return measure.Ratio(res.figures(n).down, base.down) })
	row("CPU / in-tree", func(n string) string { return measure.Ratio(res.figures(n).cpu, base.cpu) })
	p("\n")
}

// windowTable is every window's figures.
func (res *steadyResult) windowTable(p func(format string, args ...any), cfg Options) {
	gcb := res.gc.PerByte()
	p("Every window (per second, its replicas together): the churn achieved, bytes the API server sent through the proxy, its CPU as measured, the same with its busiest seconds at the mean of the others, its collector's by its runtime's count (an estimate from the time its workers were scheduled, which on a busy machine runs high), its allocations, its CPU with the collector charged by allocation, etcd's and the server's CPU.\n\n")
	p("| round | server | updates/s | bytes/s | API server CPU | outside the busiest seconds | collector (its count) | allocated/s | charged CPU | etcd CPU | server CPU |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for round := range cfg.Rounds {
		for _, sv := range append(slices.Clone(res.servers), Server{}) {
			ws := res.windows[sv.name]
			if round >= len(ws) {
				continue
			}
			w := ws[round]
			p("| %d | %s | %.2f | %s | %.4f | %.4f | %.4f | %s | %.4f | %.4f | %.4f |\n", round+1, serverLabel(sv.name), float64(w.Updates)/w.Secs,
				measure.Human(w.Down/w.Secs), w.APICPU/w.Secs, w.SteadyCPU/w.Secs, w.GCCPU/w.Secs, measure.Human(w.Alloc/w.Secs), w.Charged(gcb)/w.Secs, w.EtcdCPU/w.Secs, w.ServerCPU/w.Secs)
		}
	}
	p("\n")
}

// auditTable is what an audit of each kubetree build costs under the churn.
func (res *steadyResult) auditTable(p func(format string, args ...any), cfg Options) {
	gcb := res.gc.PerByte()
	p("## The audit under the same churn\n\n")
	p("Each kubetree build once more, with `audit_interval %s`: its first audit not counted, the next %d measured as `-audit` measures them (AUDIT.md): bytes through the proxy and the API server's CPU in each audit's window (%s before it to %s after it), less the rates between audits (the watches and the churn), the median; its allocations per audit, less the rate of the build's windows above, charged at the collector's rate.\n\n",
		cfg.Interval, cfg.Audits, apicost.AuditLead, apicost.AuditTail)
	p("| per audit | bytes sent by the API server | API server CPU in the window | heap allocated | CPU with the collector's share | duration |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	var notInStep []string
	for _, sv := range res.servers {
		r := res.audits[sv.name]
		if r == nil {
			continue
		}
		p("| %s | %s | %.3f s | %s | %.3f s | %.3f s |\n", sv.name, measure.Human(r.Median(func(a apicost.AuditWindow) float64 { return a.Down })),
			r.Median(func(a apicost.AuditWindow) float64 { return a.APICPU }), measure.Human(r.Alloc), r.APICPU(gcb), r.Median(func(a apicost.AuditWindow) float64 { return a.Took.Seconds() }))
		if len(r.Other) > 0 {
			notInStep = append(notInStep, fmt.Sprintf("%s: audits that did not find the cluster in step: %q\n\n", sv.name, r.Other))
		}
	}
	p("\n%s", strings.Join(notInStep, ""))
}

// perHour is each kubetree build's watches and audits per replica-hour at each audit interval,
// against the in-tree replica's watches, and the shortest interval that meets the goal.
func (res *steadyResult) perHour(p func(format string, args ...any)) {
	base := res.figures("kubernetes")
	p("## Per replica-hour, with the audit\n\n")
	p("A kubetree replica's watches (above) plus an hour of audits at each interval (its waits are drawn from ±20%% of it: 3600/interval audits an hour on average), against the in-tree replica's watches: %s and %.1f s of API server CPU an hour. The goal: at most %.2f× in both.\n\n",
		measure.Human(base.down*3600), base.cpu*3600, apicost.Goal)
	p("| server | audit interval | bytes / replica-hour | / in-tree | API server CPU / replica-hour | / in-tree | both ≤ %.2f× |\n| --- | ---: | ---: | ---: | ---: | ---: | :---: |\n", apicost.Goal)
	for _, sv := range res.servers {
		if sv.plugin != "kubetree" {
			continue
		}
		for _, iv := range append([]time.Duration{0}, apicost.Intervals...) {
			bytes, cpu := res.hourly(sv.name, iv)
			ivs := "no audit"
			if iv > 0 {
				ivs = measure.ShortDuration(iv)
			}
			ok := "no"
			switch {
			case !res.cpuResolved() && bytes <= apicost.Goal*base.down*3600:
				ok = "bytes yes, CPU not resolved"
			case !res.cpuResolved():
				ok = "bytes no"
			case bytes <= apicost.Goal*base.down*3600 && cpu <= apicost.Goal*base.cpu*3600:
				ok = "yes"
			}
			p("| %s | %s | %s | %s | %.1f s | %s | %s |\n", sv.name, ivs, measure.Human(bytes), measure.Ratio(bytes, base.down*3600), cpu, measure.Ratio(cpu, base.cpu*3600), ok)
		}
	}
	p("\n")
	for _, sv := range res.servers {
		if sv.plugin != "kubetree" {
			continue
		}
		switch iv, ok := res.meets(sv.name, !res.cpuResolved()); {
		case !res.cpuResolved() && ok:
			p("- %s: the shortest interval of %s that meets the goal in bytes is **%s**; CPU not judged: the in-tree replica's CPU did not come out above the API server's own variation in this run.\n", sv.name, apicost.IntervalList(), measure.ShortDuration(iv))
		case !res.cpuResolved():
			p("- %s: no interval of %s meets the goal in bytes; CPU not judged: the in-tree replica's CPU did not come out above the API server's own variation in this run.\n", sv.name, apicost.IntervalList())
		case ok:
			p("- %s: the shortest interval of %s that meets the goal in both bytes and CPU is **%s**.\n", sv.name, apicost.IntervalList(), measure.ShortDuration(iv))
		default:
			p("- %s: no interval of %s meets the goal in both bytes and CPU.\n", sv.name, apicost.IntervalList())
		}
	}
	p("\n")
}
