package kubetree

import (
	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/query"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"
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
