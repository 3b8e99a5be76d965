package kubetree

import (
	"sync"
	"time"

	"github.com/coredns/coredns/plugin"

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
	// programmingDuration has the in-tree plugin's meaning and buckets, measured to the moment the
	// change is answered rather than stored.
	programmingDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "dns_programming_duration_seconds",
		Help: "Time from a change that moved a service's endpoints (the EndpointSlice's " +
			"last-change-trigger-time) to its answers being served, by service_kind (cluster_ip, headless_with_selector).",
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

// programmed observes the DNS programming latency of a change triggered at triggered (Unix ns).
func (m *serverMetrics) programmed(kind string, triggered int64) {
	programmingDuration.WithLabelValues(m.server, m.zones, kind).Observe(time.Since(time.Unix(0, triggered)).Seconds())
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
