package e2e

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestTopology runs topology against the real API server, behind `cache 30` in the same server
// block (which bypasses kubetree's zones): a headless service with endpoints in two
// zones, Nodes in each, and client pods on them, each asking over UDP and TCP from its own address
// (and one through a trusted node-local cache's client-subnet option). Each client gets the
// endpoints kube-proxy on its node would send it to; a client that is no pod gets every one. Then,
// under running clients: hints that change, a zone that loses its last endpoint, a node relabelled;
// and a service with trafficDistribution PreferSameNode.
func TestTopology(t *testing.T) {
	ns := newNamespace(t, "topology")
	const zoneA, zoneB = "e2e-topology-a", "e2e-topology-b"
	nodeA1, nodeA2, nodeB1 := createNode(t, "topology-a1", zoneA), createNode(t, "topology-a2", zoneA), createNode(t, "topology-b1", zoneB)
	const onA1, onA2, onB1, noPod, cache = "127.0.90.1", "127.0.90.2", "127.0.90.3", "127.0.90.9", "127.0.90.100"
	runningPodOn(t, ns, "client-a1", nodeA1, nil, onA1)
	runningPodOn(t, ns, "client-a2", nodeA2, nil, onA2)
	runningPodOn(t, ns, "client-b1", nodeB1, nil, onB1)

	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	// db's endpoints, hinted for their zones as the EndpointSlice controller hints them for
	// PreferSameZone, unless hints says otherwise.
	db := func(hints [3]string, notReady [3]bool) *discovery.EndpointSlice {
		eps := []k8stest.Endpoint{
			{Addrs: []string{"10.1.90.1"}, Zone: zoneA, Node: nodeA1},
			{Addrs: []string{"10.1.90.2"}, Zone: zoneA, Node: nodeA2},
			{Addrs: []string{"10.1.90.3"}, Zone: zoneB, Node: nodeB1},
		}
		for i := range eps {
			eps[i].ForZones, eps[i].NotReady = []string{hints[i]}, notReady[i]
		}
		return k8stest.Slice(ns, "db", "db-v4", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)), eps...)
	}
	applySlice(t, db([3]string{zoneA, zoneA, zoneB}, [3]bool{}))
	near := k8stest.HeadlessService(ns, "near", k8stest.TCP("http", 80))
	near.Spec.TrafficDistribution = new(api.ServiceTrafficDistributionPreferSameNode)
	createService(t, near)
	applySlice(t, k8stest.Slice(ns, "near", "near-v4", discovery.AddressTypeIPv4, nil,
		k8stest.Endpoint{Addrs: []string{"10.1.91.1"}, Zone: zoneA, Node: nodeA1},
		k8stest.Endpoint{Addrs: []string{"10.1.91.2"}, Zone: zoneB, Node: nodeB1},
		k8stest.Endpoint{Addrs: []string{"10.1.91.3"}, Zone: zoneB, Node: nodeB1}))

	c := startCoreDNSWith(t, []string{"cache 30"}, "pods verified", "topology", "client_subnet_from "+cache+"/32")
	eventually(t, "ready", 30*time.Second, c.isReady)
	for _, ip := range []string{onA1, onA2, onB1} {
		c.waitAnswer(t, strings.ReplaceAll(ip, ".", "-")+"."+ns+".pod.cluster.local.", dns.TypeA, ip)
	}
	dbName, nearName := svcName(ns, "db"), svcName(ns, "near")
	all := []string{"10.1.90.1", "10.1.90.2", "10.1.90.3"}

	for _, tc := range []struct {
		rule, source string
		want         []string
	}{
		{"a client in zone a gets zone a's endpoints", onA1, []string{"10.1.90.1", "10.1.90.2"}},
		{"another node of zone a alike", onA2, []string{"10.1.90.1", "10.1.90.2"}},
		{"a client in zone b gets zone b's", onB1, []string{"10.1.90.3"}},
		{"a client that is no pod gets every endpoint", noPod, all},
	} {
		for _, network := range []string{"udp", "tcp"} {
			if got := addressesFrom(t, c, network, tc.source, "", dbName); !slices.Equal(got, tc.want) {
				t.Errorf("%s (%s from %s): %q, want %q", tc.rule, network, tc.source, got, tc.want)
			}
		}
	}
	if got := addressesFrom(t, c, "udp", cache, onB1, dbName); !slices.Equal(got, []string{"10.1.90.3"}) {
		t.Errorf("zone b's client behind the trusted cache: %q, want zone b's endpoint", got)
	}
	if got := srvTargets(t, c, onB1, "_pg._tcp."+dbName); !slices.Equal(got, []string{"10-1-90-3." + dbName}) {
		t.Errorf("SRV from zone b: %q, want zone b's endpoint", got)
	}

	// Hints change under running clients: 10.1.90.2 is hinted for zone b instead.
	applySlice(t, db([3]string{zoneA, zoneB, zoneB}, [3]bool{}))
	waitAddressesFrom(t, c, "hints moved: zone b", onB1, dbName, "10.1.90.2", "10.1.90.3")
	waitAddressesFrom(t, c, "hints moved: zone a", onA1, dbName, "10.1.90.1")

	// Zone b loses its last endpoint: its clients get every endpoint, zone a's keep their own.
	applySlice(t, db([3]string{zoneA, zoneA, zoneB}, [3]bool{false, false, true}))
	waitAddressesFrom(t, c, "zone b without endpoints", onB1, dbName, "10.1.90.1", "10.1.90.2")
	waitAddressesFrom(t, c, "zone a keeps its own", onA1, dbName, "10.1.90.1", "10.1.90.2")
	applySlice(t, db([3]string{zoneA, zoneA, zoneB}, [3]bool{}))
	waitAddressesFrom(t, c, "zone b's endpoint back", onB1, dbName, "10.1.90.3")

	// A node moves to the other zone: its clients follow.
	relabelNode(t, nodeB1, zoneA)
	waitAddressesFrom(t, c, "node b1 now in zone a", onB1, dbName, "10.1.90.1", "10.1.90.2")
	relabelNode(t, nodeB1, zoneB)

	// trafficDistribution PreferSameNode: the node's endpoints, else the zone's.
	waitAddressesFrom(t, c, "PreferSameNode: node a1's endpoint", onA1, nearName, "10.1.91.1")
	waitAddressesFrom(t, c, "PreferSameNode: node b1's endpoints", onB1, nearName, "10.1.91.2", "10.1.91.3")
	waitAddressesFrom(t, c, "PreferSameNode: none on node a2, zone a's", onA2, nearName, "10.1.91.1")
	waitAddressesFrom(t, c, "PreferSameNode: no pod, every endpoint", noPod, nearName, "10.1.91.1", "10.1.91.2", "10.1.91.3")
}

// createNode creates a Node in zone (its topology.kubernetes.io/zone label) and deletes it after
// the test; it returns the node's name.
func createNode(t testing.TB, name, zone string) string {
	t.Helper()
	if _, err := env.client.CoreV1().Nodes().Create(bg, k8stest.Node(name, zone), meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.client.CoreV1().Nodes().Delete(bg, name, meta.DeleteOptions{}) })
	return name
}

func relabelNode(t testing.TB, name, zone string) {
	t.Helper()
	n, err := env.client.CoreV1().Nodes().Get(bg, name, meta.GetOptions{})
	if err == nil {
		n.Labels[api.LabelTopologyZone] = zone
		_, err = env.client.CoreV1().Nodes().Update(bg, n, meta.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// exchangeFrom asks c one question over network from source (a loopback address); with subnet, in
// an EDNS0 client-subnet option naming that address, as a node-local cache forwards.
func exchangeFrom(t testing.TB, c *coreDNS, network, source, subnet, name string, qtype uint16) *dns.Msg {
	t.Helper()
	var local net.Addr = &net.UDPAddr{IP: net.ParseIP(source)}
	if network == "tcp" {
		local = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	client := &dns.Client{Net: network, Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: local}}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if subnet != "" {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 32, Address: net.ParseIP(subnet).To4()})
	}
	r, _, err := client.Exchange(m, c.addr)
	if err != nil {
		t.Fatalf("%s %s over %s from %s: %v", name, dns.TypeToString[qtype], network, source, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		t.Fatalf("%s %s over %s from %s: %s", name, dns.TypeToString[qtype], network, source, dns.RcodeToString[r.Rcode])
	}
	return r
}

// addressesFrom is the A records name answers source (for subnet, when given), sorted.
func addressesFrom(t testing.TB, c *coreDNS, network, source, subnet, name string) []string {
	t.Helper()
	return answers(exchangeFrom(t, c, network, source, subnet, name, dns.TypeA))
}

// srvTargets is the targets of the SRV records name answers source, sorted.
func srvTargets(t testing.TB, c *coreDNS, source, name string) []string {
	t.Helper()
	var out []string
	for _, rr := range exchangeFrom(t, c, "udp", source, "", name, dns.TypeSRV).Answer {
		out = append(out, rr.(*dns.SRV).Target)
	}
	slices.Sort(out)
	return out
}

// waitAddressesFrom polls until name answers source exactly want, over UDP and TCP.
func waitAddressesFrom(t testing.TB, c *coreDNS, rule, source, name string, want ...string) {
	t.Helper()
	slices.Sort(want)
	var last []string
	eventually(t, fmt.Sprintf("%s: %s from %s = %v", rule, name, source, want), 30*time.Second, func() bool {
		for _, network := range []string{"udp", "tcp"} {
			if last = addressesFrom(t, c, network, source, "", name); !slices.Equal(last, want) {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprint(last) })
}
