package e2e

import (
	"testing"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// dbEndpoints are the six endpoints of slice db-1; only the first one's zone changes between
// versions. The others: Zone-B and zone-b (zones that differ only in case), zone-c (that of a
// not-ready endpoint alone), a zone with dots, and no zone.
func dbEndpoints(first string) []k8stest.Endpoint {
	return []k8stest.Endpoint{
		{Addrs: []string{"10.244.8.1"}, Hostname: "db-0", Zone: first},
		{Addrs: []string{"10.244.8.2"}, Zone: "Zone-B"},
		{Addrs: []string{"10.244.8.3"}, Zone: "zone-b"},
		{Addrs: []string{"10.244.8.4"}, NotReady: true, Zone: "zone-c"},
		{Addrs: []string{"10.244.8.5"}, Zone: "corp.example.com"},
		{Addrs: []string{"10.244.8.6"}},
	}
}

// TestZonalSameAsKubernetes: with `zonal`, kubetree answers the zone-scoped names of headless
// services (<zone>.pin|prefer._zone.<svc>...) as the in-tree plugin does: narrowed to a zone,
// NODATA for an empty zone under pin, every endpoint under prefer, SRV narrowed the same way, and
// NXDOMAIN for what is not a headless service's zone-scoped name.
func TestZonalSameAsKubernetes(t *testing.T) {
	ns := newNamespace(t, "zonal")
	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("http", 80)))
	http := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, http, dbEndpoints("zone-a")...))
	applySlice(t, k8stest.Slice(ns, "db", "db-v6", discovery.AddressTypeIPv6, http,
		k8stest.Endpoint{Addrs: []string{"fd00::8:1"}, Zone: "zone-a"}))
	createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	applySlice(t, k8stest.Slice(ns, "web", "web-1", discovery.AddressTypeIPv4, http,
		k8stest.Endpoint{Addrs: []string{"10.244.8.9"}, Zone: "zone-a"}))

	p := startPair(t, nil, "zonal")
	db := svcName(ns, "db")
	p.waitAnswer(t, db, dns.TypeA, "10.244.8.1", "10.244.8.2", "10.244.8.3", "10.244.8.5", "10.244.8.6")
	p.waitAnswer(t, "zone-a.pin._zone."+db, dns.TypeA, "10.244.8.1")

	questions := []struct {
		name  string
		qtype uint16
	}{
		{"zone-a.pin._zone." + db, dns.TypeA},
		{"zone-a.pin._zone." + db, dns.TypeAAAA},
		{"zone-b.pin._zone." + db, dns.TypeA},
		{"ZONE-B.pin._zone." + db, dns.TypeA},
		{"zone-b.pin._zone." + db, dns.TypeSRV},
		{"zone-c.pin._zone." + db, dns.TypeA}, // only a not-ready endpoint: NODATA
		{"zone-c.pin._zone." + db, dns.TypeSRV},
		{"nowhere.pin._zone." + db, dns.TypeA},
		{"corp.example.com.pin._zone." + db, dns.TypeA},
		{"zone-a.prefer._zone." + db, dns.TypeA},
		{"zone-c.prefer._zone." + db, dns.TypeA},
		{"zone-c.prefer._zone." + db, dns.TypeAAAA},
		{"zone-b.prefer._zone." + db, dns.TypeAAAA}, // the zone has endpoints: no fallback
		{"zone-c.prefer._zone." + db, dns.TypeSRV},
		{"zone-a.pin._zone." + db, dns.TypeTXT},
		{"zone-c.prefer._zone." + db, dns.TypeTXT},
		{"zone-a.florp._zone." + db, dns.TypeA},
		{"zone-a.pin._zone." + svcName(ns, "web"), dns.TypeA},
		{"zone-a.pin._zone." + svcName(ns, "ghost"), dns.TypeA},
		{db, dns.TypeA},
		{db, dns.TypeSRV},
	}
	for _, q := range questions {
		for _, network := range []string{"udp", "tcp"} {
			p.same(t, network, q.name, q.qtype)
		}
	}

	// A zone-only change moves an endpoint between zonal answers in both.
	applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, http, dbEndpoints("zone-b")...))
	p.waitAnswer(t, "zone-b.pin._zone."+db, dns.TypeA, "10.244.8.1", "10.244.8.2", "10.244.8.3")
	p.same(t, "udp", "zone-a.pin._zone."+db, dns.TypeA)
	p.same(t, "udp", "zone-b.pin._zone."+db, dns.TypeSRV)
}
