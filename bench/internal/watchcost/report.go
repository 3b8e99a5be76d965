package watchcost

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// markdown is the report.
func (res *watchCostResult) markdown(cfg Options) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	res.header(p, cfg)
	res.perEventTables(p, cfg)
	if res.audit != nil {
		res.auditTable(p, cfg)
		res.perHour(p, cfg)
	}
	return b.String()
}

// header is the report's title, and what was run where.
func (res *watchCostResult) header(p func(format string, args ...any), cfg Options) {
	m, cl := res.Machine, res.Cluster
	p("# What a plain EndpointSlice watch and kubetree's audit cost the API server\n\n")
	p("Written by `bench/` (see README.md, `-watch-cost`); committed output of one run.\n\n")
	p("- command: `cd bench && go run . -watch-cost %d -services %d -endpoints %d -headless %.2f -steady-rate %d -steady-window %s -steady-rounds %d -audits %d -audit-interval %s`\n",
		res.watchers, cfg.Services, cfg.Endpoints, cfg.Headless, cfg.Rate, cfg.Window, cfg.Rounds, cfg.Audits, cfg.Interval)
	p("- date: %s (run took %s)\n", res.Began.UTC().Format("2006-01-02 15:04 MST"), res.Ended.Sub(res.Began).Round(time.Second))
	p("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s, shared with other work; load average at the start %s, at the end %s\n",
		m.Nproc, m.CPU, m.Memory, m.Kernel, m.LoadStart, measure.Loadavg())
	p("- versions: kube-apiserver %s (etcd and kube-apiserver from `make control-plane`); kubetree (its audit): bin/coredns, %s\n", res.Version, m.Source)
	p("- cluster: %d namespaces, %d services (%d headless), each with one EndpointSlice of %d endpoints as the EndpointSlice controller writes them: %d endpoints\n",
		len(cl.Namespaces), len(cl.Services), cl.Headless, cl.Endpoints, len(cl.Services)*cl.Endpoints)
	p("- churn: %d EndpointSlice updates a second throughout, each one endpoint of one slice as `-steady` writes it\n\n", cfg.Rate)
}

// perEventTables are every window's figures, and what a watch costs per event over each protocol.
func (res *watchCostResult) perEventTables(p func(format string, args ...any), cfg Options) {
	p("## A watch's cost per event\n\n")
	p("%d watches of every EndpointSlice, each on a TLS connection of its own through a proxy that counts its bytes, protobuf, plain, from the version current when they open (as a reflector's after its list), their events read and dropped: over HTTP/2 (the in-tree plugin's, and kubetree's while quiet), then over HTTP/1.1 (kubetree's while busy), then none; in each of %d rounds, each window %s from %s after the watches opened. CPU is the API server's utime+stime from /proc; \"charged\" is -steady's count (its busiest %.0f%% of seconds at the mean of the others, its collector charged by what the window allocated, at %.2f s per GB, its runtime's count over the run).\n\n",
		res.watchers, cfg.Rounds, cfg.Window, cfg.Settle, apicost.Trim*100, res.gc.PerByte()*1e9)
	p("| round | watches | updates/s | bytes/s sent | API server CPU s/s | charged | allocated/s |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
	gcb := res.gc.PerByte()
	for round := range cfg.Rounds {
		for _, v := range append(slices.Clone(watchVariants), watchVariant{}) {
			ws := res.windows[v.name]
			if round >= len(ws) {
				continue
			}
			w := ws[round]
			label := "none"
			if v.name != "" {
				label = fmt.Sprintf("%d over %s", w.Replicas, v.name)
			}
			p("| %d | %s | %.2f | %s | %.4f | %.4f | %s |\n", round+1, label, float64(w.Updates)/w.Secs, measure.Human(w.Down/w.Secs),
				w.APICPU/w.Secs, w.Charged(gcb)/w.Secs, measure.Human(w.Alloc/w.Secs))
		}
	}
	us := func(v []float64) string {
		var s []string
		for _, x := range v {
			s = append(s, fmt.Sprintf("%.1f", x*1e6))
		}
		return strings.Join(s, ", ")
	}
	p("\n| per event and watch | API server CPU, as measured | each round | charged | each round | bytes sent |\n| --- | ---: | --- | ---: | --- | ---: |\n")
	for _, v := range watchVariants {
		measured, charged := res.perEvent(v.name, false), res.perEvent(v.name, true)
		p("| %s | **%.1f µs** | %s | %.1f µs | %s | %s |\n", v.name, measure.Median(measured)*1e6, us(measured), measure.Median(charged)*1e6, us(charged), measure.Human(res.bytesPerEvent(v.name)))
	}
	p("\n")
}

// auditTable is what kubetree's audit costs under the churn.
func (res *watchCostResult) auditTable(p func(format string, args ...any), cfg Options) {
	a, gcb := res.audit, res.gc.PerByte()
	p("## kubetree's audit under the same churn\n\n")
	p("kubetree (bin/coredns) with `audit_interval %s`: its first audit not counted, the next %d measured as `-audit` measures them (AUDIT.md): bytes through the proxy and the API server's CPU in each audit's window (%s before it to %s after it), less the rates between audits, the median; its allocations per audit, less the churn's (%s/s, the lowest of the windows without watches), charged at the collector's rate above.\n\n",
		cfg.Interval, cfg.Audits, apicost.AuditLead, apicost.AuditTail, measure.Human(res.churnAlloc()))
	p("| per audit | bytes sent by the API server | API server CPU in the window | heap allocated | CPU with the collector's share | duration |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	p("| kubetree | %s | %.3f s | %s | %.3f s | %.3f s |\n\n", measure.Human(a.Median(func(w apicost.AuditWindow) float64 { return w.Down })),
		a.Median(func(w apicost.AuditWindow) float64 { return w.APICPU }), measure.Human(a.Alloc), a.APICPU(gcb), a.Median(func(w apicost.AuditWindow) float64 { return w.Took.Seconds() }))
	if len(a.Other) > 0 {
		p("Audits that did not find the cluster in step: %q\n\n", a.Other)
	}
}

// perHour is a kubetree replica's watch and audits per hour at each audit interval, against an
// in-tree replica's watch, and the shortest interval that meets the goal.
func (res *watchCostResult) perHour(p func(format string, args ...any), cfg Options) {
	rate := float64(cfg.Rate)
	baseBytes, baseCPU := res.hourly(false, rate, 0)
	p("## Per replica-hour\n\n")
	p("At %d EndpointSlice updates a second, an in-tree replica's EndpointSlice watch (HTTP/2) costs the API server %s and %.1f s of CPU (charged) an hour; its other watches carry none of these updates. A kubetree replica's: its watch over the dearer of the two protocols, and its audits, 3600/interval an hour. The goal: at most %.2f× in both.\n\n",
		cfg.Rate, measure.Human(baseBytes), baseCPU, apicost.Goal)
	p("| audit interval | bytes / replica-hour | / in-tree | API server CPU / replica-hour | / in-tree | both ≤ %.2f× |\n| ---: | ---: | ---: | ---: | ---: | :---: |\n", apicost.Goal)
	shortest := time.Duration(0)
	for _, iv := range append([]time.Duration{0}, apicost.Intervals...) {
		bytes, cpu := res.hourly(true, rate, iv)
		ok := bytes <= apicost.Goal*baseBytes && cpu <= apicost.Goal*baseCPU
		if ok && iv > 0 && shortest == 0 {
			shortest = iv
		}
		ivs := "no audit"
		if iv > 0 {
			ivs = measure.ShortDuration(iv)
		}
		p("| %s | %s | %s | %.2f s | %s | %s |\n", ivs, measure.Human(bytes), measure.Ratio(bytes, baseBytes), cpu, measure.Ratio(cpu, baseCPU), map[bool]string{true: "yes", false: "no"}[ok])
	}
	if shortest > 0 {
		p("\nThe shortest interval of %s that meets the goal in both bytes and CPU: **%s**.\n\n", apicost.IntervalList(), measure.ShortDuration(shortest))
	} else {
		p("\nNo interval of %s meets the goal in both bytes and CPU.\n\n", apicost.IntervalList())
	}
}
