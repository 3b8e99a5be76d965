package kubetree_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The main cluster: every kind of service, in the zones the in-tree plugin is usually given.
const mainStanza = `kubetree cluster.local 10.0.0.0/8 ip6.arpa {
	ttl 10
	pods insecure
}`

func mainObjects() []runtime.Object {
	pg := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432), k8stest.SlicePort("stats", api.ProtocolUDP, 9000))
	return []runtime.Object{
		k8stest.Namespace("prod"), k8stest.Namespace("staging"), k8stest.Namespace("empty"),

		// ClusterIP, single-stack: named tcp and udp ports and an unnamed one, and an endpoint.
		k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10"}, k8stest.TCP("http", 80), k8stest.UDP("dns", 53), k8stest.TCP("", 8080)),
		k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
			k8stest.Endpoint{Addrs: []string{"10.244.1.5"}}),

		// ClusterIP, dual-stack, with an unnamed udp port.
		k8stest.ClusterIPService("prod", "dual", []string{"10.96.0.11", "fd00::11"}, k8stest.TCP("https", 443), k8stest.UDP("", 5353)),

		// Headless over three slices: hostnames, dashed names, a duplicate address, a not-ready
		// endpoint and one whose readiness is unknown.
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432), k8stest.UDP("stats", 9000)),
		k8stest.Slice("prod", "db", "db-v4a", discovery.AddressTypeIPv4, pg,
			k8stest.Endpoint{Addrs: []string{"10.244.0.1"}, Hostname: "db-0", Pod: "db-0"},
			k8stest.Endpoint{Addrs: []string{"10.244.0.2"}, Pod: "db-xk2p"},
			k8stest.Endpoint{Addrs: []string{"10.244.0.3"}, NotReady: true},
			k8stest.Endpoint{Addrs: []string{"10.244.0.4"}, Unknown: true}),
		k8stest.Slice("prod", "db", "db-v6", discovery.AddressTypeIPv6, pg,
			k8stest.Endpoint{Addrs: []string{"fd00::1"}},
			k8stest.Endpoint{Addrs: []string{"fd00::2"}, Hostname: "db-0", Pod: "db-0"}),
		k8stest.Slice("prod", "db", "db-v4b", discovery.AddressTypeIPv4, pg,
			k8stest.Endpoint{Addrs: []string{"10.244.0.2"}, Pod: "db-xk2p"},
			k8stest.Endpoint{Addrs: []string{"10.244.0.5"}, Hostname: "db-1", Pod: "db-1"}),

		// Headless without a ready endpoint: it has no name.
		k8stest.HeadlessService("prod", "lonely", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "lonely", "lonely-1", discovery.AddressTypeIPv4, pg, k8stest.Endpoint{Addrs: []string{"10.244.0.9"}, NotReady: true}),

		k8stest.ExternalNameService("prod", "ext", "example.com"),
		k8stest.ExternalNameService("prod", "alias", "web.prod.svc.cluster.local"),

		// A service may be called "any": only then does that label resolve.
		k8stest.ClusterIPService("staging", "any", []string{"10.96.0.99"}),
	}
}

func TestServeDNS(t *testing.T) {
	c := plugintest.StartCluster(t, mainStanza, mainObjects()...)
	c.Answerer.Upstream = plugintest.StubUpstream{Answer: "192.0.2.1"}

	const (
		web   = "web.prod.svc.cluster.local."
		db    = "db.prod.svc.cluster.local."
		ip6db = "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."
	)
	nxdomain := func(rule, qname string, qtype uint16) plugintest.Case {
		return plugintest.Case{Rule: rule, Case: test.Case{Qname: qname, Qtype: qtype, Rcode: dns.RcodeNameError,
			Ns: []dns.RR{plugintest.SOA(qname[len(qname)-len("cluster.local."):])}}}
	}
	nodata := func(rule, qname string, qtype uint16) plugintest.Case {
		return plugintest.Case{Rule: rule, Case: test.Case{Qname: qname, Qtype: qtype, Rcode: dns.RcodeSuccess,
			Ns: []dns.RR{plugintest.SOA(qname[len(qname)-len("cluster.local."):])}}}
	}
	// The records of the headless service db: its ready endpoints once each, by name.
	dbExtra := []dns.RR{
		test.A("db-0.db.prod.svc.cluster.local. 10 IN A 10.244.0.1"),
		test.AAAA("db-0.db.prod.svc.cluster.local. 10 IN AAAA fd00::2"),
		test.A("10-244-0-2.db.prod.svc.cluster.local. 10 IN A 10.244.0.2"),
		test.A("10-244-0-4.db.prod.svc.cluster.local. 10 IN A 10.244.0.4"),
		test.A("db-1.db.prod.svc.cluster.local. 10 IN A 10.244.0.5"),
		test.AAAA("fd00--1.db.prod.svc.cluster.local. 10 IN AAAA fd00::1"),
	}
	dbTargets := []string{"db-0", "10-244-0-2", "10-244-0-4", "db-1", "fd00--1"}
	dbSRV := func(owner string, weight int, ports ...int) []dns.RR {
		var rrs []dns.RR
		for _, target := range dbTargets {
			for _, p := range ports {
				rrs = append(rrs, test.SRV(fmt.Sprintf("%s 10 IN SRV 0 %d %d %s.%s", owner, weight, p, target, db)))
			}
		}
		return rrs
	}

	plugintest.RunCases(t, c.Plugin, []plugintest.Case{
		// ClusterIP services.
		{Rule: "clusterIP A", Case: test.Case{Qname: web, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A(web + " 10 IN A 10.96.0.10")}}},
		{Rule: "clusterIP single-stack AAAA is NODATA", Case: test.Case{Qname: web, Qtype: dns.TypeAAAA,
			Ns: []dns.RR{plugintest.SOA("cluster.local.")}}},
		{Rule: "clusterIP dual-stack A", Case: test.Case{Qname: "dual.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("dual.prod.svc.cluster.local. 10 IN A 10.96.0.11")}}},
		{Rule: "clusterIP dual-stack AAAA", Case: test.Case{Qname: "dual.prod.svc.cluster.local.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("dual.prod.svc.cluster.local. 10 IN AAAA fd00::11")}}},
		{Rule: "per-endpoint name of a clusterIP service", Case: test.Case{Qname: "10-244-1-5." + web, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("10-244-1-5." + web + " 10 IN A 10.244.1.5")}}},

		// SRV.
		{Rule: "SRV clusterIP named tcp port targets the service", Case: test.Case{Qname: "_http._tcp." + web, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_http._tcp." + web + " 10 IN SRV 0 100 80 " + web)},
			Extra:  []dns.RR{test.A(web + " 10 IN A 10.96.0.10")}}},
		{Rule: "SRV clusterIP named udp port", Case: test.Case{Qname: "_dns._udp." + web, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_dns._udp." + web + " 10 IN SRV 0 100 53 " + web)},
			Extra:  []dns.RR{test.A(web + " 10 IN A 10.96.0.10")}}},
		{Rule: "SRV dual-stack target has A and AAAA in Extra", Case: test.Case{Qname: "_https._tcp.dual.prod.svc.cluster.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_https._tcp.dual.prod.svc.cluster.local. 10 IN SRV 0 100 443 dual.prod.svc.cluster.local.")},
			Extra: []dns.RR{test.A("dual.prod.svc.cluster.local. 10 IN A 10.96.0.11"),
				test.AAAA("dual.prod.svc.cluster.local. 10 IN AAAA fd00::11")}}},
		{Rule: "SRV on the bare clusterIP name returns every named port and no unnamed one", Case: test.Case{Qname: web, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV(web + " 10 IN SRV 0 50 80 " + web), test.SRV(web + " 10 IN SRV 0 50 53 " + web)},
			Extra:  []dns.RR{test.A(web + " 10 IN A 10.96.0.10")}}},
		{Rule: "SRV bare dual-stack name skips the unnamed udp port", Case: test.Case{Qname: "dual.prod.svc.cluster.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("dual.prod.svc.cluster.local. 10 IN SRV 0 100 443 dual.prod.svc.cluster.local.")},
			Extra: []dns.RR{test.A("dual.prod.svc.cluster.local. 10 IN A 10.96.0.11"),
				test.AAAA("dual.prod.svc.cluster.local. 10 IN AAAA fd00::11")}}},
		{Rule: "SRV port under the wrong protocol is NXDOMAIN", Case: nxdomain("", "_http._udp."+web, dns.TypeSRV).Case},
		{Rule: "SRV headless: one per endpoint with the endpoint's addresses in Extra", Case: test.Case{Qname: "_pg._tcp." + db, Qtype: dns.TypeSRV,
			Answer: dbSRV("_pg._tcp."+db, 20, 5432), Extra: dbExtra}},
		{Rule: "SRV headless udp port", Case: test.Case{Qname: "_stats._udp." + db, Qtype: dns.TypeSRV,
			Answer: dbSRV("_stats._udp."+db, 20, 9000), Extra: dbExtra}},
		{Rule: "SRV on the bare headless name: every endpoint times every named port", Case: test.Case{Qname: db, Qtype: dns.TypeSRV,
			Answer: dbSRV(db, 10, 5432, 9000), Extra: dbExtra}},

		// Headless services: ready endpoints of every slice, once each.
		{Rule: "headless A: ready and unknown-readiness endpoints of both IPv4 slices, de-duplicated", Case: test.Case{Qname: db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A(db + " 10 IN A 10.244.0.1"), test.A(db + " 10 IN A 10.244.0.2"),
				test.A(db + " 10 IN A 10.244.0.4"), test.A(db + " 10 IN A 10.244.0.5")}}},
		{Rule: "headless AAAA from the IPv6 slice", Case: test.Case{Qname: db, Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA(db + " 10 IN AAAA fd00::1"), test.AAAA(db + " 10 IN AAAA fd00::2")}}},
		{Rule: "headless endpoint by hostname A", Case: test.Case{Qname: "db-0." + db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("db-0." + db + " 10 IN A 10.244.0.1")}}},
		{Rule: "headless endpoint by hostname AAAA, hostname shared across slices", Case: test.Case{Qname: "db-0." + db, Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("db-0." + db + " 10 IN AAAA fd00::2")}}},
		{Rule: "headless endpoint without hostname by dashed IPv4, once though in two slices", Case: test.Case{Qname: "10-244-0-2." + db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("10-244-0-2." + db + " 10 IN A 10.244.0.2")}}},
		{Rule: "headless endpoint without hostname by dashed IPv6", Case: test.Case{Qname: "fd00--1." + db, Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("fd00--1." + db + " 10 IN AAAA fd00::1")}}},
		{Rule: "headless endpoint with unknown readiness counts as ready", Case: test.Case{Qname: "10-244-0-4." + db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("10-244-0-4." + db + " 10 IN A 10.244.0.4")}}},
		nxdomain("headless not-ready endpoint is NXDOMAIN", "10-244-0-3."+db, dns.TypeA),
		nxdomain("headless endpoint with a hostname has no dashed name", "10-244-0-1."+db, dns.TypeA),
		nxdomain("endpoint names ignore pod names without endpoint_pod_names", "db-xk2p."+db, dns.TypeA),
		nxdomain("headless without ready endpoints is NXDOMAIN", "lonely.prod.svc.cluster.local.", dns.TypeA),
		nxdomain("headless without ready endpoints has no SRV names", "_pg._tcp.lonely.prod.svc.cluster.local.", dns.TypeSRV),

		// ExternalName.
		{Rule: "externalName outside the zone: CNAME and the upstream answer", Case: test.Case{Qname: "ext.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.CNAME("ext.prod.svc.cluster.local. 10 IN CNAME example.com."), test.A("example.com. 30 IN A 192.0.2.1")}}},
		{Rule: "externalName CNAME query: the CNAME only", Case: test.Case{Qname: "ext.prod.svc.cluster.local.", Qtype: dns.TypeCNAME,
			Answer: []dns.RR{test.CNAME("ext.prod.svc.cluster.local. 10 IN CNAME example.com.")}}},
		{Rule: "externalName in the query's case", Case: test.Case{Qname: "EXT.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.CNAME("EXT.prod.svc.cluster.local. 10 IN CNAME example.com."), test.A("example.com. 30 IN A 192.0.2.1")}}},
		{Rule: "externalName inside the zone: CNAME and the target's records from the tree", Case: test.Case{Qname: "alias.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.CNAME("alias.prod.svc.cluster.local. 10 IN CNAME " + web), test.A(web + " 10 IN A 10.96.0.10")}}},
		{Rule: "externalName inside the zone, SRV: the target's SRV records under the target's name", Case: test.Case{Qname: "alias.prod.svc.cluster.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.CNAME("alias.prod.svc.cluster.local. 10 IN CNAME " + web),
				test.SRV(web + " 10 IN SRV 0 50 80 " + web), test.SRV(web + " 10 IN SRV 0 50 53 " + web)},
			Extra: []dns.RR{test.A(web + " 10 IN A 10.96.0.10")}}},

		// PTR, in a zone given as a CIDR (10.0.0.0/8 is 10.in-addr.arpa.) and in ip6.arpa.
		{Rule: "PTR clusterIP", Case: test.Case{Qname: "10.0.96.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("10.0.96.10.in-addr.arpa. 10 IN PTR " + web)}}},
		{Rule: "PTR clusterIP IPv6 full nibbles", Case: test.Case{Qname: "1.1.0.0." + ip6db[len("0.0.0.0."):], Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("1.1.0.0." + ip6db[len("0.0.0.0."):] + " 10 IN PTR dual.prod.svc.cluster.local.")}}},
		{Rule: "PTR endpoint with hostname", Case: test.Case{Qname: "1.0.244.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("1.0.244.10.in-addr.arpa. 10 IN PTR db-0." + db)}}},
		{Rule: "PTR endpoint without hostname, once though in two slices", Case: test.Case{Qname: "2.0.244.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("2.0.244.10.in-addr.arpa. 10 IN PTR 10-244-0-2." + db)}}},
		{Rule: "PTR IPv6 endpoint without hostname", Case: test.Case{Qname: "1." + ip6db[2:], Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("1." + ip6db[2:] + " 10 IN PTR fd00--1." + db)}}},
		{Rule: "PTR IPv6 endpoint with hostname", Case: test.Case{Qname: "2." + ip6db[2:], Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("2." + ip6db[2:] + " 10 IN PTR db-0." + db)}}},
		{Rule: "PTR endpoint of a clusterIP service", Case: test.Case{Qname: "5.1.244.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("5.1.244.10.in-addr.arpa. 10 IN PTR 10-244-1-5." + web)}}},
		{Rule: "PTR in the query's case", Case: test.Case{Qname: "10.0.96.10.IN-ADDR.ARPA.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("10.0.96.10.IN-ADDR.ARPA. 10 IN PTR " + web)}}},
		{Rule: "PTR of a not-ready endpoint is NXDOMAIN", Case: test.Case{Qname: "3.0.244.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("10.in-addr.arpa.")}}},
		{Rule: "PTR of an unknown address is NXDOMAIN", Case: test.Case{Qname: "99.99.99.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("10.in-addr.arpa.")}}},
		{Rule: "PTR of an unknown IPv6 address is NXDOMAIN", Case: test.Case{Qname: "9." + ip6db[2:], Qtype: dns.TypePTR,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("ip6.arpa.")}}},
		{Rule: "reverse interior name is NODATA", Case: test.Case{Qname: "96.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Ns: []dns.RR{plugintest.SOA("10.in-addr.arpa.")}}},
		{Rule: "reverse zone apex SOA", Case: test.Case{Qname: "10.in-addr.arpa.", Qtype: dns.TypeSOA,
			Answer: []dns.RR{plugintest.SOA("10.in-addr.arpa.")}}},
		{Rule: "reverse zone apex NS names the first forward zone's server", Case: test.Case{Qname: "10.in-addr.arpa.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("10.in-addr.arpa. 10 IN NS ns.dns.cluster.local.")}}},
		{Rule: "reverse names outside the configured reverse zones go to next", Case: test.Case{Qname: "1.0.168.192.in-addr.arpa.", Qtype: dns.TypePTR}, Next: true},

		// Pods, insecure.
		{Rule: "pods insecure A", Case: test.Case{Qname: "10-244-0-9.prod.pod.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("10-244-0-9.prod.pod.cluster.local. 10 IN A 10.244.0.9")}}},
		{Rule: "pods insecure IPv6 dashed AAAA", Case: test.Case{Qname: "fd00--9.prod.pod.cluster.local.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("fd00--9.prod.pod.cluster.local. 10 IN AAAA fd00::9")}}},
		{Rule: "pods insecure in the query's case", Case: test.Case{Qname: "10-244-0-9.Prod.POD.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("10-244-0-9.Prod.POD.cluster.local. 10 IN A 10.244.0.9")}}},
		nodata("pods insecure IPv4 name has no AAAA", "10-244-0-9.prod.pod.cluster.local.", dns.TypeAAAA),
		nxdomain("pods insecure unknown namespace is NXDOMAIN", "10-244-0-9.nope.pod.cluster.local.", dns.TypeA),
		nxdomain("pods insecure name that is no address is NXDOMAIN", "web.prod.pod.cluster.local.", dns.TypeA),
		nxdomain("pods insecure name below a pod name is NXDOMAIN", "x.10-244-0-9.prod.pod.cluster.local.", dns.TypeA),
		nodata("pods insecure namespace under pod is NODATA", "prod.pod.cluster.local.", dns.TypeA),

		// The apex.
		{Rule: "dns-version TXT", Case: test.Case{Qname: "dns-version.cluster.local.", Qtype: dns.TypeTXT,
			Answer: []dns.RR{test.TXT(`dns-version.cluster.local. 28800 IN TXT "1.1.0"`)}}},
		{Rule: "SOA at the apex", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeSOA,
			Answer: []dns.RR{plugintest.SOA("cluster.local.")}}},
		{Rule: "NS at the apex", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("cluster.local. 10 IN NS ns.dns.cluster.local.")}}},
		{Rule: "SOA at the apex in the query's case", Case: test.Case{Qname: "Cluster.LOCAL.", Qtype: dns.TypeSOA,
			Answer: []dns.RR{plugintest.SOA("Cluster.LOCAL.")}}},

		// NODATA: the name exists without the type; interior names exist.
		nodata("NODATA apex A", "cluster.local.", dns.TypeA),
		nodata("NODATA svc", "svc.cluster.local.", dns.TypeA),
		nodata("NODATA pod", "pod.cluster.local.", dns.TypeA),
		nodata("NODATA namespace with services", "prod.svc.cluster.local.", dns.TypeA),
		nodata("NODATA namespace without services", "empty.svc.cluster.local.", dns.TypeA),
		nodata("NODATA _tcp under a clusterIP service", "_tcp."+web, dns.TypeSRV),
		nodata("NODATA _udp under a headless service", "_udp."+db, dns.TypeSRV),
		nodata("NODATA existing name, missing type", web, dns.TypeTXT),
		// Not in the specification; the in-tree plugin answers it, so a drop-in does too.
		{Rule: "SRV at an endpoint name: its named ports, targeting the endpoint", Case: test.Case{Qname: "db-0." + db, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("db-0." + db + " 10 IN SRV 0 50 5432 db-0." + db), test.SRV("db-0." + db + " 10 IN SRV 0 50 9000 db-0." + db)},
			Extra:  []dns.RR{test.A("db-0." + db + " 10 IN A 10.244.0.1"), test.AAAA("db-0." + db + " 10 IN AAAA fd00::2")}}},
		nodata("NODATA dns under the apex", "dns.cluster.local.", dns.TypeA),
		nodata("NODATA interior name in the query's case", "PROD.svc.Cluster.Local.", dns.TypeA),

		// NXDOMAIN: the name does not exist.
		nxdomain("NXDOMAIN namespace that does not exist", "nope.svc.cluster.local.", dns.TypeA),
		nxdomain("NXDOMAIN service that does not exist", "nope.prod.svc.cluster.local.", dns.TypeA),
		nxdomain("NXDOMAIN service in a namespace that does not exist", "web.nope.svc.cluster.local.", dns.TypeA),
		nxdomain("NXDOMAIN below a service", "nope."+web, dns.TypeA),
		nxdomain("NXDOMAIN below the apex", "nope.cluster.local.", dns.TypeA),
		nxdomain("NXDOMAIN in the query's case, SOA in the query's case", "Nope.Prod.SVC.Cluster.Local.", dns.TypeA),

		// Case: names match in any case, and the answer is in the query's case.
		{Rule: "case-insensitive A, owner as asked", Case: test.Case{Qname: "WEB.Prod.SVC.cluster.LOCAL.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("WEB.Prod.SVC.cluster.LOCAL. 10 IN A 10.96.0.10")}}},
		{Rule: "case-insensitive SRV, owner as asked, targets as stored in a zone asked in lower case", Case: test.Case{Qname: "_HTTP._Tcp." + web, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_HTTP._Tcp." + web + " 10 IN SRV 0 100 80 " + web)},
			Extra:  []dns.RR{test.A(web + " 10 IN A 10.96.0.10")}}},
		// As the in-tree plugin: the zone of the names it makes as asked, the labels above it as stored.
		{Rule: "SRV of a ClusterIP service: target and glue in the zone as asked", Case: test.Case{Qname: "_HtTp._TcP.wEb.PrOd.SvC.cLuStEr.LoCaL.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_HtTp._TcP.wEb.PrOd.SvC.cLuStEr.LoCaL. 10 IN SRV 0 100 80 web.prod.svc.cLuStEr.LoCaL.")},
			Extra:  []dns.RR{test.A("web.prod.svc.cLuStEr.LoCaL. 10 IN A 10.96.0.10")}}},
		{Rule: "SRV of a headless service: endpoint targets and glue in the zone as asked", Case: test.Case{Qname: "_PG._TCP.DB.prod.svc.Cluster.Local.", Qtype: dns.TypeSRV,
			Answer: func() []dns.RR {
				var rrs []dns.RR
				for _, target := range dbTargets {
					rrs = append(rrs, test.SRV("_PG._TCP.DB.prod.svc.Cluster.Local. 10 IN SRV 0 20 5432 "+target+".db.prod.svc.Cluster.Local."))
				}
				return rrs
			}(),
			Extra: func() []dns.RR {
				var rrs []dns.RR
				for _, rr := range dbExtra {
					c := dns.Copy(rr)
					c.Header().Name = strings.TrimSuffix(c.Header().Name, "cluster.local.") + "Cluster.Local."
					rrs = append(rrs, c)
				}
				return rrs
			}()}},
		{Rule: "SRV at an endpoint name: target and glue in the zone as asked", Case: test.Case{Qname: "DB-0.db.prod.svc.CLUSTER.LOCAL.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("DB-0.db.prod.svc.CLUSTER.LOCAL. 10 IN SRV 0 50 5432 db-0.db.prod.svc.CLUSTER.LOCAL."),
				test.SRV("DB-0.db.prod.svc.CLUSTER.LOCAL. 10 IN SRV 0 50 9000 db-0.db.prod.svc.CLUSTER.LOCAL.")},
			Extra: []dns.RR{test.A("db-0.db.prod.svc.CLUSTER.LOCAL. 10 IN A 10.244.0.1"), test.AAAA("db-0.db.prod.svc.CLUSTER.LOCAL. 10 IN AAAA fd00::2")}}},
		{Rule: "NS at the apex: the nameserver in the zone as asked", Case: test.Case{Qname: "Cluster.Local.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("Cluster.Local. 10 IN NS ns.dns.Cluster.Local.")}}},
		{Rule: "NXDOMAIN in a reverse zone: the mailbox in the zone as asked, the nameserver as built", Case: test.Case{Qname: "99.99.99.10.IN-ADDR.ARPA.", Qtype: dns.TypePTR,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("10.IN-ADDR.ARPA.")}}},

		// Wildcards enumerate nothing.
		nxdomain("wildcard * service", "*.prod.svc.cluster.local.", dns.TypeA),
		nxdomain("wildcard any service", "any.prod.svc.cluster.local.", dns.TypeA),
		nxdomain("wildcard * namespace", "web.*.svc.cluster.local.", dns.TypeA),
		nxdomain("wildcard any namespace", "web.any.svc.cluster.local.", dns.TypeA),
		nxdomain("wildcard * endpoint", "*."+db, dns.TypeA),
		nxdomain("wildcard * SRV port", "_*._tcp."+web, dns.TypeSRV),
		{Rule: "a service literally named any resolves", Case: test.Case{Qname: "any.staging.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("any.staging.svc.cluster.local. 10 IN A 10.96.0.99")}}},

		// ANY reveals nothing.
		nodata("ANY clusterIP", web, dns.TypeANY),
		nodata("ANY headless", db, dns.TypeANY),
		nodata("ANY apex", "cluster.local.", dns.TypeANY),
		nodata("ANY externalName", "ext.prod.svc.cluster.local.", dns.TypeANY),
		nxdomain("ANY name that does not exist", "nope.prod.svc.cluster.local.", dns.TypeANY),

		// No zone transfers.
		{Rule: "AXFR refused", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeAXFR, Rcode: dns.RcodeRefused}},
		{Rule: "IXFR refused", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeIXFR, Rcode: dns.RcodeRefused}},

		// Outside our zones: always the next plugin.
		{Rule: "outside our zones goes to next", Case: test.Case{Qname: "example.org.", Qtype: dns.TypeA}, Next: true},
		{Rule: "the parent of our zone goes to next", Case: test.Case{Qname: "local.", Qtype: dns.TypeSOA}, Next: true},
		{Rule: "a name ending like our zone but not in it goes to next", Case: test.Case{Qname: "xcluster.local.", Qtype: dns.TypeA}, Next: true},
	})
}

// TestServeDNSOptions runs the options that change which names exist: pods disabled,
// endpoint_pod_names, ignore empty_service, fallthrough for the reverse zone only, and a second
// forward zone.
func TestServeDNSOptions(t *testing.T) {
	c := plugintest.StartCluster(t, `kubetree cluster.local example.org in-addr.arpa {
	ttl 10
	endpoint_pod_names
	ignore empty_service
	fallthrough in-addr.arpa
}`,
		k8stest.Namespace("prod"),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
			k8stest.Endpoint{Addrs: []string{"10.244.0.1"}, Hostname: "db-0", Pod: "db-0-pod"},
			k8stest.Endpoint{Addrs: []string{"10.244.0.2"}, Pod: "db-xk2p"},
			k8stest.Endpoint{Addrs: []string{"10.244.0.3"}}),
		k8stest.ClusterIPService("prod", "busy", []string{"10.96.0.20"}, k8stest.TCP("http", 80)),
		k8stest.Slice("prod", "busy", "busy-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.244.1.1"}}),
		k8stest.ClusterIPService("prod", "idle", []string{"10.96.0.21"}, k8stest.TCP("http", 80)),
		k8stest.ClusterIPService("prod", "drained", []string{"10.96.0.22"}, k8stest.TCP("http", 80)),
		k8stest.Slice("prod", "drained", "drained-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.244.1.2"}, NotReady: true}),
	)
	const db = "db.prod.svc.cluster.local."
	nx := func(rule, qname, zone string, qtype uint16) plugintest.Case {
		return plugintest.Case{Rule: rule, Case: test.Case{Qname: qname, Qtype: qtype, Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA(zone)}}}
	}

	plugintest.RunCases(t, c.Plugin, []plugintest.Case{
		nx("pods disabled: pod name is NXDOMAIN", "10-244-0-9.prod.pod.cluster.local.", "cluster.local.", dns.TypeA),
		nx("pods disabled: namespace under pod is NXDOMAIN", "prod.pod.cluster.local.", "cluster.local.", dns.TypeA),

		{Rule: "endpoint_pod_names: hostname-less endpoint named by its pod", Case: test.Case{Qname: "db-xk2p." + db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("db-xk2p." + db + " 10 IN A 10.244.0.2")}}},
		{Rule: "endpoint_pod_names: a hostname still wins over the pod name", Case: test.Case{Qname: "db-0." + db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("db-0." + db + " 10 IN A 10.244.0.1")}}},
		nx("endpoint_pod_names: the pod name of an endpoint with a hostname is NXDOMAIN", "db-0-pod."+db, "cluster.local.", dns.TypeA),
		nx("endpoint_pod_names: no dashed name for an endpoint named by its pod", "10-244-0-2."+db, "cluster.local.", dns.TypeA),
		{Rule: "endpoint_pod_names: an endpoint without pod keeps the dashed name", Case: test.Case{Qname: "10-244-0-3." + db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("10-244-0-3." + db + " 10 IN A 10.244.0.3")}}},
		{Rule: "endpoint_pod_names: SRV targets the pod name", Case: test.Case{Qname: "_pg._tcp." + db, Qtype: dns.TypeSRV,
			Answer: []dns.RR{
				test.SRV("_pg._tcp." + db + " 10 IN SRV 0 33 5432 db-0." + db),
				test.SRV("_pg._tcp." + db + " 10 IN SRV 0 33 5432 db-xk2p." + db),
				test.SRV("_pg._tcp." + db + " 10 IN SRV 0 33 5432 10-244-0-3." + db)},
			Extra: []dns.RR{
				test.A("db-0." + db + " 10 IN A 10.244.0.1"),
				test.A("db-xk2p." + db + " 10 IN A 10.244.0.2"),
				test.A("10-244-0-3." + db + " 10 IN A 10.244.0.3")}}},

		{Rule: "ignore empty_service: a service with a ready endpoint resolves", Case: test.Case{Qname: "busy.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("busy.prod.svc.cluster.local. 10 IN A 10.96.0.20")}}},
		nx("ignore empty_service: a service without endpoints is NXDOMAIN", "idle.prod.svc.cluster.local.", "cluster.local.", dns.TypeA),
		nx("ignore empty_service: a service without ready endpoints is NXDOMAIN", "drained.prod.svc.cluster.local.", "cluster.local.", dns.TypeA),
		nx("ignore empty_service: nor its SRV names", "_http._tcp.idle.prod.svc.cluster.local.", "cluster.local.", dns.TypeSRV),

		{Rule: "fallthrough in-addr.arpa: unknown PTR goes to next", Case: test.Case{Qname: "9.9.9.10.in-addr.arpa.", Qtype: dns.TypePTR}, Next: true},
		{Rule: "second forward zone: services live under it too", Case: test.Case{Qname: "busy.prod.svc.example.org.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("busy.prod.svc.example.org. 10 IN A 10.96.0.20")}}},
		{Rule: "second forward zone: SRV targets the name in that zone", Case: test.Case{Qname: "_http._tcp.busy.prod.svc.example.org.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_http._tcp.busy.prod.svc.example.org. 10 IN SRV 0 100 80 busy.prod.svc.example.org.")},
			Extra:  []dns.RR{test.A("busy.prod.svc.example.org. 10 IN A 10.96.0.20")}}},
		{Rule: "second forward zone: its own SOA and NS", Case: test.Case{Qname: "example.org.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("example.org. 10 IN NS ns.dns.example.org.")}}},
		nx("second forward zone: NXDOMAIN with its own SOA", "nope.prod.svc.example.org.", "example.org.", dns.TypeA),
		{Rule: "fallthrough in-addr.arpa: known PTR is answered, pointing into the first zone", Case: test.Case{Qname: "20.0.96.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("20.0.96.10.in-addr.arpa. 10 IN PTR busy.prod.svc.cluster.local.")}}},
		{Rule: "fallthrough in-addr.arpa: NODATA does not fall through", Case: test.Case{Qname: "0.96.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Ns: []dns.RR{plugintest.SOA("in-addr.arpa.")}}},
		nx("fallthrough in-addr.arpa: unknown cluster.local name is NXDOMAIN", "nope.prod.svc.cluster.local.", "cluster.local.", dns.TypeA),
		{Rule: "outside our zones goes to next", Case: test.Case{Qname: "example.net.", Qtype: dns.TypeA}, Next: true},
	})
}

// TestServeDNSNoEndpoints: without endpoints only the service names of cluster IPs exist.
func TestServeDNSNoEndpoints(t *testing.T) {
	objs := mainObjects()
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n\tttl 10\n\tnoendpoints\n}", objs...)
	const web = "web.prod.svc.cluster.local."
	plugintest.RunCases(t, c.Plugin, []plugintest.Case{
		{Rule: "noendpoints: clusterIP A", Case: test.Case{Qname: web, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A(web + " 10 IN A 10.96.0.10")}}},
		{Rule: "noendpoints: clusterIP SRV", Case: test.Case{Qname: "_http._tcp." + web, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_http._tcp." + web + " 10 IN SRV 0 100 80 " + web)},
			Extra:  []dns.RR{test.A(web + " 10 IN A 10.96.0.10")}}},
		{Rule: "noendpoints: headless is NXDOMAIN", Case: test.Case{Qname: "db.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("cluster.local.")}}},
		{Rule: "noendpoints: headless endpoint name is NXDOMAIN", Case: test.Case{Qname: "db-0.db.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("cluster.local.")}}},
		{Rule: "noendpoints: clusterIP endpoint name is NXDOMAIN", Case: test.Case{Qname: "10-244-1-5." + web, Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("cluster.local.")}}},
	})
}

// TestServeDNSNotSynced: before the first sync a missing name may only be missing from our view,
// so it is SERVFAIL (not cached as NXDOMAIN by clients), unless fallthrough covers it: then the
// next plugin answers, as in the in-tree plugin (the kubeadm Corefile's PTR queries of addresses
// outside the cluster). What is known is still answered.
func TestServeDNSNotSynced(t *testing.T) {
	k, _ := plugintest.Wired(t, "kubetree cluster.local in-addr.arpa {\n\tttl 10\n\tfallthrough in-addr.arpa\n}")
	plugintest.RunCases(t, k, []plugintest.Case{
		{Rule: "not synced: unknown name is SERVFAIL, not NXDOMAIN", Case: test.Case{Qname: "web.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeServerFailure, Ns: []dns.RR{plugintest.SOA("cluster.local.")}}},
		{Rule: "not synced: an unknown name in a fallthrough zone goes to next", Case: test.Case{Qname: "4.3.2.1.in-addr.arpa.", Qtype: dns.TypePTR}, Next: true},
		{Rule: "not synced: interior name is still NODATA", Case: test.Case{Qname: "svc.cluster.local.", Qtype: dns.TypeA,
			Ns: []dns.RR{plugintest.SOA("cluster.local.")}}},
		{Rule: "not synced: dns-version is answered", Case: test.Case{Qname: "dns-version.cluster.local.", Qtype: dns.TypeTXT,
			Answer: []dns.RR{test.TXT(`dns-version.cluster.local. 28800 IN TXT "1.1.0"`)}}},
		{Rule: "not synced: outside our zones goes to next", Case: test.Case{Qname: "example.org.", Qtype: dns.TypeA}, Next: true},
	})

	k.SyncedFlag.Store(true)
	plugintest.RunCases(t, k, []plugintest.Case{
		{Rule: "synced: unknown name is NXDOMAIN", Case: test.Case{Qname: "web.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("cluster.local.")}}},
		{Rule: "synced: an unknown name in a fallthrough zone goes to next", Case: test.Case{Qname: "4.3.2.1.in-addr.arpa.", Qtype: dns.TypePTR}, Next: true},
	})
}

// TestServeDNSTTL: every record carries the configured ttl, and the SOA's minimum is that ttl.
func TestServeDNSTTL(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local 10.in-addr.arpa {\n\tttl 42\n}", mainObjects()...)
	web := "web.prod.svc.cluster.local."
	zoneSOA := test.SOA("cluster.local. 42 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 42")
	plugintest.RunCases(t, c.Plugin, []plugintest.Case{
		{Rule: "ttl on A", Case: test.Case{Qname: web, Qtype: dns.TypeA, Answer: []dns.RR{test.A(web + " 42 IN A 10.96.0.10")}}},
		{Rule: "ttl on SRV and Extra", Case: test.Case{Qname: "_http._tcp." + web, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_http._tcp." + web + " 42 IN SRV 0 100 80 " + web)},
			Extra:  []dns.RR{test.A(web + " 42 IN A 10.96.0.10")}}},
		{Rule: "ttl on PTR", Case: test.Case{Qname: "10.0.96.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("10.0.96.10.in-addr.arpa. 42 IN PTR " + web)}}},
		{Rule: "ttl on CNAME", Case: test.Case{Qname: "alias.prod.svc.cluster.local.", Qtype: dns.TypeCNAME,
			Answer: []dns.RR{test.CNAME("alias.prod.svc.cluster.local. 42 IN CNAME " + web)}}},
		{Rule: "dns-version keeps its 8 hours whatever the ttl", Case: test.Case{Qname: "dns-version.cluster.local.", Qtype: dns.TypeTXT,
			Answer: []dns.RR{test.TXT(`dns-version.cluster.local. 28800 IN TXT "1.1.0"`)}}},
		{Rule: "ttl on NS", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("cluster.local. 42 IN NS ns.dns.cluster.local.")}}},
		{Rule: "ttl on SOA, and minttl", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeSOA, Answer: []dns.RR{zoneSOA}}},
		{Rule: "ttl on the SOA of NXDOMAIN", Case: test.Case{Qname: "nope.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{zoneSOA}}},
	})
}

// TestServeDNSRepliesAreCopies: later plugins rename, reorder and rewrite what they are given;
// none of it may reach the tree.
func TestServeDNSRepliesAreCopies(t *testing.T) {
	c := plugintest.StartCluster(t, mainStanza, mainObjects()...)
	// records is a reply's sections as text; the message id differs between replies.
	records := func(m *dns.Msg) string { return fmt.Sprint(m.Answer, m.Ns, m.Extra) }
	query := func(qname string, qtype uint16) *dns.Msg {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		r := new(dns.Msg)
		r.SetQuestion(qname, qtype)
		if _, err := c.ServeDNS(context.Background(), rec, r); err != nil || rec.Msg == nil {
			t.Fatalf("%s: no reply: %v", qname, err)
		}
		return rec.Msg
	}
	for _, q := range []struct {
		qname string
		qtype uint16
	}{
		{"web.prod.svc.cluster.local.", dns.TypeA},
		{"dual.prod.svc.cluster.local.", dns.TypeAAAA},
		{"db.prod.svc.cluster.local.", dns.TypeSRV},
		{"alias.prod.svc.cluster.local.", dns.TypeA},
		{"10.0.96.10.in-addr.arpa.", dns.TypePTR},
		{"dns-version.cluster.local.", dns.TypeTXT},
		{"cluster.local.", dns.TypeNS},
		{"nope.cluster.local.", dns.TypeA},
	} {
		before := records(query(q.qname, q.qtype))
		m := query(q.qname, q.qtype)
		for _, section := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
			for _, rr := range section {
				rr.Header().Name = "rewritten.example."
				rr.Header().Ttl = 1
				switch v := rr.(type) {
				case *dns.SRV:
					v.Target, v.Weight = "rewritten.example.", 0
				case *dns.PTR:
					v.Ptr = "rewritten.example."
				case *dns.CNAME:
					v.Target = "rewritten.example."
				case *dns.TXT:
					v.Txt[0] = "rewritten"
				case *dns.NS:
					v.Ns = "rewritten.example."
				case *dns.SOA:
					v.Ns, v.Minttl = "rewritten.example.", 1
				}
			}
			for i, j := 0, len(section)-1; i < j; i, j = i+1, j-1 {
				section[i], section[j] = section[j], section[i]
			}
		}
		if after := records(query(q.qname, q.qtype)); after != before {
			t.Errorf("%s: changing a reply changed the next one:\n%s\nthen\n%s", q.qname, before, after)
		}
	}
}

// TestExternalNameLoopsAndMappedPods: an ExternalName service that points at itself, or two that
// point at each other, answer each CNAME once; a pod name spelling an IPv4-mapped IPv6 address is
// not an address.
func TestExternalNameLoopsAndMappedPods(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n pods insecure\n}", k8stest.Namespace("prod"),
		k8stest.ExternalNameService("prod", "self", "self.prod.svc.cluster.local"),
		k8stest.ExternalNameService("prod", "ping", "pong.prod.svc.cluster.local"),
		k8stest.ExternalNameService("prod", "pong", "ping.prod.svc.cluster.local"))
	for _, tc := range []test.Case{
		{Qname: "self.prod.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess,
			Answer: []dns.RR{test.CNAME("self.prod.svc.cluster.local. 5 IN CNAME self.prod.svc.cluster.local.")}},
		{Qname: "ping.prod.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess,
			Answer: []dns.RR{test.CNAME("ping.prod.svc.cluster.local. 5 IN CNAME pong.prod.svc.cluster.local."),
				test.CNAME("pong.prod.svc.cluster.local. 5 IN CNAME ping.prod.svc.cluster.local.")}},
	} {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := c.ServeDNS(context.Background(), rec, tc.Msg()); err != nil {
			t.Fatal(err)
		}
		if err := test.SortAndCheck(rec.Msg, tc); err != nil {
			t.Errorf("%s: %v", tc.Qname, err)
		}
	}
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	m := new(dns.Msg)
	m.SetQuestion("--ffff-a00-1.prod.pod.cluster.local.", dns.TypeAAAA)
	c.ServeDNS(context.Background(), rec, m)
	if rec.Msg == nil || rec.Msg.Rcode != dns.RcodeNameError {
		t.Errorf("an IPv4-mapped pod name: want NXDOMAIN, got %v", rec.Msg)
	}
}

// TestExternalNameUpstreamTruncated: an ExternalName service whose target is resolved through the
// rest of the chain carries the upstream's TC bit to the client, as the in-tree plugin does: a
// client that took the cut answer as whole would never ask again over TCP.
func TestExternalNameUpstreamTruncated(t *testing.T) {
	c := plugintest.StartCluster(t, mainStanza, mainObjects()...)
	const ext = "ext.prod.svc.cluster.local."
	answer := []dns.RR{test.CNAME(ext + " 10 IN CNAME example.com."), test.A("example.com. 30 IN A 192.0.2.1")}
	for _, tc := range []struct {
		rule     string
		upstream plugintest.StubUpstream
		qname    string
		qtype    uint16
		want     test.Case
	}{
		{"the upstream's reply cut short: TC", plugintest.StubUpstream{Answer: "192.0.2.1", Truncated: true}, ext, dns.TypeA,
			test.Case{Truncated: true, Answer: answer}},
		{"the upstream's reply whole: no TC", plugintest.StubUpstream{Answer: "192.0.2.1"}, ext, dns.TypeA,
			test.Case{Answer: answer}},
		{"the CNAME alone is not looked up upstream: no TC", plugintest.StubUpstream{Answer: "192.0.2.1", Truncated: true}, ext, dns.TypeCNAME,
			test.Case{Answer: answer[:1]}},
		{"a target inside the zone is not looked up upstream: no TC", plugintest.StubUpstream{Answer: "192.0.2.1", Truncated: true},
			"alias.prod.svc.cluster.local.", dns.TypeA, test.Case{Answer: []dns.RR{
				test.CNAME("alias.prod.svc.cluster.local. 10 IN CNAME web.prod.svc.cluster.local."),
				test.A("web.prod.svc.cluster.local. 10 IN A 10.96.0.10")}}},
	} {
		c.Answerer.Upstream = tc.upstream
		tc.want.Qname, tc.want.Qtype = tc.qname, tc.qtype
		plugintest.RunCases(t, c.Plugin, []plugintest.Case{{Rule: tc.rule, Case: tc.want}})
	}
}
