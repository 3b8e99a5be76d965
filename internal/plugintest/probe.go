package plugintest

import (
	"testing"

	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/probe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// ProbeCounts are the probe's counters by result, and how many latencies it observed.
type ProbeCounts struct {
	Results  map[string]float64
	Observed uint64
}

// CountsOf reads the probe's counters of m.
func CountsOf(t testing.TB, m *metrics.ServerBlock) ProbeCounts {
	t.Helper()
	c := ProbeCounts{Results: map[string]float64{}}
	for _, r := range probe.Results {
		c.Results[r] = testutil.ToFloat64(m.Probes(r))
	}
	var h dto.Metric
	if err := m.ProbeLatency().(prometheus.Histogram).Write(&h); err != nil {
		t.Fatal(err)
	}
	c.Observed = h.GetHistogram().GetSampleCount()
	return c
}
