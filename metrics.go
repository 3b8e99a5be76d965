package kubetree

import (
	"github.com/coredns/coredns/plugin"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are registered once per process: every server block and every reload shares them.
var metrics = struct {
	services      prometheus.Gauge
	synced        prometheus.Gauge
	applyDuration prometheus.Histogram
	apiErrors     *prometheus.CounterVec
	rejected      prometheus.Counter
}{
	services: promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "services",
		Help: "Services held in the informer store.",
	}),
	synced: promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "synced",
		Help: "1 once the first full state from the API server is being served.",
	}),
	applyDuration: promauto.NewHistogram(prometheus.HistogramOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "apply_duration_seconds",
		Help:    "Time from taking a changed service off the queue to its records being served.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
	}),
	apiErrors: promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "api_errors_total",
		Help: "List and watch failures against the API server, by resource.",
	}, []string{"resource"}),
	rejected: promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace, Subsystem: pluginName, Name: "rejected_total",
		Help: "Parts of API objects left out of DNS because they cannot be represented.",
	}),
}
