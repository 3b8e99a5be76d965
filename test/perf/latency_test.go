package perf_test

import (
	"testing"
	"time"

	intree "github.com/coredns/coredns/plugin/kubernetes/object"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestProgrammingLatency: the DNS programming latency SLI, for every service kind. A change of a
// service's endpoints that the endpoint slice controller stamped with its trigger time, and the
// creation of a service, are observed once each in kubetree's series, from that time to the moment
// the change is answered, by service kind; the first sync's objects are history, not latency, and a
// change without a trigger time is not observed. The in-tree plugin's series gets what that plugin
// would observe of the same changes: slices only, a headless service's as headless_with_selector
// whatever its selector.
func TestProgrammingLatency(t *testing.T) {
	port := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	stamped := func(s *discovery.EndpointSlice, at time.Time) *discovery.EndpointSlice {
		s.Annotations = map[string]string{api.EndpointsLastChangeTriggerTime: at.Format(time.RFC3339Nano)}
		return s
	}
	selecting := func(s *api.Service) *api.Service {
		s.Spec.Selector = map[string]string{"app": s.Name}
		return s
	}
	createdAt := func(s *api.Service, at time.Time) *api.Service {
		s.CreationTimestamp = meta.NewTime(at)
		return s
	}
	long := time.Now().Add(-time.Hour)
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"),
		createdAt(selecting(k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}, k8stest.TCP("http", 80))), long),
		createdAt(selecting(k8stest.HeadlessService("prod", "db", k8stest.TCP("http", 80))), long),
		createdAt(k8stest.HeadlessService("prod", "manual", k8stest.TCP("http", 80)), long),
		stamped(k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.5.1"}}), long))
	kinds := []string{"cluster_ip", "headless_with_selector", "headless_without_selector", "external_name"}
	count := func(h prometheus.Observer) (uint64, float64) {
		var m dto.Metric
		if err := h.(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	observed := func(kind string) (n uint64, sum float64) {
		return count(c.Metrics.Programming(kind))
	}
	inTreeBefore := map[string]uint64{}
	for _, kind := range kinds {
		if n, _ := observed(kind); n != 0 {
			t.Fatalf("%s: the first sync's objects were observed (%d)", kind, n)
		}
		inTreeBefore[kind], _ = count(intree.DNSProgrammingLatency.WithLabelValues(kind))
	}
	expectObserved := func(want, wantInTree map[string]int, least time.Duration) {
		t.Helper()
		for _, kind := range kinds {
			n, sum := observed(kind)
			inTree, _ := count(intree.DNSProgrammingLatency.WithLabelValues(kind))
			if int(n) != want[kind] || int(inTree-inTreeBefore[kind]) != wantInTree[kind] {
				t.Errorf("%s: %d observations, %d in the in-tree plugin's series; want %d and %d", kind, n, inTree-inTreeBefore[kind], want[kind], wantInTree[kind])
			}
			if n > 0 && (sum < float64(n)*least.Seconds() || sum > float64(n)*(least+time.Minute).Seconds()) {
				t.Errorf("%s: %d observations summing %.3f s, want %s and a little each", kind, n, sum, least)
			}
		}
	}

	triggered := time.Now().Add(-2 * time.Second)
	c.Update(t, stamped(k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.5.2"}}), triggered))
	c.Create(t, stamped(k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.6.1"}}), triggered))
	c.Create(t, stamped(k8stest.Slice("prod", "manual", "manual-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.7.1"}}), triggered))
	c.Barrier(t)
	c.Expect(t, "10-0-5-2.web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-0-5-2.web.prod.svc.cluster.local.", "10.0.5.2"))
	// The in-tree plugin's series: the selector-less headless service's slice as headless_with_selector.
	sliceChanges := map[string]int{"cluster_ip": 1, "headless_with_selector": 2}
	expectObserved(map[string]int{"cluster_ip": 1, "headless_with_selector": 1, "headless_without_selector": 1}, sliceChanges, 2*time.Second)

	// A service created after the sync is observed from its creation; the in-tree plugin does not
	// observe creations.
	c.Create(t, createdAt(k8stest.ClusterIPService("prod", "new", []string{"10.0.0.2"}), triggered),
		createdAt(k8stest.ExternalNameService("prod", "ext", "example.com"), triggered))
	c.Barrier(t)
	c.Expect(t, "new.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("new.prod.svc.cluster.local.", "10.0.0.2"))
	expectObserved(map[string]int{"cluster_ip": 2, "headless_with_selector": 1, "headless_without_selector": 1, "external_name": 1}, sliceChanges, 2*time.Second)

	// A slice without the stamp (no controller wrote it), an update of a service (no trigger time
	// but its creation's), and a service created without a creation time are not observed.
	c.Update(t, k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.5.3"}}))
	c.Update(t, createdAt(k8stest.ClusterIPService("prod", "new", []string{"10.0.0.2"}, k8stest.TCP("http", 80)), triggered))
	c.Create(t, k8stest.ClusterIPService("prod", "unknown", []string{"10.0.0.3"}))
	c.Barrier(t)
	c.Expect(t, "unknown.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("unknown.prod.svc.cluster.local.", "10.0.0.3"))
	expectObserved(map[string]int{"cluster_ip": 2, "headless_with_selector": 1, "headless_without_selector": 1, "external_name": 1}, sliceChanges, 2*time.Second)
}
