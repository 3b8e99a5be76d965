package kubetree

import (
	"strings"
	"sync/atomic"

	"github.com/coredns/caddy"

	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/explain"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/probe"
	"github.com/kubetree/kubetree/internal/query"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"
	"github.com/kubetree/kubetree/internal/watcher"
)

// The name tree the plugin answers from is internal/tree's, holding internal/records' sets; beside
// it are the reverse, external-IP, pod and node indexes. They are made here, written only by the
// applier (internal/applier), and read by the answerer (internal/query) and the companions'
// interfaces. The pod store is the one exception: the pod codec, in the watcher's pod decoder,
// writes it as pods arrive (it shares their identities), and the applier's pod index holds what
// it made.

// newWriteSide gives a parsed Kubetree the tree, indexes and record builder that it answers from,
// the answerer that reads them, and the applier that writes into them, with the apex records
// published. setup and the tests build a Kubetree this one way.
func (k *Kubetree) newWriteSide(m *metrics.ServerBlock) *applier.Applier {
	k.metrics = m
	k.tree = tree.New(k.Zones)
	k.reverse = records.NewReverseIndex(k.Zones)
	k.external = records.NewExternalIndex()
	k.build = &records.Builder{TTL: k.cfg.ttl, NegativeTTL: k.cfg.missTTL(), IgnoreEmpty: k.cfg.ignoreEmpty, Nameserver: "ns.dns." + k.forward[0],
		Clusterset: k.cfg.multiclusterZones, Zonal: k.cfg.zonal, Topology: k.cfg.topology}
	if k.cfg.podMode == query.PodsVerified {
		k.pods = object.NewPodIndex()
		k.podStore = object.NewPodStore(k.cfg.topology)
	}
	if k.cfg.topology {
		k.nodes = object.NewNodeIndex()
	}
	ix := applier.Indexes{Tree: k.tree, Reverse: k.reverse, External: k.external, Pods: k.pods, Nodes: k.nodes, Behind: &k.behind}
	if k.cfg.isolate != nil {
		k.isolation = query.NewIsolation(k.cfg.isolate, m)
		ix.Labelled = k.isolation
	}
	k.query = query.New(query.Options{Zones: k.zones, Fall: k.Fall, Synced: &k.synced, Tree: k.tree, Reverse: k.reverse, Build: k.build,
		Pods: k.pods, Nodes: k.nodes, Isolation: k.isolation, Upstream: k.upstream, PodMode: k.cfg.podMode, ClientSubnetFrom: k.cfg.clientSubnetFrom})
	k.applier = applier.New(ix, applier.Options{Zones: k.zones, Clusterset: k.cfg.multiclusterZones,
		PodNames: k.cfg.podMode != query.PodsDisabled, Build: k.build, Metrics: m})
	return k.applier
}

// TestParts are the parts of a Kubetree that the plugin's tests outside this package look into:
// internal/plugintest, their harness, runs the real watcher on a fake API server with Watch,
// writing through Applier, asks ServeDNS and reads what was published. They are a test's way in,
// and only NewForTests hands them out: setup never does, and no Corefile reaches them.
type TestParts struct {
	Applier  *applier.Applier
	Answerer *query.Answerer // a test may set its Upstream
	Metrics  *metrics.ServerBlock
	Tree     *tree.Tree
	Reverse  *records.ReverseIndex // nil without reverse zones
	External *records.ExternalIndex
	Pods     *object.PodIndex  // nil unless pods verified
	Nodes    *object.NodeIndex // nil without topology
	// SyncedFlag is what the watcher sets once the first full state is published: a test that
	// publishes through Applier itself sets it.
	SyncedFlag  *atomic.Bool
	ServedZones []records.ServedZone // Zones, each with its kind
	Forward     []string             // the forward zones
	Watch       watcher.Options      // what newWatcher hands the watcher
	Probe       *probe.Options       // the probe option; nil without it
	// Explain is what the explain option serves, over the stores of the watcher given.
	Explain func(explain.Stores) *explain.Instance
}

// TestStandIns are what NewForTests puts where setup puts what it takes from the server and the
// host.
type TestStandIns struct {
	Upstream   query.Upstream // for the rest of the chain, which ExternalName targets are resolved through
	HostSearch []string       // for resolv.conf's search path
	Server     string         // for the server block's address, which labels the metrics
}

// NewForTests parses the Corefile c reads and wires the Kubetree as setup does, with stand-ins
// for the server and the host and without a watcher: the tests of the plugin outside this package
// start here (internal/plugintest). Nothing in the plugin calls it.
func NewForTests(c *caddy.Controller, s TestStandIns) (*Kubetree, *TestParts, error) {
	k, err := parse(c)
	if err != nil {
		return nil, nil, err
	}
	k.upstream, k.hostSearch = s.Upstream, s.HostSearch
	a := k.newWriteSide(metrics.New(s.Server, strings.Join(k.Zones, ",")))
	return k, &TestParts{Applier: a, Answerer: k.query, Metrics: k.metrics, Tree: k.tree, Reverse: k.reverse, External: k.external,
		Pods: k.pods, Nodes: k.nodes, SyncedFlag: &k.synced, ServedZones: k.zones, Forward: k.forward, Watch: k.watchOptions(),
		Probe: k.cfg.probe, Explain: k.explainInstance}, nil
}
