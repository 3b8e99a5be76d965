package records

import (
	"unique"

	"github.com/kubetree/kubetree/internal/object"
)

// Topology-aware answers, with topology: a headless service's A/AAAA and SRV records, and its
// endpoint names, answer a client pod the endpoints kube-proxy on the pod's node would send it to,
// by kube-proxy's own rules (k8s.io/kubernetes pkg/proxy/topology.go, topologyModeFromHints and
// availableForTopology), each address family apart as kube-proxy sees them:
//   - when every endpoint has a node hint and some endpoint is hinted for the client's node, the
//     endpoints hinted for that node;
//   - else, when every endpoint has a zone hint and some endpoint is hinted for the client's zone,
//     the endpoints hinted for that zone;
//   - else every endpoint (as for a client that is no known pod).
// Which of that holds is decided when the set is built; a query only looks its client up.

// Client is who asks, as topology sees it: the node of the client pod and that node's topology
// zone (topology.kubernetes.io/zone; not a DNS zone). The zero Client, a client that is no known
// pod, gets every endpoint.
type Client struct {
	Node, TopologyZone string
}

// serviceTopology is what a headless service's hints say, per address family (0 IPv4, 1 IPv6).
type serviceTopology struct {
	distribution object.Distribution
	families     [2]hintedFamily
}

// hintedFamily is what kube-proxy decides from before it filters: whether every endpoint of the
// family has a node hint (a zone hint), and the nodes (zones) some endpoint is hinted for.
type hintedFamily struct {
	allNodeHinted, allZoneHinted bool
	nodes, zones                 map[string]bool
}

// buildTopology reads the hints of a headless service's endpoints; nil when no endpoint has any,
// and then every client gets every endpoint.
func buildTopology(d object.Distribution, sls []*object.EndpointSlice) *serviceTopology {
	t := &serviceTopology{distribution: d}
	for f := range t.families {
		t.families[f] = hintedFamily{allNodeHinted: true, allZoneHinted: true}
	}
	hinted := false
	for _, sl := range sls {
		for i := range sl.Len() {
			e := sl.Endpoint(i)
			fam := &t.families[family(e)]
			forZones, forNodes := t.hints(e)
			if forNodes == "" {
				fam.allNodeHinted = false
			}
			if forZones == "" {
				fam.allZoneHinted = false
			}
			object.EachHint(forNodes, func(n string) { fam.nodes = addTo(fam.nodes, n); hinted = true })
			object.EachHint(forZones, func(z string) { fam.zones = addTo(fam.zones, z); hinted = true })
		}
	}
	if !hinted {
		return nil
	}
	return t
}

func addTo(set map[string]bool, name string) map[string]bool {
	if set == nil {
		set = map[string]bool{}
	}
	set[name] = true
	return set
}

// family is 0 for an IPv4 endpoint, 1 for IPv6.
func family(e object.Endpoint) int {
	if e.Addr.Is4() {
		return 0
	}
	return 1
}

// hints are an endpoint's zone and node hints, as the service's distribution makes them.
func (t *serviceTopology) hints(e object.Endpoint) (forZones, forNodes string) {
	if e.Topology == (unique.Handle[object.Topology]{}) {
		return "", ""
	}
	return t.distribution.Hints(e.Topology.Value())
}

// topologyMode is what kube-proxy calls a topology mode: every endpoint, those hinted for the
// client's zone, or those hinted for its node.
type topologyMode uint8

const (
	everyEndpoint topologyMode = iota
	sameZone
	sameNode
)

// closest keeps the endpoints that kube-proxy on the client's node would send it to. A value, so
// that a query allocates nothing for it.
type closest struct {
	t      *serviceTopology
	client Client
	mode   [2]topologyMode // everyEndpoint in both: no filter
}

// closestFor decides, per family, which endpoints the client gets.
func (r *ServiceSet) closestFor(c Client) closest {
	t := r.topology()
	if t == nil || c == (Client{}) {
		return closest{}
	}
	k := closest{t: t, client: c}
	for f, fam := range t.families {
		switch {
		case fam.allNodeHinted && c.Node != "" && fam.nodes[c.Node]:
			k.mode[f] = sameNode
		case fam.allZoneHinted && c.TopologyZone != "" && fam.zones[c.TopologyZone]:
			k.mode[f] = sameZone
		}
	}
	return k
}

// filters reports whether the client gets fewer than every endpoint.
func (k *closest) filters() bool { return k.mode != [2]topologyMode{} }

// keeps reports whether the client is sent to e.
func (k *closest) keeps(e object.Endpoint) bool {
	switch k.mode[family(e)] {
	case sameNode:
		_, forNodes := k.t.hints(e)
		return object.HintedFor(forNodes, k.client.Node)
	case sameZone:
		forZones, _ := k.t.hints(e)
		return object.HintedFor(forZones, k.client.TopologyZone)
	}
	return true
}
