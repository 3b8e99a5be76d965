package records

import (
	"net/netip"
	"slices"
	"testing"
	"unique"

	"github.com/kubetree/kubetree/internal/object"
)

// TestClosest follows kube-proxy's topologyModeFromHints and availableForTopology (pkg/proxy
// topology_test.go's cases, for one node): node hints when every endpoint has one and one names the
// client's node, else zone hints likewise, else every endpoint.
func TestClosest(t *testing.T) {
	ep := func(addr string, t object.Topology) object.Endpoint {
		e := object.Endpoint{Addr: netip.MustParseAddr(addr)}
		if t != (object.Topology{}) {
			e.Topology = unique.Make(t)
		}
		return e
	}
	client := Client{Node: "node-1", TopologyZone: "zone-a"}
	for _, tc := range []struct {
		rule         string
		distribution object.Distribution
		eps          []object.Endpoint
		want         []string
	}{
		{"node hints, one for the client's node", object.HintsAsWritten, []object.Endpoint{
			ep("10.0.0.1", object.Topology{ForNodes: "node-1", ForZones: "zone-a"}),
			ep("10.0.0.2", object.Topology{ForNodes: "node-2", ForZones: "zone-a"}),
			ep("10.0.0.3", object.Topology{ForNodes: "node-3", ForZones: "zone-b"})}, []string{"10.0.0.1"}},
		{"node hints, none for the client's node: zone hints", object.HintsAsWritten, []object.Endpoint{
			ep("10.0.0.2", object.Topology{ForNodes: "node-2", ForZones: "zone-a"}),
			ep("10.0.0.3", object.Topology{ForNodes: "node-3", ForZones: "zone-b"})}, []string{"10.0.0.2"}},
		{"an endpoint without a node hint: zone hints", object.HintsAsWritten, []object.Endpoint{
			ep("10.0.0.1", object.Topology{ForNodes: "node-1", ForZones: "zone-a"}),
			ep("10.0.0.2", object.Topology{ForZones: "zone-a"}),
			ep("10.0.0.3", object.Topology{ForZones: "zone-b"})}, []string{"10.0.0.1", "10.0.0.2"}},
		{"an endpoint hinted for several zones", object.HintsAsWritten, []object.Endpoint{
			ep("10.0.0.1", object.Topology{ForZones: "zone-b/zone-a"}),
			ep("10.0.0.3", object.Topology{ForZones: "zone-b"})}, []string{"10.0.0.1"}},
		{"no hint for the client's zone: every endpoint", object.HintsAsWritten, []object.Endpoint{
			ep("10.0.0.2", object.Topology{ForZones: "zone-c"}),
			ep("10.0.0.3", object.Topology{ForZones: "zone-b"})}, []string{"10.0.0.2", "10.0.0.3"}},
		{"an endpoint without a zone hint: every endpoint", object.HintsAsWritten, []object.Endpoint{
			ep("10.0.0.1", object.Topology{ForZones: "zone-a"}),
			ep("10.0.0.3", object.Topology{Zone: "zone-b"})}, []string{"10.0.0.1", "10.0.0.3"}},
		{"PreferSameNode: the endpoints' own nodes", object.HintsSameNode, []object.Endpoint{
			ep("10.0.0.1", object.Topology{Node: "node-1", Zone: "zone-a"}),
			ep("10.0.0.2", object.Topology{Node: "node-1", Zone: "zone-a"}),
			ep("10.0.0.3", object.Topology{Node: "node-3", Zone: "zone-b", ForNodes: "node-1"})}, []string{"10.0.0.1", "10.0.0.2"}},
		{"PreferSameZone: the endpoints' own zones, not their hints", object.HintsSameZone, []object.Endpoint{
			ep("10.0.0.1", object.Topology{Node: "node-1", Zone: "zone-a", ForZones: "zone-b"}),
			ep("10.0.0.3", object.Topology{Node: "node-3", Zone: "zone-b", ForZones: "zone-a"})}, []string{"10.0.0.1"}},
	} {
		slice := object.NewEndpointSlice(nil, tc.eps)
		set := &ServiceSet{kind: object.Headless, slices: []*object.EndpointSlice{slice},
			rare: &rareParts{topology: buildTopology(tc.distribution, []*object.EndpointSlice{slice})}}
		near := set.closestFor(client)
		var got []string
		for i := range slice.Len() {
			if e := slice.Endpoint(i); !near.filters() || near.keeps(e) {
				got = append(got, e.Addr.String())
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.rule, got, tc.want)
		}
		if all := set.closestFor(Client{}); all.filters() {
			t.Errorf("%s: a client that is no pod is filtered", tc.rule)
		}
	}
}
