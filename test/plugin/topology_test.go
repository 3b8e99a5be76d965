package plugin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A cluster of two zones: node-a1 and node-a2 in zone-a, node-b1 in zone-b, node-x without a zone
// label. A client pod on each (10.244.<n>.1), in namespace client.
const (
	onA1, onA2, onB1, onX = "10.244.1.1", "10.244.2.1", "10.244.3.1", "10.244.4.1"
	noPod                 = "10.9.9.9"
	db                    = "db.prod.svc.cluster.local."
)

func topologyObjects() []runtime.Object {
	objs := []runtime.Object{k8stest.Namespace("prod"), k8stest.Namespace("client"),
		k8stest.Node("node-a1", "zone-a"), k8stest.Node("node-a2", "zone-a"), k8stest.Node("node-b1", "zone-b"), k8stest.Node("node-x", "")}
	for node, ip := range map[string]string{"node-a1": onA1, "node-a2": onA2, "node-b1": onB1, "node-x": onX} {
		objs = append(objs, k8stest.OnNode(k8stest.Pod("client", "on-"+node, ip), node))
	}
	return objs
}

// dbSlice is the headless service db's IPv4 slice: 10.0.0.1 on node-a1 and 10.0.0.2 on node-a2
// in zone-a, 10.0.0.3 on node-b1 in zone-b, each with the zone hint the EndpointSlice controller
// writes for PreferSameZone, unless hinted says otherwise.
func dbSlice(hinted func(i int) []string, eps ...k8stest.Endpoint) *discovery.EndpointSlice {
	if eps == nil {
		eps = []k8stest.Endpoint{
			{Addrs: []string{"10.0.0.1"}, Zone: "zone-a", Node: "node-a1"},
			{Addrs: []string{"10.0.0.2"}, Zone: "zone-a", Node: "node-a2"},
			{Addrs: []string{"10.0.0.3"}, Zone: "zone-b", Node: "node-b1"},
		}
	}
	for i := range eps {
		eps[i].ForZones = []string{eps[i].Zone}
		if hinted != nil {
			eps[i].ForZones = hinted(i)
		}
	}
	return k8stest.Slice("prod", "db", "db-v4", discovery.AddressTypeIPv4,
		k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)), eps...)
}

// askFrom sends one query from source through ServeDNS, and returns the rcode and the answer and
// additional sections as sorted strings.
func askFrom(t testing.TB, k *plugintest.Plugin, source, name string, qtype uint16) (int, []string, []string) {
	t.Helper()
	w := &plugintest.CaptureWriter{ResponseWriter: test.ResponseWriter{RemoteIP: source}}
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	if _, err := k.ServeDNS(context.Background(), w, r); err != nil || w.Msg == nil {
		t.Fatalf("%s %s from %s: %v, reply %v", name, dns.TypeToString[qtype], source, err, w.Msg)
	}
	return w.Msg.Rcode, plugintest.ZoneText(w.Msg.Answer), plugintest.ZoneText(w.Msg.Extra)
}

// addressesFrom is what source is answered for name's A (or AAAA) records: the addresses, sorted.
func addressesFrom(t testing.TB, k *plugintest.Plugin, source, name string, qtype uint16) []string {
	t.Helper()
	rcode, answer, _ := askFrom(t, k, source, name, qtype)
	if rcode != dns.RcodeSuccess {
		t.Fatalf("%s from %s: %s", name, source, dns.RcodeToString[rcode])
	}
	var out []string
	for _, rr := range plugintest.ParseRRs(t, answer...) {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		}
	}
	slices.Sort(out)
	return out
}

func expectAddressesFrom(t testing.TB, k *plugintest.Plugin, rule, source, name string, qtype uint16, want ...string) {
	t.Helper()
	if got := addressesFrom(t, k, source, name, qtype); !slices.Equal(got, want) {
		t.Errorf("%s: %s from %s: %q, want %q", rule, name, source, got, want)
	}
}

// TestTopologyZoneHints follows kube-proxy's rules for zone hints: a client pod gets the endpoints
// hinted for its node's zone; every endpoint when its node has no zone, when it is no known pod,
// when no endpoint is hinted for its zone, or when some endpoint has no hint at all.
func TestTopologyZoneHints(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n\ttopology\n}", append(topologyObjects(),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("http", 80)), dbSlice(nil),
		k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10"}, k8stest.TCP("http", 80)),
		k8stest.Slice("prod", "web", "web-v4", discovery.AddressTypeIPv4, nil,
			k8stest.Endpoint{Addrs: []string{"10.0.1.1"}, Zone: "zone-a", ForZones: []string{"zone-a"}}))...)
	k := c.Plugin
	all := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	expectAddressesFrom(t, k, "a client in zone-a gets zone-a's endpoints", onA1, db, dns.TypeA, "10.0.0.1", "10.0.0.2")
	expectAddressesFrom(t, k, "every node of the zone alike", onA2, db, dns.TypeA, "10.0.0.1", "10.0.0.2")
	expectAddressesFrom(t, k, "a client in zone-b gets zone-b's", onB1, db, dns.TypeA, "10.0.0.3")
	expectAddressesFrom(t, k, "a node without a zone label: every endpoint", onX, db, dns.TypeA, all...)
	expectAddressesFrom(t, k, "a client that is no pod: every endpoint", noPod, db, dns.TypeA, all...)
	expectAddressesFrom(t, k, "a ClusterIP service is unchanged", onB1, "web.prod.svc.cluster.local.", dns.TypeA, "10.96.0.10")
	expectAddressesFrom(t, k, "an endpoint name in another zone still answers", onB1, "10-0-0-1."+db, dns.TypeA, "10.0.0.1")

	_, srv, extra := askFrom(t, k, onB1, "_http._tcp."+db, dns.TypeSRV)
	if want := plugintest.ZoneText(plugintest.ParseRRs(t, plugintest.RecSRV("_http._tcp."+db, 100, 80, "10-0-0-3."+db))); !slices.Equal(srv, want) {
		t.Errorf("SRV from zone-b: %q, want %q", srv, want)
	}
	if want := plugintest.ZoneText(plugintest.ParseRRs(t, plugintest.RecA("10-0-0-3."+db, "10.0.0.3"))); !slices.Equal(extra, want) {
		t.Errorf("SRV from zone-b, additional: %q, want %q", extra, want)
	}
	if _, srv, _ := askFrom(t, k, onA1, db, dns.TypeSRV); len(srv) != 2 {
		t.Errorf("SRV at the service from zone-a: %q, want zone-a's two endpoints", srv)
	}

	// Hints change under running clients: 10.0.0.3 is hinted for zone-a too (as the topology
	// cache does to share load), then one endpoint loses its hint and kube-proxy ignores them all.
	c.Update(t, dbSlice(func(i int) []string { return [][]string{{"zone-a"}, {"zone-a"}, {"zone-b", "zone-a"}}[i] }))
	c.Barrier(t)
	expectAddressesFrom(t, k, "a second zone hint", onA1, db, dns.TypeA, all...)
	expectAddressesFrom(t, k, "a second zone hint, the other zone", onB1, db, dns.TypeA, "10.0.0.3")
	c.Update(t, dbSlice(func(i int) []string { return [][]string{{"zone-a"}, nil, {"zone-b"}}[i] }))
	c.Barrier(t)
	expectAddressesFrom(t, k, "an endpoint without a hint: hints are ignored", onA1, db, dns.TypeA, all...)

	// A zone loses its last endpoint: its clients get every endpoint, the other zone's keep theirs.
	c.Update(t, dbSlice(nil, k8stest.Endpoint{Addrs: []string{"10.0.0.1"}, Zone: "zone-a"}, k8stest.Endpoint{Addrs: []string{"10.0.0.2"}, Zone: "zone-a"},
		k8stest.Endpoint{Addrs: []string{"10.0.0.3"}, Zone: "zone-b", NotReady: true}))
	c.Barrier(t)
	expectAddressesFrom(t, k, "zone-b without endpoints", onB1, db, dns.TypeA, "10.0.0.1", "10.0.0.2")
	expectAddressesFrom(t, k, "zone-a keeps its own", onA1, db, dns.TypeA, "10.0.0.1", "10.0.0.2")

	// A node moves to another zone: its clients follow at once (no service is rebuilt).
	c.Update(t, dbSlice(nil))
	c.Barrier(t)
	c.Update(t, k8stest.Node("node-b1", "zone-a"))
	plugintest.WaitFor(t, "node-b1 in zone-a", func() bool { return k.Nodes.Zone("node-b1") == "zone-a" })
	expectAddressesFrom(t, k, "a relabelled node", onB1, db, dns.TypeA, "10.0.0.1", "10.0.0.2")
	c.Remove(t, k8stest.Node("node-b1", ""))
	plugintest.WaitFor(t, "node-b1 gone", func() bool { return k.Nodes.Len() == 3 })
	expectAddressesFrom(t, k, "a deleted node has no zone", onB1, db, dns.TypeA, all...)
}

// TestTopologyTrafficDistribution: a service's trafficDistribution hints its endpoints as the
// EndpointSlice controller would, without hints in its slices: PreferSameNode sends a client to
// its node's endpoints, else to its zone's; PreferClose to its zone's; topology-mode Auto reads the
// hints as written (here none: every endpoint). Each address family is decided apart.
func TestTopologyTrafficDistribution(t *testing.T) {
	svc := func(name, distribution string, annotations map[string]string) []runtime.Object {
		s := k8stest.HeadlessService("prod", name, k8stest.TCP("http", 80))
		s.Spec.TrafficDistribution = &distribution
		s.Annotations = annotations
		eps := []k8stest.Endpoint{
			{Addrs: []string{"10.0.0.1"}, Zone: "zone-a", Node: "node-a1"},
			{Addrs: []string{"10.0.0.3"}, Zone: "zone-b", Node: "node-b1"},
			{Addrs: []string{"10.0.0.4"}, Zone: "zone-b", Node: "node-b1"},
		}
		v6 := k8stest.Slice("prod", name, name+"-v6", discovery.AddressTypeIPv6, nil,
			k8stest.Endpoint{Addrs: []string{"fd00::1"}}, k8stest.Endpoint{Addrs: []string{"fd00::3"}, Zone: "zone-b", Node: "node-b1"})
		return []runtime.Object{s, k8stest.Slice("prod", name, name+"-v4", discovery.AddressTypeIPv4, nil, eps...), v6}
	}
	objs := topologyObjects()
	objs = append(objs, svc("near", api.ServiceTrafficDistributionPreferSameNode, nil)...)
	objs = append(objs, svc("close", api.ServiceTrafficDistributionPreferClose, nil)...)
	objs = append(objs, svc("auto", api.ServiceTrafficDistributionPreferSameNode, map[string]string{api.AnnotationTopologyMode: "Auto"})...)
	k := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n\ttopology\n}", objs...).Plugin
	const near, close, auto = "near.prod.svc.cluster.local.", "close.prod.svc.cluster.local.", "auto.prod.svc.cluster.local."
	expectAddressesFrom(t, k, "PreferSameNode: the node's endpoints", onA1, near, dns.TypeA, "10.0.0.1")
	expectAddressesFrom(t, k, "PreferSameNode: the node's endpoints", onB1, near, dns.TypeA, "10.0.0.3", "10.0.0.4")
	expectAddressesFrom(t, k, "PreferSameNode: no endpoint on the node, the zone's", onA2, near, dns.TypeA, "10.0.0.1")
	expectAddressesFrom(t, k, "PreferSameNode: no zone, every endpoint", onX, near, dns.TypeA, "10.0.0.1", "10.0.0.3", "10.0.0.4")
	expectAddressesFrom(t, k, "IPv6 apart: an endpoint without a node or zone, so every one", onB1, near, dns.TypeAAAA, "fd00::1", "fd00::3")
	expectAddressesFrom(t, k, "PreferClose: the zone's", onB1, close, dns.TypeA, "10.0.0.3", "10.0.0.4")
	expectAddressesFrom(t, k, "topology-mode Auto: the hints as written", onB1, auto, dns.TypeA, "10.0.0.1", "10.0.0.3", "10.0.0.4")
}

// TestTopologyOff: without the option, the same cluster answers every client every endpoint, and
// nodes are not watched.
func TestTopologyOff(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n}", append(topologyObjects(),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("http", 80)), dbSlice(nil))...)
	if _, watched := c.W.Versions()["nodes"]; c.Nodes != nil || watched || slices.Contains(c.API.Opened(), "nodes") {
		t.Error("nodes are watched without topology")
	}
	expectAddressesFrom(t, c.Plugin, "no topology", onB1, db, dns.TypeA, "10.0.0.1", "10.0.0.2", "10.0.0.3")
}

// TestTopologyAuditRepairsNodes: a node relabelled while the watches lose every event is repaired
// by the audit, through the node handlers, like any other object.
func TestTopologyAuditRepairsNodes(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n\ttopology\n}", append(topologyObjects(),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("http", 80)), dbSlice(nil))...)
	ctx := context.Background()
	if n, err := c.W.Audit(ctx); n != 0 || err != nil {
		t.Fatalf("an audit of a cluster in step repaired %d (%v)", n, err)
	}
	c.API.LoseAll.Store(true)
	c.Update(t, k8stest.Node("node-b1", "zone-a"))
	plugintest.WaitFor(t, "the event to be lost", func() bool { return c.API.Lost.Load() >= 1 })
	c.API.LoseAll.Store(false)
	c.Barrier(t)
	expectAddressesFrom(t, c.Plugin, "stale: the watch missed the relabel", onB1, db, dns.TypeA, "10.0.0.3")
	if n, err := c.W.Audit(ctx); n != 1 || err != nil {
		t.Fatalf("the audit repaired %d (%v), want the node", n, err)
	}
	expectAddressesFrom(t, c.Plugin, "repaired", onB1, db, dns.TypeA, "10.0.0.1", "10.0.0.2")
}
