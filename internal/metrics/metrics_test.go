package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsSurviveReload: a reload starts the new instance before it stops the old one; the old
// one's shutdown must leave the new one's gauges alone, and the last one's shutdown removes them.
func TestMetricsSurviveReload(t *testing.T) {
	const server, zones = "dns://:5300", "reload.local."
	old := New(server, zones)
	old.Claim()
	old.Synced.Set(1)

	reloaded := New(server, zones)
	reloaded.Claim()
	if got := testutil.ToFloat64(syncedGauge.WithLabelValues(server, zones)); got != 0 {
		t.Errorf("synced = %v when the reloaded instance starts, want 0", got)
	}
	reloaded.Synced.Set(1)
	reloaded.Services.Set(7)
	old.Release()
	if got := testutil.ToFloat64(syncedGauge.WithLabelValues(server, zones)); got != 1 {
		t.Errorf("synced = %v after the old instance stopped, want the reloaded one's 1", got)
	}
	if got := testutil.ToFloat64(servicesGauge.WithLabelValues(server, zones)); got != 7 {
		t.Errorf("services = %v after the old instance stopped, want the reloaded one's 7", got)
	}

	reloaded.Release()
	if syncedGauge.DeleteLabelValues(server, zones) || servicesGauge.DeleteLabelValues(server, zones) {
		t.Errorf("gauges still there after the last instance stopped")
	}
}
