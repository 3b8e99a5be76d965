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
