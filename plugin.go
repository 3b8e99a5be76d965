// Package kubetree is a CoreDNS plugin that serves Kubernetes cluster DNS from an in-memory tree
// kept current by client-go watches. This package is the glue: the plugin and its setup, the
// handler and the companions' interfaces (autopath, metadata, transfer, kubetree_external), and
// the write side (the watcher that owns client-go, the applier that writes every index). The
// layers below it are internal/object (the model of the cluster), internal/records (DNS records
// made from the model) and internal/tree (the name tree).
package kubetree

import (
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const pluginName = "kubetree"

// Kubetree answers cluster DNS names from the tree and passes everything else on.
type Kubetree struct {
	Next  plugin.Handler
	Zones []string // every zone we answer, lower case, fully qualified
	Fall  fall.F

	zones []zone // Zones, each with what it is, in the same order
	// forward holds the zones that are not reverse zones: namespaces and pods live under each.
	forward []string
	// svcZones are the forward zones that are not multicluster zones: services live under each of
	// them and PTR records point into the first one. ServiceImports live under the multicluster
	// zones instead.
	svcZones []string

	cfg      config
	tree     *tree.Tree
	reverse  *records.ReverseIndex // nil without reverse zones
	build    *records.Builder
	pods     *object.PodIndex  // nil unless pods verified
	nodes    *object.NodeIndex // each node's zone; nil without topology
	podStore *object.PodStore  // nil unless pods verified
	upstream upstreamer
	applier  *applier // for zone transfers' snapshots
	// hostSearch is the host's search path, which autopath tries after the cluster's; searches
	// holds each namespace's search paths, made once (autopath.go).
	hostSearch []string
	searchesMu sync.RWMutex
	searches   map[string][][]string

	synced atomic.Bool
	// behind is what the applier last learnt of the services this server is behind, for
	// kubetree_external's nameserver addresses.
	behind atomic.Pointer[records.Behind]
	// external indexes the services' external IPs, for kubetree_external's PTR records.
	external *records.ExternalIndex
	// probe is the self-probe, whose misses Ready reports; nil without the probe option.
	probe *prober
	// isolation limits what each client pod resolves; nil without the isolate option.
	isolation *isolation
}

// zone is one zone of the server block, with its kind decided once rather than per query.
type zone struct {
	name         string
	reverse      bool
	multicluster bool // served from ServiceImports rather than Services
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
	podMode           podMode
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
	probe            *probeConfig        // nil: no self-probe
	explain          string              // the explain listener's address; "": no explain endpoint
	isolate          *isolateConfig      // nil: every client resolves everything
	isolateLabels    *meta.LabelSelector // isolate_labels, until parse hands it to isolate
}

// podMode is the pods option: whether and how <address>.<ns>.pod.<zone> is answered.
type podMode uint8

const (
	podsDisabled podMode = iota
	podsInsecure
	podsVerified
)

// podModes are the pods option's values, named as in the in-tree kubernetes plugin.
var podModes = map[string]podMode{"disabled": podsDisabled, "insecure": podsInsecure, "verified": podsVerified}

func defaultConfig() config {
	return config{
		namespaces:     map[string]bool{},
		podMode:        podsDisabled,
		ttl:            defaultTTL,
		negativeTTL:    sameAsTTL,
		startupTimeout: 5 * time.Second,
		auditInterval:  defaultAuditInterval,
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
// probe option, whether the self-probe finds its name; the ready plugin polls it.
func (k *Kubetree) Ready() bool { return k.synced.Load() && k.probe.healthy() }

// allowsNamespace reports whether the namespaces option lets a namespace be served.
func (c *config) allowsNamespace(ns string) bool {
	return len(c.namespaces) == 0 || c.namespaces[ns]
}

// sliceOptions are the settings of the slice transform; multicluster for ServiceImports' slices.
func (c *config) sliceOptions(multicluster bool) object.SliceOptions {
	return object.SliceOptions{PodNames: c.endpointPodNames, Zonal: c.zonal && !multicluster, Topology: c.topology && !multicluster,
		Multicluster: multicluster, ServingTerminating: c.servingTerminating && !multicluster}
}
