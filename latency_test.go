package kubetree

import (
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestProgrammingLatency: a slice change that the endpoint slice controller stamped with its
// trigger time is observed once, from that time to the moment it is answered, by service kind;
// the first sync's slices are history, not latency.
func TestProgrammingLatency(t *testing.T) {
	port := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	stamped := func(s *discovery.EndpointSlice, at time.Time) *discovery.EndpointSlice {
		s.Annotations = map[string]string{api.EndpointsLastChangeTriggerTime: at.Format(time.RFC3339Nano)}
		return s
	}
	c := startCluster(t, testZones, k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}, k8stest.TCP("http", 80)),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("http", 80)),
		stamped(k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.5.1"}}), time.Now().Add(-time.Hour)))
	observed := func(kind string) (count uint64, sum float64) {
		var m dto.Metric
		h := programmingDuration.WithLabelValues(c.applier.metrics.server, c.applier.metrics.zones, kind).(prometheus.Histogram)
		if err := h.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	if n, _ := observed("cluster_ip"); n != 0 {
		t.Fatalf("the first sync's slice was observed (%d)", n)
	}

	triggered := time.Now().Add(-2 * time.Second)
	c.update(t, stamped(k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.5.2"}}), triggered))
	c.create(t, stamped(k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.6.1"}}), triggered))
	c.barrier(t)
	c.expect(t, "10-0-5-2.web.prod.svc.cluster.local.", dns.TypeA, okay, recA("10-0-5-2.web.prod.svc.cluster.local.", "10.0.5.2"))
	for _, kind := range []string{"cluster_ip", "headless_with_selector"} {
		n, sum := observed(kind)
		if n != 1 || sum < 2 || sum > 2+time.Minute.Seconds() {
			t.Errorf("%s: %d observations summing %.3f s, want one of 2 s and a little", kind, n, sum)
		}
	}

	// A slice without the stamp (no controller wrote it) is not observed.
	c.update(t, k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.5.3"}}))
	c.barrier(t)
	if n, _ := observed("cluster_ip"); n != 1 {
		t.Errorf("an unstamped change was observed: %d observations", n)
	}
}
