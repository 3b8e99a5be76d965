package kubetree

import (
	"context"
	"testing"
	"time"

	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/k8stest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

// probeCounts are the probe's counters by result, and how many latencies it observed.
type probeCounts struct {
	results  map[string]float64
	observed uint64
}

func countsOf(t testing.TB, m *serverMetrics) probeCounts {
	t.Helper()
	c := probeCounts{results: map[string]float64{}}
	for _, r := range probeResults {
		c.results[r] = testutil.ToFloat64(probes.WithLabelValues(m.server, m.zones, r))
	}
	var h dto.Metric
	if err := probeDuration.WithLabelValues(m.server, m.zones).(prometheus.Histogram).Write(&h); err != nil {
		t.Fatal(err)
	}
	c.observed = h.GetHistogram().GetSampleCount()
	return c
}

// TestProbeFollowsTheProbedService: with probe, the plugin asks its own handler for
// kubernetes.default.svc.<zone> every interval and counts each result and its latency; readiness
// follows: ready while the service is there, not ready after 3 misses once it is deleted, ready
// again at the first success after it is back. With fallthrough, a miss never reaches the next
// plugin.
func TestProbeFollowsTheProbedService(t *testing.T) {
	kubernetes := k8stest.ClusterIPService("default", "kubernetes", []string{"10.0.0.1"}, k8stest.TCP("https", 443))
	c := startCluster(t, "kubetree cluster.local 10.in-addr.arpa {\n\tprobe\n\tfallthrough\n}", k8stest.Namespace("default"), kubernetes)
	if got := c.k.cfg.probe.name; got != "kubernetes.default.svc.cluster.local." {
		t.Fatalf("probe name %q, want kubernetes.default.svc.cluster.local.", got)
	}
	next := &nextHandler{}
	c.k.Next = next
	c.k.cfg.probe.interval = 10 * time.Millisecond
	m := c.applier.metrics
	before := countsOf(t, m)
	c.k.probe = newProber(c.k, m)
	c.k.probe.start()
	t.Cleanup(func() { _ = c.k.probe.stop() })

	waitFor(t, "a successful probe", func() bool { return countsOf(t, m).results[probeSuccess] > before.results[probeSuccess] })
	if !c.k.Ready() {
		t.Errorf("not ready while the probe finds its name")
	}

	c.remove(t, kubernetes)
	waitFor(t, "not ready once the probed service is gone", func() bool { return !c.k.Ready() })
	gone := countsOf(t, m)
	if misses := gone.results[probeNXDomain] - before.results[probeNXDomain]; misses < 3 {
		t.Errorf("not ready after %v NXDOMAIN probes, want 3 (misses' default)", misses)
	}
	if gone.observed <= before.observed {
		t.Errorf("no probe latency observed: %d before, %d after", before.observed, gone.observed)
	}
	if next.calls != 0 {
		t.Errorf("the probe's NXDOMAIN fell through to the next plugin %d times", next.calls)
	}

	c.create(t, kubernetes)
	waitFor(t, "ready again once the probed service is back", c.k.Ready)
	if back := countsOf(t, m); back.results[probeSuccess] <= gone.results[probeSuccess] {
		t.Errorf("ready again without a successful probe: %v then %v", gone.results, back.results)
	}
}

// countingUpstream counts the lookups the plugin sends through the rest of the chain.
type countingUpstream struct{ calls int }

func (u *countingUpstream) Lookup(context.Context, request.Request, string, uint16) (*dns.Msg, error) {
	u.calls++
	return nil, nil
}

// TestProbeStaysInKubetree: one probe at a time, by hand: a probed ExternalName service is
// found (its CNAME) without resolving its target upstream, a name not found is counted NXDOMAIN
// without asking the next plugin under fallthrough, and before the first sync nothing is asked.
func TestProbeStaysInKubetree(t *testing.T) {
	k, a := wired(t, "kubetree cluster.local {\n\tprobe ext.prod.svc.cluster.local 1s 2\n\tfallthrough\n}")
	up, next := &countingUpstream{}, &nextHandler{}
	k.upstream, k.Next = up, next
	p := newProber(k, a.metrics)
	k.probe = p
	before := countsOf(t, a.metrics)

	p.probe()
	if got := countsOf(t, a.metrics); got.observed != before.observed {
		t.Errorf("probed before the first sync: %d latencies, want %d", got.observed, before.observed)
	}

	k.synced.Store(true)
	a.applyNamespace("prod", true)
	ext, sls := slim(t, k8stest.ExternalNameService("prod", "ext", "www.example.org"), nil, false)
	a.applyService(ext.Key(), ext, sls, true)
	p.probe()
	if got := countsOf(t, a.metrics); got.results[probeSuccess] != before.results[probeSuccess]+1 || up.calls != 0 {
		t.Errorf("ExternalName probed: results %v (before %v), upstream asked %d times; want one success, no upstream", got.results, before.results, up.calls)
	}

	a.applyService(ext.Key(), nil, nil, true)
	for range 2 {
		if !k.Ready() {
			t.Fatalf("not ready before 2 misses")
		}
		p.probe()
	}
	if got := countsOf(t, a.metrics); got.results[probeNXDomain] != before.results[probeNXDomain]+2 || next.calls != 0 || k.Ready() {
		t.Errorf("after 2 misses: results %v (before %v), next plugin asked %d times, ready %v; want 2 NXDOMAIN, no next, not ready",
			got.results, before.results, next.calls, k.Ready())
	}
}

// TestProbeHungIsNotReady: a probe that has waited for its reply as long as MISSES probes take
// makes Ready say no, as MISSES misses do.
func TestProbeHungIsNotReady(t *testing.T) {
	k, a := wired(t, "kubetree cluster.local {\n\tprobe kubernetes.default.svc.cluster.local 1s 3\n}")
	k.synced.Store(true)
	k.probe = newProber(k, a.metrics)
	k.probe.asked.Store(time.Now().UnixNano())
	if !k.Ready() {
		t.Errorf("not ready while a probe has waited less than 3 s")
	}
	k.probe.asked.Store(time.Now().Add(-3 * time.Second).UnixNano())
	if k.Ready() {
		t.Errorf("ready while a probe has waited 3 s (3 probes of 1 s) for its reply")
	}
	k.probe.asked.Store(0)
	if !k.Ready() {
		t.Errorf("not ready with no probe waiting and no miss")
	}
}

// TestProbeStopLeaksNothing: the probe's goroutine ends when it stops, as a Corefile reload stops
// the old instance's; stopping twice, or without a start, is harmless, and so is no probe at all.
func TestProbeStopLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	k, a := wired(t, "kubetree cluster.local {\n\tprobe\n}")
	k.synced.Store(true)
	k.cfg.probe.interval = time.Millisecond
	for range 3 {
		p := newProber(k, a.metrics)
		p.start()
		waitFor(t, "a probe", func() bool { return countsOf(t, a.metrics).observed > 0 })
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if err := newProber(k, a.metrics).stop(); err != nil {
		t.Fatal(err)
	}
	none, _ := wired(t, "kubetree cluster.local")
	if p := newProber(none, a.metrics); p != nil || p.stop() != nil || !p.healthy() {
		t.Errorf("without the probe option: prober %v", p)
	}
	none.probe.start()
}
