// Package metrics holds every Prometheus series of kubetree (coredns_kubetree_*), one server
// block's at a time (ServerBlock). The series carry the block's server and zones labels, as
// CoreDNS's cache plugin does, so that two server blocks with a kubetree each do not overwrite each
// other's gauges.
package metrics

import (
	"sync"
	"time"

	"github.com/coredns/coredns/plugin"
	intree "github.com/coredns/coredns/plugin/kubernetes/object"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

const subsystem = "kubetree"

var (
	servicesGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "services",
		Help: "Services that have a name in the server block's first cluster zone.",
	}, []string{"server", "zones"})
	syncedGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "synced",
		Help: "1 once the first full state from the API server is being served, else 0.",
	}, []string{"server", "zones"})
	applyDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "apply_duration_seconds",
		Help:    "Time to build and publish a changed service's records, from the moment the write side holds its lock.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
	}, []string{"server", "zones"})
	// programmingDuration is the DNS programming latency SLI (SIG Scalability's
	// dns_programming_latency.md) per server block, with the in-tree plugin's buckets, measured to
	// the moment the change is answered rather than stored. Every observation also goes to the
	// in-tree plugin's own series (Programmed).
	programmingDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "dns_programming_duration_seconds",
		Help: "Time from a change of a service or of its ready endpoints (the EndpointSlice's " +
			"last-change-trigger-time, or the service's creation) to its answers being served, by service_kind " +
			"(cluster_ip, headless_with_selector, headless_without_selector, external_name).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 20),
	}, []string{"server", "zones", "service_kind"})
	apiErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "api_errors_total",
		Help: "Failed list and watch calls to the API server, by resource.",
	}, []string{"server", "zones", "resource"})
	auditRepairs = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "audit_repairs_total",
		Help: "Objects the periodic audit found different from the API server (a change the watch missed) and repaired, by resource.",
	}, []string{"server", "zones", "resource"})
	probeDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "probe_duration_seconds",
		Help:    "Time the plugin's handler took to answer the self-probe's query (the probe option), in process.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
	}, []string{"server", "zones"})
	probes = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "probes_total",
		Help: "Self-probe queries (the probe option) by result: success (the name exists), nxdomain, " +
			"servfail, error (another rcode, no reply, or a handler error).",
	}, []string{"server", "zones", "result"})
	isolated = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "isolated_total",
		Help: "Queries the isolate option answered as if the name did not exist (a name of a namespace the client " +
			"may not resolve), or whose PTR names it left some out of, by client: pod, or unidentified (isolate refuse).",
	}, []string{"server", "zones", "client"})
	rejected = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "rejected_total",
		Help: "Parts of API objects (a port, an address, a whole service) left out of DNS because " +
			"they cannot be represented, counted once per object version.",
	}, []string{"server", "zones"})
)

// ServerBlock is one server block's series.
type ServerBlock struct {
	// Server and Zones are the series' labels: the block's address as CoreDNS's own plugins write
	// it (transport://host:port), and its zones joined by commas.
	Server, Zones string
	// Services, Synced, Apply and Rejected are bound once, for the write side's every change.
	Services prometheus.Gauge
	Synced   prometheus.Gauge
	Apply    prometheus.Observer
	Rejected prometheus.Counter
}

// New returns the series of the server block server, serving zones.
func New(server, zones string) *ServerBlock {
	m := &ServerBlock{Server: server, Zones: zones}
	m.bind()
	return m
}

// bind takes the series for m's labels; a series deleted by Release is made anew.
func (m *ServerBlock) bind() {
	m.Services = servicesGauge.WithLabelValues(m.Server, m.Zones)
	m.Synced = syncedGauge.WithLabelValues(m.Server, m.Zones)
	m.Apply = applyDuration.WithLabelValues(m.Server, m.Zones)
	m.Rejected = rejected.WithLabelValues(m.Server, m.Zones)
}

// Programmed observes the DNS programming latency of a change triggered at triggered (Unix ns):
// in kubetree's series under kind and, unless inTreeKind is "", in the in-tree plugin's
// coredns_kubernetes_dns_programming_duration_seconds under inTreeKind, the service_kind that
// plugin would give the same change, so that what reads its series reads the same kinds.
func (m *ServerBlock) Programmed(kind, inTreeKind string, triggered int64) {
	took := time.Since(time.Unix(0, triggered)).Seconds()
	m.Programming(kind).Observe(took)
	if inTreeKind != "" {
		intree.DNSProgrammingLatency.WithLabelValues(inTreeKind).Observe(took)
	}
}

// Programming is kubetree's DNS programming latency series of service_kind kind.
func (m *ServerBlock) Programming(kind string) prometheus.Observer {
	return programmingDuration.WithLabelValues(m.Server, m.Zones, kind)
}

// Repairs counts the objects of resource that the audit repaired.
func (m *ServerBlock) Repairs(resource string) prometheus.Counter {
	return auditRepairs.WithLabelValues(m.Server, m.Zones, resource)
}

// APIErrors counts the failed calls for resource.
func (m *ServerBlock) APIErrors(resource string) prometheus.Counter {
	return apiErrors.WithLabelValues(m.Server, m.Zones, resource)
}

// Isolated counts the queries the isolate option changed, of client "pod" or "unidentified".
func (m *ServerBlock) Isolated(client string) prometheus.Counter {
	return isolated.WithLabelValues(m.Server, m.Zones, client)
}

// ProbeLatency is the time the self-probe's queries took.
func (m *ServerBlock) ProbeLatency() prometheus.Observer {
	return probeDuration.WithLabelValues(m.Server, m.Zones)
}

// Probes counts the self-probe's queries of result.
func (m *ServerBlock) Probes(result string) prometheus.Counter {
	return probes.WithLabelValues(m.Server, m.Zones, result)
}

// gaugeOwners is which instance last claimed a server block's gauges. A Corefile reload starts the
// new instance before it shuts the old one down: the old one must not take away the new one's
// gauges.
var gaugeOwners = struct {
	sync.Mutex
	by map[[2]string]*ServerBlock
}{by: map[[2]string]*ServerBlock{}}

// Claim makes m the owner of its gauges, starting at not synced. It runs before anything else
// of the instance writes to m.
func (m *ServerBlock) Claim() {
	gaugeOwners.Lock()
	defer gaugeOwners.Unlock()
	gaugeOwners.by[[2]string{m.Server, m.Zones}] = m
	m.bind()
	m.Synced.Set(0)
}

// Release takes the gauges away on shutdown, unless a newer instance has claimed them.
func (m *ServerBlock) Release() {
	gaugeOwners.Lock()
	defer gaugeOwners.Unlock()
	key := [2]string{m.Server, m.Zones}
	if gaugeOwners.by[key] != m {
		return
	}
	delete(gaugeOwners.by, key)
	servicesGauge.DeleteLabelValues(m.Server, m.Zones)
	syncedGauge.DeleteLabelValues(m.Server, m.Zones)
}
