package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestProbe: with `probe NAME 1s 2`, against the real API server, the ready plugin (monitoring
// continuously) follows the self-probe: ready while the probed service exists, not ready once it is deleted (two probes in a
// row find NXDOMAIN), ready again once it is back; the probe's counters and latency histogram are
// exported. Without the probe, readiness says only "synced", and stays ready throughout.
func TestProbe(t *testing.T) {
	ns := newNamespace(t, "probe")
	svc := k8stest.ClusterIPService(ns, "probed", nil, k8stest.TCP("http", 80))
	createService(t, svc)
	name := svcName(ns, "probed")
	// The ready plugin asks again after a plugin said ready only with monitor continuously.
	c := startCoreDNSWith(t, []string{readyContinuously}, "probe "+name+" 1s 2")
	eventually(t, "ready", 30*time.Second, c.isReady)
	var text string
	eventually(t, "a successful probe counted, its latency observed", 10*time.Second, func() bool {
		text = c.scrape()
		return probeMetric(text, "coredns_kubetree_probes_total", `result="success"`) > 0 &&
			probeMetric(text, "coredns_kubetree_probe_duration_seconds_count", "") > 0
	}, func() string { return text })

	deleteService(t, ns, "probed")
	c.waitRcode(t, name, dns.TypeA, dns.RcodeNameError)
	eventually(t, "not ready with the probed service gone", 20*time.Second, func() bool { return !c.isReady() })
	if n := probeMetric(c.scrape(), "coredns_kubetree_probes_total", `result="nxdomain"`); n < 2 {
		t.Errorf("not ready after %v NXDOMAIN probes, want 2", n)
	}

	createService(t, svc)
	eventually(t, "ready again with the probed service back", 20*time.Second, c.isReady)
}

// probeMetric sums the values of name's series whose labels contain label, in prometheus text.
func probeMetric(text, name, label string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok || !strings.Contains(rest, label) {
			continue
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
