package steady

import (
	"strings"
	"testing"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

func TestParseSteadyKubetree(t *testing.T) {
	got, err := ParseKubetree("gzip=/tmp/coredns-gzip, old=/tmp/old")
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{{"gzip", "kubetree", "/tmp/coredns-gzip"}, {"old", "kubetree", "/tmp/old"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	for _, bad := range []string{"gzip", "=/tmp/x", "Gzip=/tmp/x", "kubetree=/tmp/x", "a=/x,a=/y", "a="} {
		if _, err := ParseKubetree(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestSteadyFigures checks the arithmetic of the report on made-up windows: a replica's CPU is its
// window's less the same round's no-server window's, the collector taken out and charged by
// allocation, and the audit interval chosen is the shortest that keeps both ratios within the goal.
func TestSteadyFigures(t *testing.T) {
	// The collector: 1 s per GB.
	res := &steadyResult{gc: apicost.Collector{CPU: 1, Alloc: 1e9}, servers: []Server{{"kubernetes", "kubernetes", ""}, {"kubetree", "kubetree", ""}}}
	w := func(round int, down, apiCPU, gcCPU, alloc float64) apicost.Window {
		return apicost.Window{Round: round, Secs: 100, Down: down, APICPU: apiCPU + gcCPU, SteadyCPU: apiCPU, GCCPU: gcCPU, Alloc: alloc, Updates: 1000}
	}
	res.windows = map[string][]apicost.Window{
		// No server: charged 4 s a window (3 s outside its collections, 1 GB allocated at 1 s per GB).
		"": {w(0, 0, 3, 2, 1e9), w(1, 0, 3, 0, 1e9), w(2, 0, 3, 1, 1e9)},
		// In-tree: charged 4.5 s a window, 0.005 s/s above none; 1 MB/s.
		"kubernetes": {w(0, 100e6, 3.5, 2, 1e9), w(1, 100e6, 3.5, 0, 1e9), w(2, 100e6, 3.5, 3, 1e9)},
		// kubetree: 0.004 s/s and 1 MB/s; the third round an outlier.
		"kubetree": {w(0, 100e6, 3.4, 0, 1e9), w(1, 100e6, 3.4, 0, 1e9), w(2, 100e6, 9, 0, 1e9)},
	}
	in, kt := res.figures("kubernetes"), res.figures("kubetree")
	if !near(in.down, 1e6) || !near(in.cpu, 0.005) || !near(kt.cpu, 0.004) {
		t.Errorf("in-tree %+v, kubetree %+v", in, kt)
	}
	if r := res.rate("kubetree"); !near(r, 10) {
		t.Errorf("rate %v", r)
	}
	// An audit of 90 MB and 0.6 s: at 60m kubetree is 3.6 GB + 90 MB = 1.025x the bytes and
	// 14.4 + 0.6 = 15 s against 18 s of CPU; at 30m 1.05x, at 20m 1.075x.
	res.audits = map[string]*apicost.AuditRun{"kubetree": {Audits: []apicost.AuditWindow{{Down: 90e6, APICPU: 0.6}}}}
	if b, c := res.hourly("kubetree", time.Hour); !near(b, 3.69e9) || !near(c, 15) {
		t.Errorf("hourly at 60m: %v bytes, %v s", b, c)
	}
	iv, ok := res.meets("kubetree", false)
	if !ok || iv != 30*time.Minute {
		t.Errorf("meets: %v %v, want 30m", iv, ok)
	}
	// On bytes alone (the in-tree CPU not resolved), 60m's 1.025x and 30m's 1.05x pass, 20m's does not.
	if iv, ok := res.meets("kubetree", true); !ok || iv != 30*time.Minute {
		t.Errorf("meets on bytes: %v %v, want 30m", iv, ok)
	}
	if !res.cpuResolved() {
		t.Error("the in-tree replica's 0.005 s/s taken as not resolved")
	}
	res.audits["kubetree"].Audits[0].Down = 400e6
	if iv, ok := res.meets("kubetree", false); ok {
		t.Errorf("meets at %v with an audit of 400 MB", iv)
	}
	// Four replicas at once: the window's bytes and CPU above none are four replicas'.
	for i := range res.windows["kubetree"] {
		w := &res.windows["kubetree"][i]
		w.Replicas, w.Down = 4, 4*w.Down
		w.SteadyCPU = 3 + 4*(w.SteadyCPU-3)
	}
	if kt := res.figures("kubetree"); !near(kt.down, 1e6) || !near(kt.cpu, 0.004) || !near(kt.cpuPerUpdate, 0.0004) {
		t.Errorf("per replica of four: %+v, want 1 MB/s, 0.004 s/s and 400 µs per update", kt)
	}
	// The churn behind in kubetree's windows (500 updates instead of 1000): a replica's CPU per
	// update is each window's per update less none's, whatever the rate.
	for i := range res.windows["kubetree"] {
		w := &res.windows["kubetree"][i]
		w.Updates = 500
		// Charged 2.8 s (1 s of it the collector's by allocation): none's 4 s per 1000 updates is
		// 2 s per 500, and four replicas at 400 µs an update 0.8 s.
		w.SteadyCPU = 1.8
	}
	if kt := res.figures("kubetree"); !near(kt.cpuPerUpdate, 0.0004) {
		t.Errorf("per update with the churn behind: %v, want 400 µs", kt.cpuPerUpdate)
	}
	if !strings.Contains(steadyCorefile("kubetree", "/k")("127.0.0.1:53", "r", "m"), "audit_interval 0") ||
		strings.Contains(steadyCorefile("kubernetes", "/k")("127.0.0.1:53", "r", "m"), "audit_interval") {
		t.Error("kubetree's audit is not off, or the in-tree plugin was given kubetree's option")
	}
}

func near(a, b float64) bool { return a-b < 1e-9*max(1, b) && b-a < 1e-9*max(1, b) }
