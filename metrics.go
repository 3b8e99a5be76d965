package kubetree

import (
	"sync"
	"time"

	"github.com/coredns/coredns/plugin"
	intree "github.com/coredns/coredns/plugin/kubernetes/object"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The series carry the server block's server and zones labels, as CoreDNS's cache plugin does, so
// that two server blocks with a kubetree each do not overwrite each other's gauges.
var (
	servicesGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "services",
		Help: "Services that have a name in the server block's first cluster zone.",
	}, []string{"server", "zones"})
	syncedGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "synced",
		Help: "1 once the first full state from the API server is being served, else 0.",
	}, []string{"server", "zones"})
	applyDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "apply_duration_seconds",
		Help:    "Time from taking a changed service off the queue to its records being served.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
	}, []string{"server", "zones"})
	// programmingDuration is the DNS programming latency SLI (SIG Scalability's
	// dns_programming_latency.md) per server block, with the in-tree plugin's buckets, measured to
	// the moment the change is answered rather than stored. Every observation also goes to the
	// in-tree plugin's own series (programmed), which SLO tooling reads.
	programmingDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "dns_programming_duration_seconds",
		Help: "Time from a change of a service or of its ready endpoints (the EndpointSlice's " +
			"last-change-trigger-time, or the service's creation) to its answers being served, by service_kind " +
			"(cluster_ip, headless_with_selector, headless_without_selector, external_name).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 20),
	}, []string{"server", "zones", "service_kind"})
	apiErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "api_errors_total",
		Help: "Failed list and watch calls to the API server, by resource.",
	}, []string{"server", "zones", "resource"})
	auditRepairs = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "audit_repairs_total",
		Help: "Objects the periodic audit found different from the API server (a change the watch missed) and repaired, by resource.",
	}, []string{"server", "zones", "resource"})
	probeDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "probe_duration_seconds",
		Help:    "Time the plugin's handler took to answer the self-probe's query (the probe option), in process.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
	}, []string{"server", "zones"})
	probes = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "probes_total",
		Help: "Self-probe queries (the probe option) by result: success (the name exists), nxdomain, " +
			"servfail, error (another rcode, no reply, or a handler error).",
	}, []string{"server", "zones", "result"})
	isolated = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "isolated_total",
		Help: "Queries the isolate option answered as if the name did not exist (a name of a namespace the client " +
			"may not resolve), or whose PTR names it left some out of, by client: pod, or unidentified (isolate refuse).",
	}, []string{"server", "zones", "client"})
	rejected = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "rejected_total",
		Help: "Parts of API objects (a port, an address, a whole service) left out of DNS because " +
			"they cannot be represented, counted once per object version.",
	}, []string{"server", "zones"})
)

// serverMetrics are one server block's series.
type serverMetrics struct {
	server, zones string
	services      prometheus.Gauge
	synced        prometheus.Gauge
	apply         prometheus.Observer
	rejected      prometheus.Counter
}

func newServerMetrics(server, zones string) *serverMetrics {
	m := &serverMetrics{server: server, zones: zones}
	m.bind()
	return m
}

// bind takes the series for m's labels; a series deleted by release is made anew.
func (m *serverMetrics) bind() {
	m.services = servicesGauge.WithLabelValues(m.server, m.zones)
	m.synced = syncedGauge.WithLabelValues(m.server, m.zones)
	m.apply = applyDuration.WithLabelValues(m.server, m.zones)
	m.rejected = rejected.WithLabelValues(m.server, m.zones)
}

// programmed observes the DNS programming latency of a change triggered at triggered (Unix ns),
// in kubetree's series and in the in-tree plugin's coredns_kubernetes_dns_programming_duration_seconds
// (same name, service_kind label and buckets), so that what reads the in-tree plugin's SLI reads
// kubetree's.
func (m *serverMetrics) programmed(kind string, triggered int64) {
	took := time.Since(time.Unix(0, triggered)).Seconds()
	programmingDuration.WithLabelValues(m.server, m.zones, kind).Observe(took)
	intree.DNSProgrammingLatency.WithLabelValues(kind).Observe(took)
}

// repaired counts an object of resource that the audit repaired.
func (m *serverMetrics) repaired(resource string) {
	auditRepairs.WithLabelValues(m.server, m.zones, resource).Inc()
}

// apiError counts a failed call for resource.
func (m *serverMetrics) apiError(resource string) {
	apiErrors.WithLabelValues(m.server, m.zones, resource).Inc()
}

// gaugeOwners is which instance last claimed a server block's gauges. A Corefile reload starts the
// new instance before it shuts the old one down: the old one must not take away the new one's
// gauges.
var gaugeOwners = struct {
	sync.Mutex
	by map[[2]string]*serverMetrics
}{by: map[[2]string]*serverMetrics{}}

// claim makes m the owner of its gauges, starting at not synced. It runs before anything else
// of the instance writes to m.
func (m *serverMetrics) claim() {
	gaugeOwners.Lock()
	defer gaugeOwners.Unlock()
	gaugeOwners.by[[2]string{m.server, m.zones}] = m
	m.bind()
	m.synced.Set(0)
}

// release takes the gauges away on shutdown, unless a newer instance has claimed them.
func (m *serverMetrics) release() {
	gaugeOwners.Lock()
	defer gaugeOwners.Unlock()
	key := [2]string{m.server, m.zones}
	if gaugeOwners.by[key] != m {
		return
	}
	delete(gaugeOwners.by, key)
	servicesGauge.DeleteLabelValues(m.server, m.zones)
	syncedGauge.DeleteLabelValues(m.server, m.zones)
}
