// Package metrics holds every Prometheus series of kubetree (coredns_kubetree_*), one server
// block's at a time (ServerBlock). The series carry the block's server and zones labels, as
// CoreDNS's cache plugin does, so that two server blocks with a kubetree each do not overwrite each
// other's gauges.
package metrics

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	intree "github.com/coredns/coredns/plugin/kubernetes/object"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

const subsystem = "kubetree"

var (
	buildInfo = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: subsystem, Name: "build_info",
		Help: "1, labelled with the version, revision and Go release of the kubetree this binary was built from, as coredns_build_info is of CoreDNS.",
	}, []string{"version", "revision", "goversion"})
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

// ServerBlock is one server block's series, of one instance of the plugin: a Corefile reload
// makes a new instance with the same labels while the old one still serves.
type ServerBlock struct {
	// Server and Zones are the series' labels: the block's address as CoreDNS's own plugins write
	// it (transport://host:port), and its zones joined by commas.
	Server, Zones string
	// Apply and Rejected are bound once, for the write side's every change.
	Apply    prometheus.Observer
	Rejected prometheus.Counter

	// The gauges hold the values of the instance that last claimed them (Claim); these are this
	// instance's, to be shown again if the newer instance fails and hands them back (Release).
	// owner and the gauges' handles are the owners' lock's.
	services      atomic.Int64
	synced        atomic.Bool
	owner         bool
	servicesGauge prometheus.Gauge
	syncedGauge   prometheus.Gauge
}

// New returns the series of the server block server, serving zones. Its gauges are shown once it
// claims them.
func New(server, zones string) *ServerBlock {
	return &ServerBlock{Server: server, Zones: zones, Apply: applyDuration.WithLabelValues(server, zones),
		Rejected: rejected.WithLabelValues(server, zones)}
}

// SetServices sets the services gauge, if this instance holds it.
func (m *ServerBlock) SetServices(n int) {
	m.services.Store(int64(n))
	m.showIfOwner()
}

// SetSynced sets the synced gauge, if this instance holds it.
func (m *ServerBlock) SetSynced(synced bool) {
	m.synced.Store(synced)
	m.showIfOwner()
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

// owners are the instances alive with each server block's labels, in the order they claimed them:
// the last one's values are the gauges'. A Corefile reload starts the new instance before it shuts
// the old one down, so the old one must not take the gauges away; and a reload that fails hands
// them back to the instance that goes on serving.
var owners = struct {
	sync.Mutex
	by map[[2]string][]*ServerBlock
}{by: map[[2]string][]*ServerBlock{}}

func (m *ServerBlock) key() [2]string { return [2]string{m.Server, m.Zones} }

// Claim makes m the owner of its gauges, starting at not synced. It runs before anything else
// of the instance writes to m.
func (m *ServerBlock) Claim() {
	owners.Lock()
	defer owners.Unlock()
	m.synced.Store(false)
	live := owners.by[m.key()]
	if len(live) > 0 {
		live[len(live)-1].owner = false
	}
	owners.by[m.key()] = append(live, m)
	m.servicesGauge, m.syncedGauge = servicesGauge.WithLabelValues(m.Server, m.Zones), syncedGauge.WithLabelValues(m.Server, m.Zones)
	m.owner = true
	m.show()
}

// Release gives up m's claim, when the instance stops or fails to start. The instance claimed
// before it, if it still serves, shows its values again; when none is left, every series of the
// labels goes (a server block that a reload removed, or an instance that never served, leaves no
// series behind).
func (m *ServerBlock) Release() {
	owners.Lock()
	defer owners.Unlock()
	key := m.key()
	live := owners.by[key]
	i := slices.Index(live, m)
	if i >= 0 {
		live = slices.Delete(live, i, i+1)
	}
	m.owner = false
	switch {
	case len(live) == 0:
		delete(owners.by, key)
		m.deleteSeries()
	case i == len(live): // m was the owner: the one claimed before it shows its values again
		owners.by[key] = live
		prev := live[len(live)-1]
		prev.owner = true
		prev.show()
	default:
		owners.by[key] = live
	}
}

// show sets the gauges to m's values; the caller holds the owners' lock.
func (m *ServerBlock) show() {
	m.servicesGauge.Set(float64(m.services.Load()))
	synced := 0.0
	if m.synced.Load() {
		synced = 1
	}
	m.syncedGauge.Set(synced)
}

// showIfOwner sets the gauges to m's values if m holds them.
func (m *ServerBlock) showIfOwner() {
	owners.Lock()
	defer owners.Unlock()
	if m.owner {
		m.show()
	}
}

// deleteSeries deletes every series of m's labels; the caller holds the owners' lock.
func (m *ServerBlock) deleteSeries() {
	labels := prometheus.Labels{"server": m.Server, "zones": m.Zones}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{servicesGauge, syncedGauge, applyDuration,
		programmingDuration, apiErrors, auditRepairs, probeDuration, probes, isolated, rejected} {
		v.DeletePartialMatch(labels)
	}
}

// Build exports the version, revision and Go release of the binary's kubetree (once a process).
func Build(version, revision, goversion string) {
	buildInfo.WithLabelValues(version, revision, goversion).Set(1)
}
