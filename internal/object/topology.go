package object

import (
	"strings"
	"unique"

	api "k8s.io/api/core/v1"
)

// With topology, a client pod is answered the endpoints kube-proxy on its node would send it to
// (k8s.io/kubernetes pkg/proxy/topology.go). kube-proxy reads each endpoint's hints; the
// EndpointSlice controller writes them from the Service's trafficDistribution (k8s.io/endpointslice
// trafficdist): each ready endpoint hinted for its own zone, and with PreferSameNode for its own node.
// What that needs of each endpoint is kept, interned: the endpoints of one node share one copy.

// Topology is what kube-proxy's topology rules, and the hints the EndpointSlice controller would
// write, read of an endpoint.
type Topology struct {
	Zone, Node string // the endpoint's own zone and node
	// ForZones and ForNodes are its hints as written, joined by hintSep.
	ForZones, ForNodes string
}

// hintSep joins hints; a zone is a label value and a node a DNS subdomain, neither can hold it.
const hintSep = "/"

// HintedFor reports whether hints (joined by hintSep) name name.
func HintedFor(hints, name string) bool {
	if name == "" {
		return false
	}
	for hints != "" {
		var h string
		h, hints, _ = strings.Cut(hints, hintSep)
		if h == name {
			return true
		}
	}
	return false
}

// EachHint calls f with every hint of hints (joined by hintSep).
func EachHint(hints string, f func(string)) {
	for hints != "" {
		var h string
		h, hints, _ = strings.Cut(hints, hintSep)
		if h != "" {
			f(h)
		}
	}
}

// topologyOf interns an endpoint's topology; the zero handle when it has none.
func topologyOf(e EndpointFields) unique.Handle[Topology] {
	t := Topology{Zone: e.Zone, Node: e.NodeName, ForZones: joinHints(e.ForZones), ForNodes: joinHints(e.ForNodes)}
	if t == (Topology{}) {
		return unique.Handle[Topology]{}
	}
	return unique.Make(t)
}

func joinHints(hints []string) string {
	kept := hints[:0:0]
	for _, h := range hints {
		if h != "" && !strings.Contains(h, hintSep) {
			kept = append(kept, h)
		}
	}
	return strings.Join(kept, hintSep)
}

// Distribution is where a service's topology hints come from.
type Distribution uint8

const (
	// HintsAsWritten: the slices' hints as written (no trafficDistribution, one kubetree does not
	// know, or topology-mode Auto, whose hints the controller's topology cache writes).
	HintsAsWritten Distribution = iota
	// HintsSameZone: PreferClose or PreferSameZone; each endpoint hinted for its own zone.
	HintsSameZone
	// HintsSameNode: PreferSameNode; each endpoint hinted for its own zone and its own node.
	HintsSameNode
)

// distributionOf reads a Service as the EndpointSlice controller does (its reconciler's
// validTrafficDistribution and hintsEnabled): the topology-mode annotation, when Auto, wins over
// trafficDistribution.
func distributionOf(svc *api.Service) Distribution {
	mode, ok := svc.Annotations[api.DeprecatedAnnotationTopologyAwareHints]
	if !ok {
		mode = svc.Annotations[api.AnnotationTopologyMode]
	}
	if mode == "Auto" || mode == "auto" || svc.Spec.TrafficDistribution == nil {
		return HintsAsWritten
	}
	switch *svc.Spec.TrafficDistribution {
	case api.ServiceTrafficDistributionPreferClose, api.ServiceTrafficDistributionPreferSameZone:
		return HintsSameZone
	case api.ServiceTrafficDistributionPreferSameNode:
		return HintsSameNode
	}
	return HintsAsWritten
}

// Hints returns the endpoint's zone and node hints as the service's distribution makes them.
func (d Distribution) Hints(t Topology) (forZones, forNodes string) {
	switch d {
	case HintsSameZone:
		return t.Zone, ""
	case HintsSameNode:
		return t.Zone, t.Node
	}
	return t.ForZones, t.ForNodes
}
