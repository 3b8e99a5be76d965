package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsSurviveReload: a reload starts the new instance before it stops the old one; the old
// one's shutdown must leave the new one's gauges alone, and the last one's shutdown removes every
// series of the labels.
func TestMetricsSurviveReload(t *testing.T) {
	const server, zones = "dns://:5300", "reload.local."
	old := New(server, zones)
	old.Claim()
	old.SetSynced(true)

	reloaded := New(server, zones)
	reloaded.Claim()
	if got := testutil.ToFloat64(syncedGauge.WithLabelValues(server, zones)); got != 0 {
		t.Errorf("synced = %v when the reloaded instance starts, want 0", got)
	}
	reloaded.SetSynced(true)
	reloaded.SetServices(7)
	old.SetServices(3) // the old instance's last change: not shown, the gauges are the new one's
	old.Release()
	if got := testutil.ToFloat64(syncedGauge.WithLabelValues(server, zones)); got != 1 {
		t.Errorf("synced = %v after the old instance stopped, want the reloaded one's 1", got)
	}
	if got := testutil.ToFloat64(servicesGauge.WithLabelValues(server, zones)); got != 7 {
		t.Errorf("services = %v after the old instance stopped, want the reloaded one's 7", got)
	}
	reloaded.Rejected.Inc()

	reloaded.Release()
	if n := seriesOf(t, server, zones); n != 0 {
		t.Errorf("%d series left after the last instance stopped", n)
	}
}

// TestMetricsOfAFailedReload: a reload whose new instance fails to start hands the gauges back to
// the instance that goes on serving, with its values; a failed instance with labels of its own
// leaves no series behind.
func TestMetricsOfAFailedReload(t *testing.T) {
	const server, zones = "dns://:5301", "failed.local."
	serving := New(server, zones)
	serving.Claim()
	serving.SetSynced(true)
	serving.SetServices(12)

	failed := New(server, zones)
	failed.Claim() // its OnStartup ran; then another plugin's failed
	failed.SetServices(2)
	failed.Release()
	if s, svcs := testutil.ToFloat64(syncedGauge.WithLabelValues(server, zones)), testutil.ToFloat64(servicesGauge.WithLabelValues(server, zones)); s != 1 || svcs != 12 {
		t.Errorf("after the failed instance: synced %v, services %v; want the serving instance's 1 and 12", s, svcs)
	}
	serving.SetServices(13)
	if got := testutil.ToFloat64(servicesGauge.WithLabelValues(server, zones)); got != 13 {
		t.Errorf("services = %v, want the serving instance's 13", got)
	}

	other := New("dns://:5302", zones) // a server block the failed Corefile would have added
	other.Claim()
	other.Rejected.Inc()
	other.Release()
	if n := seriesOf(t, "dns://:5302", zones); n != 0 {
		t.Errorf("%d series left of an instance that failed to start", n)
	}
	serving.Release()
}

// seriesOf counts the kubetree series with the labels.
func seriesOf(t *testing.T, server, zones string) int {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var s, z string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "server":
					s = l.GetValue()
				case "zones":
					z = l.GetValue()
				}
			}
			if s == server && z == zones {
				n++
			}
		}
	}
	return n
}
