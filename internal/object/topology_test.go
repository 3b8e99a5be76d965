package object

import (
	"testing"
	"unique"

	"github.com/kubetree/kubetree/internal/k8stest"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// hintedSlice has an endpoint with a zone, node and hints, one with a zone only, and one with
// nothing of topology.
func hintedSlice() *discovery.EndpointSlice {
	s := k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, nil,
		k8stest.Endpoint{Addrs: []string{"10.0.0.1"}, Zone: "zone-a", Node: "node-a1", ForZones: []string{"zone-a", "zone-c"}, ForNodes: []string{"node-a1"}},
		k8stest.Endpoint{Addrs: []string{"10.0.0.2"}, Zone: "Zone-B"},
		k8stest.Endpoint{Addrs: []string{"10.0.0.3"}})
	return s
}

// TestTopologyKeptOnlyWithTheOption: without topology a slice keeps nothing of its endpoints'
// nodes and hints (a slice without hostnames keeps no names at all); with it, each endpoint's zone
// (as written: zones are compared as kube-proxy compares them), node and hints, interned.
func TestTopologyKeptOnlyWithTheOption(t *testing.T) {
	off, _ := SliceTransform(SliceOptions{})(hintedSlice())
	if m := off.(*StoredSlice).Model; m.names != nil {
		t.Errorf("without topology the slice keeps names: %+v", m.names)
	}
	on, _ := SliceTransform(SliceOptions{Topology: true})(hintedSlice())
	m := on.(*StoredSlice).Model
	want := []unique.Handle[Topology]{
		unique.Make(Topology{Zone: "zone-a", Node: "node-a1", ForZones: "zone-a/zone-c", ForNodes: "node-a1"}),
		unique.Make(Topology{Zone: "Zone-B"}),
		{},
	}
	for i, w := range want {
		if got := m.Endpoint(i).Topology; got != w {
			t.Errorf("endpoint %d: topology %v, want %v", i, got, w)
		}
	}
	again, _ := SliceTransform(SliceOptions{Topology: true})(hintedSlice())
	if again.(*StoredSlice).Model.Endpoint(0).Topology != m.Endpoint(0).Topology {
		t.Error("the same topology is not shared between two slices")
	}
}

// TestHintedFor: hints are matched whole, and an empty name is hinted nowhere (a node without a
// zone label has no zone).
func TestHintedFor(t *testing.T) {
	for _, tc := range []struct {
		hints, name string
		want        bool
	}{
		{"zone-a/zone-c", "zone-a", true}, {"zone-a/zone-c", "zone-c", true}, {"zone-a/zone-c", "zone", false},
		{"zone-a", "zone-a/zone-c", false}, {"", "", false}, {"zone-a", "", false},
	} {
		if got := HintedFor(tc.hints, tc.name); got != tc.want {
			t.Errorf("HintedFor(%q, %q) = %v, want %v", tc.hints, tc.name, got, tc.want)
		}
	}
}

// TestDistributionOf reads a Service as the EndpointSlice controller does: trafficDistribution
// PreferClose and PreferSameZone hint each endpoint for its zone, PreferSameNode for its node too,
// and the topology-mode annotation Auto (or the deprecated one) wins over either.
func TestDistributionOf(t *testing.T) {
	svc := func(distribution string, annotations map[string]string) *api.Service {
		s := k8stest.HeadlessService("prod", "db")
		if distribution != "" {
			s.Spec.TrafficDistribution = &distribution
		}
		s.Annotations = annotations
		return s
	}
	for _, tc := range []struct {
		rule string
		svc  *api.Service
		want Distribution
	}{
		{"no trafficDistribution: the hints as written", svc("", nil), HintsAsWritten},
		{"PreferClose", svc(api.ServiceTrafficDistributionPreferClose, nil), HintsSameZone},
		{"PreferSameZone", svc(api.ServiceTrafficDistributionPreferSameZone, nil), HintsSameZone},
		{"PreferSameNode", svc(api.ServiceTrafficDistributionPreferSameNode, nil), HintsSameNode},
		{"a value the controller does not know", svc("PreferFarAway", nil), HintsAsWritten},
		{"topology-mode Auto wins", svc(api.ServiceTrafficDistributionPreferSameNode, map[string]string{api.AnnotationTopologyMode: "Auto"}), HintsAsWritten},
		{"the deprecated annotation too", svc(api.ServiceTrafficDistributionPreferClose, map[string]string{api.DeprecatedAnnotationTopologyAwareHints: "auto"}), HintsAsWritten},
		{"topology-mode Disabled does not", svc(api.ServiceTrafficDistributionPreferClose, map[string]string{api.AnnotationTopologyMode: "Disabled"}), HintsSameZone},
	} {
		stored, _ := SlimServiceWithTopology(tc.svc)
		if got := stored.(*StoredService).Model.Distribution; got != tc.want {
			t.Errorf("%s: %v, want %v", tc.rule, got, tc.want)
		}
		if off, _ := SlimService(tc.svc); off.(*StoredService).Model.Distribution != HintsAsWritten {
			t.Errorf("%s: kept without topology", tc.rule)
		}
	}
	forZones, forNodes := HintsSameNode.Hints(Topology{Zone: "zone-a", Node: "node-a1", ForZones: "zone-b"})
	if forZones != "zone-a" || forNodes != "node-a1" {
		t.Errorf("PreferSameNode hints %q %q, want the endpoint's own zone and node", forZones, forNodes)
	}
}

// TestPodNodeOnlyWithTopology: with topology a pod's identity names its node, and pods of one
// label set on two nodes have two identities; without it, one shared identity and no node.
func TestPodNodeOnlyWithTopology(t *testing.T) {
	onNode := func(name, node, ip string) *api.Pod {
		p := k8stest.WithLabels(k8stest.Pod("prod", name, ip), "app", "web")
		p.Spec.NodeName = node
		return p
	}
	for _, keepNode := range []bool{false, true} {
		x := NewPodStore(keepNode)
		a, _ := x.SlimPod(onNode("web-1", "node-a1", "10.244.1.1"))
		b, _ := x.SlimPod(onNode("web-2", "node-b1", "10.244.2.1"))
		ida, idb := a.(*StoredPod).Identity, b.(*StoredPod).Identity
		switch {
		case keepNode && (ida.Node() != "node-a1" || idb.Node() != "node-b1" || ida == idb):
			t.Errorf("with topology: nodes %q %q, shared %v", ida.Node(), idb.Node(), ida == idb)
		case !keepNode && (ida.Node() != "" || ida != idb):
			t.Errorf("without topology: node %q, shared %v", ida.Node(), ida == idb)
		}
		if ida.Namespace != "prod" || len(ida.Labels) != 1 {
			t.Errorf("identity %+v", ida)
		}
	}
}

// TestNodeIndex: a node's zone label, kept by name; a node without the label has no zone, and a
// deleted node goes.
func TestNodeIndex(t *testing.T) {
	x := NewNodeIndex()
	for _, n := range []*api.Node{k8stest.Node("node-a1", "zone-a"), k8stest.Node("node-x", "")} {
		stored, _ := SlimNode(n)
		x.Replace(n.Name, stored.(*StoredNode))
	}
	if x.Zone("node-a1") != "zone-a" || x.Zone("node-x") != "" || x.Zone("unknown") != "" || x.Len() != 2 {
		t.Errorf("zones %q %q %q, %d nodes", x.Zone("node-a1"), x.Zone("node-x"), x.Zone("unknown"), x.Len())
	}
	moved, _ := SlimNode(k8stest.Node("node-a1", "zone-b"))
	if !NodeDiffers(&StoredNode{zone: "zone-a"}, moved) || NodeDiffers(moved, moved) {
		t.Error("NodeDiffers does not follow the zone")
	}
	x.Replace("node-a1", moved.(*StoredNode))
	x.Replace("node-x", nil)
	if x.Zone("node-a1") != "zone-b" || x.Len() != 1 {
		t.Errorf("after relabel and delete: %q, %d nodes", x.Zone("node-a1"), x.Len())
	}
}
