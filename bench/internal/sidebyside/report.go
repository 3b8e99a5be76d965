package sidebyside

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// results is everything the report shows.
type results struct {
	cfg        Options
	args       []string
	began      time.Time
	ended      time.Time
	phases     *phases
	machine    measure.Machine
	k8sVersion string
	cluster    *measure.Cluster
	queryMix   *querySet
	startups   map[string][]measure.Startup
	memSync    map[string]measure.Mem
	memLoad    map[string]measure.Mem
	diff       *diffReport
	runs       []measure.RunResult
	prop       *propResult
	slices     *sliceResult // -slice-updates
	sizes      []sizePoint  // memory at the smaller sizes (-sizes)
	heap       *modelHeap   // the model's heap at 1M endpoints, unless -model-heap=false
	charts     []chart      // written next to the report
}

// newResults is a run's results, begun now.
func newResults(cfg Options) *results {
	return &results{
		cfg: cfg, args: os.Args[1:], began: time.Now(), phases: &phases{},
		startups: map[string][]measure.Startup{}, memSync: map[string]measure.Mem{}, memLoad: map[string]measure.Mem{},
	}
}

// row is one metric: a value per server (NaN: not applicable), how to print it, and whether the
// kubetree/whoami ratio means anything.
type row struct {
	metric      string
	v           [3]float64 // kubernetes, kubetree, whoami
	format      func(float64) string
	whoamiRatio bool
}

// perServer is f's median over the rounds of each server, in serverNames' order.
func (r *results) perServer(f func(measure.RunResult) float64) [3]float64 {
	var out [3]float64
	for i, name := range serverNames {
		var v []float64
		for _, run := range r.runs {
			if run.Server == name {
				v = append(v, f(run))
			}
		}
		out[i] = measure.Median(v)
	}
	return out
}

// rows are the table's rows.
func (r *results) rows() []row {
	nan := math.NaN()
	fQPS := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	fMs := func(v float64) string { return fmt.Sprintf("%.3f ms", v*1000) }
	fCPU := func(v float64) string { return fmt.Sprintf("%.3f s", v) }
	fMiB := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	idle := r.memSync["whoami"].RSS
	memRow := func(name string, m map[string]measure.Mem, f func(measure.Mem) float64, growth bool) row {
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
	startRow := func(name string, f func(measure.Startup) time.Duration) row {
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
				v[i] = measure.Median(d)
			}
		}
		return row{metric: name, v: v, format: fMsShort}
	}
	rows := []row{
		{metric: "QPS (median of rounds)", v: r.perServer(func(x measure.RunResult) float64 { return x.QPS }), format: fQPS, whoamiRatio: true},
		{metric: "avg latency (median of rounds)", v: r.perServer(func(x measure.RunResult) float64 { return x.AvgLat }), format: fMs, whoamiRatio: true},
		{metric: "p99 latency under load (median of rounds)", v: r.perServer(func(x measure.RunResult) float64 { return x.P99 }), format: fMs, whoamiRatio: true},
		{metric: "CPU s per 100k queries (median)", v: r.perServer(measure.RunResult.CPUPer100k), format: fCPU, whoamiRatio: true},
		memRow("RSS after sync", r.memSync, func(m measure.Mem) float64 { return m.RSS }, false),
		memRow("RSS after load", r.memLoad, func(m measure.Mem) float64 { return m.RSS }, false),
		memRow("RSS growth over idle whoami, after sync", r.memSync, func(m measure.Mem) float64 { return m.RSS }, true),
		memRow("RSS growth over idle whoami, after load", r.memLoad, func(m measure.Mem) float64 { return m.RSS }, true),
		memRow("Go heap (heap_alloc) after sync", r.memSync, func(m measure.Mem) float64 { return m.Heap }, false),
		memRow("Go heap (heap_alloc) after load", r.memLoad, func(m measure.Mem) float64 { return m.Heap }, false),
		startRow(fmt.Sprintf("start → ready (median of %d)", r.cfg.StartTrials), func(s measure.Startup) time.Duration { return s.Ready }),
		startRow(fmt.Sprintf("start → first correct answer (median of %d)", r.cfg.StartTrials), func(s measure.Startup) time.Duration { return s.Answer }),
	}
	rows[10].whoamiRatio = true
	if r.prop != nil {
		rows = append(rows, r.prop.rows()...)
	}
	if r.slices != nil {
		rows = append(rows, r.slices.rows()...)
	}
	return rows
}

// fMsShort is seconds in milliseconds, for the table.
func fMsShort(v float64) string { return fmt.Sprintf("%.1f ms", v*1000) }

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
	fmt.Fprintf(&b, "p99 latency: from dnsperf -v per-query latencies of the load runs (dnsperf %s supports -v).\n", r.machine.Dnsperf)
	fmt.Fprintf(&b, "QPS per round (rounds rotate the server order):\n")
	for _, name := range serverNames {
		var v []string
		for _, x := range r.runs {
			if x.Server == name {
				v = append(v, fmt.Sprintf("%.0f", x.QPS))
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
