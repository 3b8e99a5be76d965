package probe

import (
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/metrics"
)

// TestHungProbeIsUnhealthy: a probe that has waited for its reply as long as MISSES probes take
// makes Healthy say no, as MISSES misses do.
func TestHungProbeIsUnhealthy(t *testing.T) {
	p := New(&Options{Name: "kubernetes.default.svc.cluster.local.", Interval: time.Second, Misses: 3}, nil, metrics.New("test://hung", "cluster.local."))
	p.asked.Store(time.Now().UnixNano())
	if !p.Healthy() {
		t.Errorf("unhealthy while a probe has waited less than 3 s")
	}
	p.asked.Store(time.Now().Add(-3 * time.Second).UnixNano())
	if p.Healthy() {
		t.Errorf("healthy while a probe has waited 3 s (3 probes of 1 s) for its reply")
	}
	p.asked.Store(0)
	if !p.Healthy() {
		t.Errorf("unhealthy with no probe waiting and no miss")
	}
	p.missed.Store(3)
	if p.Healthy() {
		t.Errorf("healthy after 3 misses in a row")
	}
}
