// Package kubetree is a CoreDNS plugin that serves Kubernetes cluster DNS from an in-memory tree
// kept current by client-go watches. This package is the glue into CoreDNS: the plugin and its
// setup, the handler, the wiring of the layers below (tree.go: the published state and the applier
// that writes it; watch.go: the watcher that feeds the applier), and the companions' interfaces
// (autopath, metadata, transfer, kubetree_external). The layers are internal packages: watcher
// (client-go) and apiclient (its transport), applier (the write side), query (the read side),
// explain and probe (operations), metrics, and below them records, object and tree.
package kubetree

import (
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/probe"
	"github.com/kubetree/kubetree/internal/query"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"
	"github.com/kubetree/kubetree/internal/watcher"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const pluginName = "kubetree"

// Kubetree answers cluster DNS names from the tree and passes everything else on.
type Kubetree struct {
	Next  plugin.Handler
	Zones []string // every zone we answer, lower case, fully qualified
	Fall  fall.F

	zones []records.ServedZone // Zones, each with its kind, in the same order
	// forward holds the zones that are not reverse zones: namespaces and pods live under each.
	forward []string
	// svcZones are the forward zones that are not multicluster zones: services live under each of
	// them and PTR records point into the first one. ServiceImports live under the multicluster
	// zones instead.
	svcZones []string

	cfg config

	// The published state (tree.go): written by the applier alone, read by the answerer and the
	// companions' interfaces.
	tree     *tree.Tree
	reverse  *records.ReverseIndex // nil without reverse zones
	external *records.ExternalIndex
	build    *records.Builder
	pods     *object.PodIndex  // nil unless pods verified
	nodes    *object.NodeIndex // nil without topology
	podStore *object.PodStore  // nil unless pods verified
	// isolation limits what each client pod resolves; nil without the isolate option.
	isolation *query.Isolation
	// behind is what the applier last learnt of the services this server is behind, for
	// kubetree_external's nameserver addresses.
	behind atomic.Pointer[records.Behind]
	// synced is set once the first full state from the API server is published (watch.go).
	synced atomic.Bool
	// draining is set when the instance shuts down: a ready plugin that monitors continuously
	// fails /ready from then on.
	draining atomic.Bool

	upstream query.Upstream
	query    *query.Answerer  // answers from the published state
	applier  *applier.Applier // the write side; zone transfers take their snapshots from it
	probe    *probe.Prober    // nil without the probe option
	metrics  *metrics.ServerBlock
	// hostSearch is the host's search path, which autopath tries after the cluster's; searches
	// holds each namespace's search paths, made once and swept of gone namespaces when it reaches
	// searchesSwept entries (autopath.go).
	hostSearch    []string
	searchesMu    sync.RWMutex
	searches      map[string][][]string
	searchesSwept int
}

// config is what the Corefile says; parse fills it and nothing else reads the Corefile.
type config struct {
	endpoint          string
	tlsCert           string
	tlsKey            string
	tlsCA             string
	kubeconfig        string
	kubeContext       string
	namespaces        map[string]bool // empty: every namespace
	namespaceSelector *meta.LabelSelector
	labelSelector     *meta.LabelSelector
	podMode           query.PodMode
	endpointPodNames  bool
	ttl               uint32
	negativeTTL       uint32 // negative_ttl; sameAsTTL without it (missTTL)
	noEndpoints       bool
	ignoreEmpty       bool
	startupTimeout    time.Duration
	apiQPS            float32
	apiBurst          int
	apiMaxInflight    int      // 0: no limit
	multiclusterZones []string // zones served from MCS ServiceImports
	zonal             bool     // zone-scoped names of headless services (<zone>.pin._zone.<svc>...)
	topology          bool     // headless services answer a client pod what kube-proxy would send it to
	// servingTerminating answers a headless service without ready endpoints with those that are
	// terminating but still serving (serving_terminating).
	servingTerminating bool
	auditInterval      time.Duration // 0: no audit
	// clientSubnetFrom are the sources whose EDNS0 client-subnet option (a whole address) names
	// the client instead of the packet's source: a node-local cache forwarding for its pods.
	clientSubnetFrom []netip.Prefix
	probe            *probe.Options        // nil: no self-probe
	explain          string                // the explain listener's address; "": no explain endpoint
	isolate          *query.IsolateOptions // nil: every client resolves everything
	isolateLabels    *meta.LabelSelector   // isolate_labels, until parse hands it to isolate
}

// podModes are the pods option's values, named as in the in-tree kubernetes plugin.
var podModes = map[string]query.PodMode{"disabled": query.PodsDisabled, "insecure": query.PodsInsecure, "verified": query.PodsVerified}

func defaultConfig() config {
	return config{
		namespaces:     map[string]bool{},
		podMode:        query.PodsDisabled,
		ttl:            defaultTTL,
		negativeTTL:    sameAsTTL,
		startupTimeout: 5 * time.Second,
		auditInterval:  watcher.DefaultAuditInterval,
	}
}

const (
	defaultTTL = 5
	maxTTL     = 3600           // of ttl and negative_ttl, as in the in-tree plugin
	sameAsTTL  = math.MaxUint32 // negativeTTL without negative_ttl: the ttl, whatever it is
)

// missTTL is how long a miss may be cached (records.Builder.NegativeTTL): negative_ttl, else the ttl.
func (c *config) missTTL() uint32 {
	if c.negativeTTL == sameAsTTL {
		return c.ttl
	}
	return c.negativeTTL
}

// Ready reports whether the first full sync with the API server has been published and, with the
// probe option, whether the self-probe finds its name; the ready plugin polls it. From the
// instance's shutdown on it is false.
func (k *Kubetree) Ready() bool {
	return k.synced.Load() && k.probe.Healthy() && !k.draining.Load()
}

// CacheBypassZones implements cache.ZoneBypasser: with isolate or topology an answer is made for
// its client, and a cache keyed by name and type would hand one client's answer to another (a name
// hidden from one namespace to a pod of another, or the reverse: a refusal to the name's owner), so
// the cache plugin of this server block bypasses kubetree's zones. Without them every client gets
// the same answer, and the zones are cached as usual.
func (k *Kubetree) CacheBypassZones() []string {
	if k.cfg.isolate == nil && !k.cfg.topology {
		return nil
	}
	return k.Zones
}

// Synced reports whether the first full sync with the API server has been published, whatever the
// self-probe finds: kubetree_external refuses transfers until then (external.Cluster).
func (k *Kubetree) Synced() bool { return k.synced.Load() }

// allowsNamespace reports whether the namespaces option lets a namespace be served.
func (c *config) allowsNamespace(ns string) bool {
	return len(c.namespaces) == 0 || c.namespaces[ns]
}

// sliceOptions are the settings of the slice transform; multicluster for ServiceImports' slices.
func (c *config) sliceOptions(multicluster bool) object.SliceOptions {
	return object.SliceOptions{PodNames: c.endpointPodNames, Zonal: c.zonal && !multicluster, Topology: c.topology && !multicluster,
		Multicluster: multicluster, ServingTerminating: c.servingTerminating && !multicluster}
}
