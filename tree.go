package kubetree

import (
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"
)

// The name tree the plugin answers from is internal/tree's, holding internal/records' sets; beside
// it are the reverse, external-IP and pod indexes. They are made here, written only by the
// applier (apply.go), and read by the handler and the companions' interfaces.

// newWriteSide gives a parsed Kubetree the tree, indexes and record builder that it answers from,
// and returns the applier that writes into them, with the apex records published. setup and the
// tests build a Kubetree this one way.
func (k *Kubetree) newWriteSide(m *serverMetrics) *applier {
	k.tree = tree.New(k.Zones)
	k.reverse = records.NewReverseIndex(k.Zones)
	k.external = records.NewExternalIndex()
	k.build = &records.Builder{TTL: k.cfg.ttl, NegativeTTL: k.cfg.missTTL(), IgnoreEmpty: k.cfg.ignoreEmpty, Nameserver: "ns.dns." + k.forward[0],
		Clusterset: k.cfg.multiclusterZones, Zonal: k.cfg.zonal, Topology: k.cfg.topology}
	if k.cfg.podMode == podsVerified {
		k.pods = object.NewPodIndex()
		k.podStore = object.NewPodStore(k.cfg.topology)
	}
	if k.cfg.topology {
		k.nodes = object.NewNodeIndex()
	}
	if k.cfg.isolate != nil {
		k.isolation = newIsolation(k.cfg.isolate, m)
	}
	a := newApplier(k, m)
	a.publishApex()
	k.applier = a
	return a
}
