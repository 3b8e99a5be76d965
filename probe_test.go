package kubetree_test

import (
	"context"
	"testing"
	"time"

	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"
	"github.com/kubetree/kubetree/internal/probe"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

// TestProbeFollowsTheProbedService: with probe, the plugin asks its own handler for
// kubernetes.default.svc.<zone> every interval and counts each result and its latency; readiness
// follows: ready while the service is there, not ready after 3 misses once it is deleted, ready
// again at the first success after it is back. With fallthrough, a miss never reaches the next
// plugin.
func TestProbeFollowsTheProbedService(t *testing.T) {
	kubernetes := k8stest.ClusterIPService("default", "kubernetes", []string{"10.0.0.1"}, k8stest.TCP("https", 443))
	c := plugintest.StartCluster(t, "kubetree cluster.local 10.in-addr.arpa {\n\tprobe\n\tfallthrough\n}", k8stest.Namespace("default"), kubernetes)
	if got := c.Probe.Name; got != "kubernetes.default.svc.cluster.local." {
		t.Fatalf("probe name %q, want kubernetes.default.svc.cluster.local.", got)
	}
	next := &plugintest.NextHandler{}
	c.Next = next
	c.Probe.Interval = 10 * time.Millisecond
	m := c.Metrics
	before := plugintest.CountsOf(t, m)
	p := probe.New(c.Probe, c.Answerer, m)
	kubetree.SetProber(c.Kubetree, p)
	p.Start()
	t.Cleanup(func() { _ = p.Stop() })

	plugintest.WaitFor(t, "a successful probe", func() bool {
		return plugintest.CountsOf(t, m).Results[probe.ResultSuccess] > before.Results[probe.ResultSuccess]
	})
	if !c.Ready() {
		t.Errorf("not ready while the probe finds its name")
	}

	c.Remove(t, kubernetes)
	plugintest.WaitFor(t, "not ready once the probed service is gone", func() bool { return !c.Ready() })
	gone := plugintest.CountsOf(t, m)
	if misses := gone.Results[probe.ResultNXDomain] - before.Results[probe.ResultNXDomain]; misses < 3 {
		t.Errorf("not ready after %v NXDOMAIN probes, want 3 (misses' default)", misses)
	}
	if gone.Observed <= before.Observed {
		t.Errorf("no probe latency observed: %d before, %d after", before.Observed, gone.Observed)
	}
	if next.Calls != 0 {
		t.Errorf("the probe's NXDOMAIN fell through to the next plugin %d times", next.Calls)
	}

	c.Create(t, kubernetes)
	plugintest.WaitFor(t, "ready again once the probed service is back", c.Ready)
	if back := plugintest.CountsOf(t, m); back.Results[probe.ResultSuccess] <= gone.Results[probe.ResultSuccess] {
		t.Errorf("ready again without a successful probe: %v then %v", gone.Results, back.Results)
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
	k, a := plugintest.Wired(t, "kubetree cluster.local {\n\tprobe ext.prod.svc.cluster.local 1s 2\n\tfallthrough\n}")
	up, next := &countingUpstream{}, &plugintest.NextHandler{}
	k.Answerer.Upstream, k.Next = up, next
	p := probe.New(k.Probe, k.Answerer, k.Metrics)
	kubetree.SetProber(k.Kubetree, p)
	before := plugintest.CountsOf(t, k.Metrics)

	p.Probe()
	if got := plugintest.CountsOf(t, k.Metrics); got.Observed != before.Observed {
		t.Errorf("probed before the first sync: %d latencies, want %d", got.Observed, before.Observed)
	}

	k.SyncedFlag.Store(true)
	a.ApplyNamespace("prod", true)
	ext, sls := plugintest.Slim(t, k8stest.ExternalNameService("prod", "ext", "www.example.org"), nil, false)
	a.ApplyService(ext.Key(), ext, sls, true)
	p.Probe()
	if got := plugintest.CountsOf(t, k.Metrics); got.Results[probe.ResultSuccess] != before.Results[probe.ResultSuccess]+1 || up.calls != 0 {
		t.Errorf("ExternalName probed: results %v (before %v), upstream asked %d times; want one success, no upstream", got.Results, before.Results, up.calls)
	}

	a.ApplyService(ext.Key(), nil, nil, true)
	for range 2 {
		if !k.Ready() {
			t.Fatalf("not ready before 2 misses")
		}
		p.Probe()
	}
	if got := plugintest.CountsOf(t, k.Metrics); got.Results[probe.ResultNXDomain] != before.Results[probe.ResultNXDomain]+2 || next.Calls != 0 || k.Ready() {
		t.Errorf("after 2 misses: results %v (before %v), next plugin asked %d times, ready %v; want 2 NXDOMAIN, no next, not ready",
			got.Results, before.Results, next.Calls, k.Ready())
	}
}

// TestProbeStopLeaksNothing: the probe's goroutine ends when it stops, as a Corefile reload stops
// the old instance's; stopping twice, or without a start, is harmless, and so is no probe at all.
func TestProbeStopLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	k, _ := plugintest.Wired(t, "kubetree cluster.local {\n\tprobe\n}")
	k.SyncedFlag.Store(true)
	k.Probe.Interval = time.Millisecond
	for range 3 {
		p := probe.New(k.Probe, k.Answerer, k.Metrics)
		p.Start()
		plugintest.WaitFor(t, "a probe", func() bool { return plugintest.CountsOf(t, k.Metrics).Observed > 0 })
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if err := probe.New(k.Probe, k.Answerer, k.Metrics).Stop(); err != nil {
		t.Fatal(err)
	}
	none, _ := plugintest.Wired(t, "kubetree cluster.local")
	if p := probe.New(none.Probe, none.Answerer, k.Metrics); p != nil || p.Stop() != nil || !p.Healthy() {
		t.Errorf("without the probe option: prober %v", p)
	}
	kubetree.Prober(none.Kubetree).Start()
}
