package e2e

import (
	"testing"

	"github.com/miekg/dns"
	discovery "k8s.io/api/discovery/v1"
)

// zoned puts the slice's endpoints, in order, in the given topology zones ("" leaves one without).
func zoned(s *discovery.EndpointSlice, zones ...string) *discovery.EndpointSlice {
	for i, z := range zones {
		if z != "" {
			s.Endpoints[i].Zone = &z
		}
	}
	return s
}

// TestZonalSameAsKubernetes: with `zonal`, kubetree answers the zone-scoped names of headless
// services (<zone>.pin|prefer._zone.<svc>...) as the in-tree plugin does: narrowed to a zone,
// NODATA for an empty zone under pin, every endpoint under prefer, SRV narrowed the same way, and
// NXDOMAIN for what is not a headless service's zone-scoped name.
func TestZonalSameAsKubernetes(t *testing.T) {
	ns := newNamespace(t, "zonal")
	createService(t, headless(ns, "db", tcpPort("http", 80)))
	applySlice(t, zoned(endpointSlice(ns, "db", "db-1", []discovery.EndpointPort{slicePort("http", 80)},
		endpoint{ip: "10.244.8.1", hostname: "db-0"}, endpoint{ip: "10.244.8.2"}, endpoint{ip: "10.244.8.3"},
		endpoint{ip: "10.244.8.4", notReady: true}, endpoint{ip: "10.244.8.5"}, endpoint{ip: "10.244.8.6"}),
		"zone-a", "Zone-B", "zone-b", "zone-c", "corp.example.com", ""))
	applySlice(t, zoned(endpointSlice(ns, "db", "db-v6", []discovery.EndpointPort{slicePort("http", 80)},
		endpoint{ip: "fd00::8:1"}), "zone-a"))
	createService(t, clusterIP(ns, "web", false, tcpPort("http", 80)))
	applySlice(t, zoned(endpointSlice(ns, "web", "web-1", []discovery.EndpointPort{slicePort("http", 80)},
		endpoint{ip: "10.244.8.9"}), "zone-a"))

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
	applySlice(t, zoned(endpointSlice(ns, "db", "db-1", []discovery.EndpointPort{slicePort("http", 80)},
		endpoint{ip: "10.244.8.1", hostname: "db-0"}, endpoint{ip: "10.244.8.2"}, endpoint{ip: "10.244.8.3"},
		endpoint{ip: "10.244.8.4", notReady: true}, endpoint{ip: "10.244.8.5"}, endpoint{ip: "10.244.8.6"}),
		"zone-b", "Zone-B", "zone-b", "zone-c", "corp.example.com", ""))
	p.waitAnswer(t, "zone-b.pin._zone."+db, dns.TypeA, "10.244.8.1", "10.244.8.2", "10.244.8.3")
	p.same(t, "udp", "zone-a.pin._zone."+db, dns.TypeA)
	p.same(t, "udp", "zone-b.pin._zone."+db, dns.TypeSRV)
}
