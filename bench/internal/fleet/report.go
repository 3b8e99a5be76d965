package fleet

import (
	"fmt"
	"image/color"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

func (st *fleetStorm) label() string {
	if st.plugin == "" {
		return "no replicas"
	}
	return st.plugin
}

// stormOf is the storm of plugin, or nil.
func (res *fleetResult) stormOf(plugin string) *fleetStorm {
	for _, st := range res.storms {
		if st.plugin == plugin {
			return st
		}
	}
	return nil
}

// markdown is the report.
func (res *fleetResult) markdown(cfg Options) string {
	var b strings.Builder
	res.header(&b, cfg)
	res.stormTable(&b, cfg)
	res.replicaTable(&b)
	res.latency(&b, cfg)
	fmt.Fprintf(&b, "\nThe churn asked for %d EndpointSlice updates a second:", cfg.Churn)
	for _, st := range res.storms {
		fmt.Fprintf(&b, " %s: %.0f a second done before the restart (%d in %s), %d in all, %d failed or dropped (the API server away, or the writers behind);",
			st.label(), float64(st.churnSteadyDone)/st.churnSteady.Seconds(), st.churnSteadyDone, st.churnSteady.Round(time.Second), st.churnDone, st.churnFailed)
	}
	fmt.Fprintf(&b, "\n")
	return b.String()
}

// header is the report's title, and what was run where.
func (res *fleetResult) header(b *strings.Builder, cfg Options) {
	cl := res.cluster
	endpoints := len(cl.Services) * cfg.Endpoints
	fmt.Fprintf(b, "# A relist storm: %d replicas of each plugin against one API server\n\n", res.replicas)
	fmt.Fprintf(b, "Written by `bench/` (see README.md, `-fleet`); committed output of one run.\n\n")
	fmt.Fprintf(b, "- command: `cd bench && go run . -fleet %d -services %d -endpoints %d -headless %.2f -churn %d -fleet-steady %s -fleet-after %s -memory-limit %s -gomemlimit %s -fleet-limit-in-tree %s`\n",
		res.replicas, cfg.Services, cfg.Endpoints, cfg.Headless, cfg.Churn, cfg.Steady, cfg.After, cfg.MemoryLimit, measure.OrDash(cfg.GoMemLimit), cfg.LimitInTree)
	fmt.Fprintf(b, "- date: %s UTC (run took %s)\n", res.began.UTC().Format("2006-01-02 15:04"), res.ended.Sub(res.began).Round(time.Second))
	m := res.machine
	fmt.Fprintf(b, "- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s, shared with other builds; load average at the start %s, at the end %s\n",
		m.Nproc, m.CPU, m.Memory, m.Kernel, m.LoadStart, measure.Loadavg())
	fmt.Fprintf(b, "- versions: kube-apiserver %s (etcd and kube-apiserver from `make control-plane`), %s, %s\n", res.version, m.Coredns, m.CoreDNSGo)
	fmt.Fprintf(b, "- kubetree source (bin/coredns): %s\n", m.Source)
	shape := "addresses and hostnames only"
	if cfg.ControllerSlices {
		shape = "as the EndpointSlice controller writes them (conditions, node, zone, pod reference per endpoint; owner, managed-by, trigger time per slice)"
	}
	fmt.Fprintf(b, "- cluster: %d namespaces, %d services (%d headless), each with one EndpointSlice of %d endpoints, %s: %d endpoints\n",
		len(cl.Namespaces), len(cl.Services), cl.Headless, cfg.Endpoints, shape, endpoints)
	fmt.Fprintf(b, "- replicas: %d of each plugin, one plugin at a time, every replica in a memory cgroup of its own "+
		"(kubetree: %s with %s, as deploy/'s container; the in-tree kubernetes plugin: %s, no GOMEMLIMIT, as CoreDNS ships: it needs several times deploy/'s limit at this size), started from its own copy of bin/coredns\n\n",
		res.replicas, res.limits["kubetree"], res.env["kubetree"], res.limits["kubernetes"])
}

// stormTable is the storms side by side: the API server's figures and the replicas'.
func (res *fleetResult) stormTable(b *strings.Builder, cfg Options) {
	for _, f := range res.failures {
		fmt.Fprintf(b, "**A storm did not finish:** %s\n\n", f)
	}
	fmt.Fprintf(b, "## The storm\n\n")
	fmt.Fprintf(b, "Each storm: the replicas start and sync; for %s EndpointSlices change at -churn %d a second (one endpoint moved, %d services left out for the probes) and a timed change is made twice a second (below); "+
		"then the API server is restarted (`hack/cluster.sh stop-apiserver`, `start-apiserver`): the new one reads everything from etcd into its watch cache and no watch can resume, so every replica lists everything again at once. "+
		"A service is created as soon as the API server takes writes again; the storm ends %s after every replica answers it. "+
		"The API server's RSS and CPU are read from /proc every 100 ms (its peak is the new process's VmHWM); \"no replicas\" is the same restart with no DNS server watching: what the API server costs by itself.\n\n",
		cfg.Steady, cfg.Churn, probeTargets, cfg.After)
	fmt.Fprintf(b, "| | no replicas | %d × kubernetes | %d × kubetree | kubetree/kubernetes |\n| --- | ---: | ---: | ---: | ---: |\n", res.replicas, res.replicas)
	row := func(what string, f func(*fleetStorm) float64, format func(float64) string) {
		res.row(b, what, f, format)
	}
	base := res.stormOf("")
	row("API server RSS before the restart", func(st *fleetStorm) float64 { return st.apiSteadyRSS }, measure.MiB)
	row("**API server peak RSS** (the new process's VmHWM)", func(st *fleetStorm) float64 { return st.apiPeak }, measure.MiB)
	if base != nil {
		row("&nbsp;&nbsp;over the restart without replicas (what the replicas' lists cost it)", func(st *fleetStorm) float64 { return st.apiPeak - base.apiPeak }, measure.MiB)
	}
	row("API server CPU, its start to the storm's end", func(st *fleetStorm) float64 { return st.apiCPUTotal }, secs)
	if base != nil {
		row("&nbsp;&nbsp;over the restart without replicas", func(st *fleetStorm) float64 { return st.apiCPUTotal - base.apiCPUTotal }, secs)
	}
	row("API server CPU, highest 1 s average (cores)", func(st *fleetStorm) float64 { return st.apiCPUPeak }, func(v float64) string { return fmt.Sprintf("%.2f", v) })
	row("etcd CPU in the same window", func(st *fleetStorm) float64 { return st.etcdCPU }, secs)
	row("API server starts that exited before it was ready (started again)", func(st *fleetStorm) float64 { return float64(st.apiStartFailures) }, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	row("restart → API server ready (`start-apiserver` returns)", func(st *fleetStorm) float64 { return st.restartTook.Seconds() }, secs)
	row("restart → the first write accepted", func(st *fleetStorm) float64 { return st.writable.Seconds() }, secs)
	row("**restart → every replica answers the change made then**", func(st *fleetStorm) float64 { return st.allAnswered.Seconds() }, secs)
	row("&nbsp;&nbsp;from the change", func(st *fleetStorm) float64 { return (st.allAnswered - st.writable).Seconds() }, secs)
	res.replicaRows(b)
	for _, st := range res.storms {
		if st.plugin == "" {
			continue
		}
		var exited []string
		for i, r := range st.replicas {
			if r.exited != "" {
				exited = append(exited, fmt.Sprintf("%d (%s)", i, r.exited))
			}
		}
		if len(exited) > 0 {
			fmt.Fprintf(b, "\n%s replicas that exited: %s.\n", st.plugin, strings.Join(exited, ", "))
		}
	}
	fmt.Fprintf(b, "\n![API server memory through the storms](fleet-apiserver-memory.svg)\n\n")
}

// secs is a number of seconds, for the report.
func secs(v float64) string { return fmt.Sprintf("%.1f s", v) }

// row is a row of the storms' table: f of each storm, and the ratio of kubetree's to kubernetes'.
func (res *fleetResult) row(b *strings.Builder, what string, f func(*fleetStorm) float64, format func(float64) string) {
	fmt.Fprintf(b, "| %s |", what)
	var v []float64
	for _, c := range []string{"", "kubernetes", "kubetree"} {
		st := res.stormOf(c)
		if st == nil {
			fmt.Fprintf(b, " — |")
			v = append(v, 0)
			continue
		}
		x := f(st)
		v = append(v, x)
		fmt.Fprintf(b, " %s |", format(x))
	}
	if v[1] != 0 {
		fmt.Fprintf(b, " %.2f |\n", v[2]/v[1])
	} else {
		fmt.Fprintf(b, " — |\n")
	}
}

// replicaRows are the rows of the storms' table of the replicas' figures: agg of each storm's.
func (res *fleetResult) replicaRows(b *strings.Builder) {
	perReplica := func(what string, f func(*fleetReplica) float64, agg func([]float64) float64, format func(float64) string) {
		res.row(b, what, func(st *fleetStorm) float64 {
			var v []float64
			for _, r := range st.replicas {
				v = append(v, f(r))
			}
			if len(v) == 0 {
				return 0
			}
			return agg(v)
		}, format)
	}
	maxOf := func(v []float64) float64 { return slices.Max(v) }
	perReplica("replica: start → answering (median)", func(r *fleetReplica) float64 { return r.ready.Seconds() }, measure.Median, secs)
	perReplica("replica: RSS before the restart (median)", func(r *fleetReplica) float64 { return r.steadyRSS }, measure.Median, measure.MiB)
	perReplica("replica: peak anonymous RSS through the storm (RssAnon every 20 ms), median", func(r *fleetReplica) float64 { return r.anon }, measure.Median, measure.MiB)
	perReplica("**replica: peak anonymous RSS, highest**", func(r *fleetReplica) float64 { return r.anon }, maxOf, measure.MiB)
	perReplica("replica: peak RSS (VmHWM), highest", func(r *fleetReplica) float64 { return r.hwm }, maxOf, measure.MiB)
	perReplica("replica: its cgroup's peak usage (page cache included), highest", func(r *fleetReplica) float64 { return r.cgroupPeak }, maxOf, measure.MiB)
	perReplica("replicas OOM-killed", func(r *fleetReplica) float64 { return float64(r.oomKills) }, func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s
	}, func(v float64) string { return fmt.Sprintf("%.0f", v) })
}

// replicaTable is every replica's figures.
func (res *fleetResult) replicaTable(b *strings.Builder) {
	fmt.Fprintf(b, "### Each replica\n\n| storm | replica | start → answering | RSS before | peak RssAnon | peak VmHWM | cgroup peak | cgroup at its limit | OOM kills | restart → answers |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, st := range res.storms {
		for i, r := range st.replicas {
			ans := "never"
			if r.answered >= 0 {
				ans = fmt.Sprintf("%.1f s", r.answered.Seconds())
			}
			fmt.Fprintf(b, "| %s | %d | %.1f s | %s | %s | %s | %s | %d | %d | %s |\n", st.plugin, i, r.ready.Seconds(), measure.MiB(r.steadyRSS), measure.MiB(r.anon), measure.MiB(r.hwm), measure.MiB(r.cgroupPeak), r.limitHits, r.oomKills, ans)
		}
	}
}

// latency is the time from a change to its answer, by plugin, phase and kind of change.
func (res *fleetResult) latency(b *strings.Builder, cfg Options) {
	fmt.Fprintf(b, "\n## From a change to its answer\n\n")
	fmt.Fprintf(b, "Twice a second, in turn: a ClusterIP service created (its A record), and the first endpoint of one of the headless services among the first %d moved to a new address (the A record of its hostname). "+
		"From the API call's return, every replica is asked over UDP every 10 ms (after a second every 100 ms) until it answers the new address: one time per change and replica. "+
		"\"steady\": changes made before the restart, with the churn going on; \"relist\": changes made after the API server took writes again, until %s after every replica answered the first of them. "+
		"Times are from the client's side: what a pod asking would see.\n\n", probeTargets, cfg.After)
	fmt.Fprintf(b, "| plugin | phase | change | replica-answers | p50 | p99 | max | not answered within %s |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n", probeLimit)
	for _, st := range res.storms {
		if st.plugin == "" {
			continue
		}
		for _, ph := range []string{phaseSteady, phaseRelist} {
			all := []time.Duration{}
			for _, k := range probeKinds {
				d := st.latency[ph][k]
				all = append(all, d...)
				fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s | %s | %d |\n", st.plugin, ph, k, len(d), quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1), st.unanswered[ph][k])
			}
			fmt.Fprintf(b, "| %s | %s | **all** | %d | %s | **%s** | %s | %d |\n", st.plugin, ph, len(all), quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1),
				st.unanswered[ph][probeKinds[0]]+st.unanswered[ph][probeKinds[1]])
		}
	}
	fmt.Fprintf(b, "\nEach change's first answer, from whichever replica gave it first: a change that is slow here was slow for every replica, so its delay came before any of them (the API server's write, or its watch's fan-out), not from a replica.\n\n")
	fmt.Fprintf(b, "| plugin | phase | changes answered | first answer p50 | p99 | max |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, st := range res.storms {
		if st.plugin == "" {
			continue
		}
		for _, ph := range []string{phaseSteady, phaseRelist} {
			var all []time.Duration
			for _, k := range probeKinds {
				all = append(all, st.firstAnswer[ph][k]...)
			}
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s |\n", st.plugin, ph, len(all), quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1))
		}
	}
}

// quantile of d (nearest rank), "—" when empty.
func quantile(d []time.Duration, q float64) string {
	if len(d) == 0 {
		return "—"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	i = max(0, min(i, len(s)-1))
	return measure.Millis(s[i])
}

// chart draws the API server's RSS through each storm.
func (res *fleetResult) chart(path string) error {
	p := measure.NewPlot(fmt.Sprintf("API server memory through a relist storm (%d replicas)", res.replicas), "seconds since the restart began", "API server RSS, MiB")
	colors := map[string]color.Color{"": measure.ServerColors["whoami"], "kubernetes": measure.ServerColors["kubernetes"], "kubetree": measure.ServerColors["kubetree"]}
	for _, st := range res.storms {
		xy := make(plotter.XYs, len(st.apiT))
		for i := range st.apiT {
			xy[i] = plotter.XY{X: st.apiT[i], Y: st.apiRSS[i] / (1 << 20)}
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = colors[st.plugin], vg.Points(1.5)
		label := st.label()
		if st.plugin != "" {
			label = fmt.Sprintf("%d × %s", len(st.replicas), st.plugin)
		}
		p.Add(l)
		p.Legend.Add(label, l)
	}
	p.Y.Min, p.X.Min = 0, 0
	p.Y.Max *= 1.25
	measure.Logf("wrote %s", path)
	return p.Save(18*vg.Centimeter, 10*vg.Centimeter, path)
}
