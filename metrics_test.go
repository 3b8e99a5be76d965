package kubetree

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsSurviveReload: a reload starts the new instance before it stops the old one; the old
// one's shutdown must leave the new one's gauges alone, and the last one's shutdown removes them.
func TestMetricsSurviveReload(t *testing.T) {
	const server, zones = "dns://:5300", "reload.local."
	old := newServerMetrics(server, zones)
	old.claim()
	old.synced.Set(1)

	reloaded := newServerMetrics(server, zones)
	reloaded.claim()
	if got := testutil.ToFloat64(syncedGauge.WithLabelValues(server, zones)); got != 0 {
		t.Errorf("synced = %v when the reloaded instance starts, want 0", got)
	}
	reloaded.synced.Set(1)
	reloaded.services.Set(7)
	old.release()
	if got := testutil.ToFloat64(syncedGauge.WithLabelValues(server, zones)); got != 1 {
		t.Errorf("synced = %v after the old instance stopped, want the reloaded one's 1", got)
	}
	if got := testutil.ToFloat64(servicesGauge.WithLabelValues(server, zones)); got != 7 {
		t.Errorf("services = %v after the old instance stopped, want the reloaded one's 7", got)
	}

	reloaded.release()
	if syncedGauge.DeleteLabelValues(server, zones) || servicesGauge.DeleteLabelValues(server, zones) {
		t.Errorf("gauges still there after the last instance stopped")
	}
}
