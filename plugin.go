// Package kubetree is a CoreDNS plugin that serves Kubernetes cluster DNS from an in-memory tree
// kept current by client-go watches.
package kubetree

import (
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const pluginName = "kubetree"

// Pod modes, named as in the in-tree kubernetes plugin.
const (
	podModeDisabled = "disabled"
	podModeInsecure = "insecure"
)

// Kubetree answers cluster DNS names from the tree and passes everything else on.
type Kubetree struct {
	Next  plugin.Handler
	Zones []string // every zone we answer, lower case, fully qualified
	Fall  fall.F

	// forward holds the zones that are not reverse zones; services live under each of them and
	// PTR records point into the first one.
	forward []string

	cfg      config
	tree     *Tree
	upstream upstreamer

	synced atomic.Bool
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
	podMode           string
	endpointPodNames  bool
	ttl               uint32
	noEndpoints       bool
	ignoreEmpty       bool
	startupTimeout    time.Duration
	apiQPS            float32
	apiBurst          int
}

func defaultConfig() config {
	return config{
		namespaces:     map[string]bool{},
		podMode:        podModeDisabled,
		ttl:            defaultTTL,
		startupTimeout: 5 * time.Second,
	}
}

const defaultTTL = 5

// Ready reports whether the first full sync with the API server has been published; the ready
// plugin polls it.
func (k *Kubetree) Ready() bool { return k.synced.Load() }

// namespaceExposed reports whether the namespaces option lets a namespace be served.
func (c *config) namespaceExposed(ns string) bool {
	return len(c.namespaces) == 0 || c.namespaces[ns]
}
