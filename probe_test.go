package kubetree

import (
	"context"
	"testing"
	"time"

	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/probe"

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

func countsOf(t testing.TB, m *metrics.ServerBlock) probeCounts {
	t.Helper()
	c := probeCounts{results: map[string]float64{}}
	for _, r := range probe.Results {
		c.results[r] = testutil.ToFloat64(m.Probes(r))
	}
	var h dto.Metric
	if err := m.ProbeLatency().(prometheus.Histogram).Write(&h); err != nil {
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
	if got := c.k.cfg.probe.Name; got != "kubernetes.default.svc.cluster.local." {
		t.Fatalf("probe name %q, want kubernetes.default.svc.cluster.local.", got)
	}
	next := &nextHandler{}
	c.k.Next = next
	c.k.cfg.probe.Interval = 10 * time.Millisecond
	m := c.k.metrics
	before := countsOf(t, m)
	c.k.probe = probe.New(c.k.cfg.probe, c.k.query, m)
	c.k.probe.Start()
	t.Cleanup(func() { _ = c.k.probe.Stop() })

	waitFor(t, "a successful probe", func() bool { return countsOf(t, m).results[probe.ResultSuccess] > before.results[probe.ResultSuccess] })
	if !c.k.Ready() {
		t.Errorf("not ready while the probe finds its name")
	}

	c.remove(t, kubernetes)
	waitFor(t, "not ready once the probed service is gone", func() bool { return !c.k.Ready() })
	gone := countsOf(t, m)
	if misses := gone.results[probe.ResultNXDomain] - before.results[probe.ResultNXDomain]; misses < 3 {
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
	if back := countsOf(t, m); back.results[probe.ResultSuccess] <= gone.results[probe.ResultSuccess] {
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
	k.query.Upstream, k.Next = up, next
	p := probe.New(k.cfg.probe, k.query, k.metrics)
	k.probe = p
	before := countsOf(t, k.metrics)

	p.Probe()
	if got := countsOf(t, k.metrics); got.observed != before.observed {
		t.Errorf("probed before the first sync: %d latencies, want %d", got.observed, before.observed)
	}

	k.synced.Store(true)
	a.ApplyNamespace("prod", true)
	ext, sls := slim(t, k8stest.ExternalNameService("prod", "ext", "www.example.org"), nil, false)
	a.ApplyService(ext.Key(), ext, sls, true)
	p.Probe()
	if got := countsOf(t, k.metrics); got.results[probe.ResultSuccess] != before.results[probe.ResultSuccess]+1 || up.calls != 0 {
		t.Errorf("ExternalName probed: results %v (before %v), upstream asked %d times; want one success, no upstream", got.results, before.results, up.calls)
	}

	a.ApplyService(ext.Key(), nil, nil, true)
	for range 2 {
		if !k.Ready() {
			t.Fatalf("not ready before 2 misses")
		}
		p.Probe()
	}
	if got := countsOf(t, k.metrics); got.results[probe.ResultNXDomain] != before.results[probe.ResultNXDomain]+2 || next.calls != 0 || k.Ready() {
		t.Errorf("after 2 misses: results %v (before %v), next plugin asked %d times, ready %v; want 2 NXDOMAIN, no next, not ready",
			got.results, before.results, next.calls, k.Ready())
	}
}

// TestProbeStopLeaksNothing: the probe's goroutine ends when it stops, as a Corefile reload stops
// the old instance's; stopping twice, or without a start, is harmless, and so is no probe at all.
func TestProbeStopLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	k, _ := wired(t, "kubetree cluster.local {\n\tprobe\n}")
	k.synced.Store(true)
	k.cfg.probe.Interval = time.Millisecond
	for range 3 {
		p := probe.New(k.cfg.probe, k.query, k.metrics)
		p.Start()
		waitFor(t, "a probe", func() bool { return countsOf(t, k.metrics).observed > 0 })
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if err := probe.New(k.cfg.probe, k.query, k.metrics).Stop(); err != nil {
		t.Fatal(err)
	}
	none, _ := wired(t, "kubetree cluster.local")
	if p := probe.New(none.cfg.probe, none.query, k.metrics); p != nil || p.Stop() != nil || !p.Healthy() {
		t.Errorf("without the probe option: prober %v", p)
	}
	none.probe.Start()
}
