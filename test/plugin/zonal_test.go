package plugin_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// zonalCluster publishes, through the one write path, a headless service hdls with endpoints in
// two zones (one of them a zone value with dots), a ClusterIP service clstr and an ExternalName
// one, in a stanza with the given options.
func zonalCluster(t *testing.T, options string) *plugintest.Plugin {
	t.Helper()
	k, a := plugintest.Wired(t, "kubetree cluster.local clusterset.local {\n"+options+"\n}")
	k.SyncedFlag.Store(true)
	a.ApplyNamespace("testns", true)
	http := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	for _, s := range []struct {
		svc *api.Service
		sls []*discovery.EndpointSlice
	}{
		{k8stest.HeadlessService("testns", "hdls", k8stest.TCP("http", 80)), []*discovery.EndpointSlice{
			k8stest.InZones(k8stest.Slice("testns", "hdls", "hdls-v4", discovery.AddressTypeIPv4, http,
				k8stest.Endpoint{Addrs: []string{"172.0.0.1"}}, k8stest.Endpoint{Addrs: []string{"172.0.0.2"}}, k8stest.Endpoint{Addrs: []string{"172.0.0.3"}},
				k8stest.Endpoint{Addrs: []string{"172.0.0.4"}, NotReady: true}, k8stest.Endpoint{Addrs: []string{"172.0.0.5"}}, k8stest.Endpoint{Addrs: []string{"172.0.0.6"}}),
				"us-west-2a", "US-West-2b", "us-west-2b", "us-west-2c", "corp.example.com", ""),
			k8stest.InZones(k8stest.Slice("testns", "hdls", "hdls-v6", discovery.AddressTypeIPv6, http, k8stest.Endpoint{Addrs: []string{"fd00::1"}, Hostname: "web-0"}),
				"us-west-2a"),
		}},
		{k8stest.ClusterIPService("testns", "clstr", []string{"10.0.0.10"}, k8stest.TCP("http", 80)), []*discovery.EndpointSlice{
			k8stest.InZones(k8stest.Slice("testns", "clstr", "clstr-1", discovery.AddressTypeIPv4, http, k8stest.Endpoint{Addrs: []string{"172.0.1.1"}}), "us-west-2a"),
		}},
		{k8stest.ExternalNameService("testns", "ext", "example.org"), nil},
	} {
		stored, _ := plugintest.Slim(t, s.svc, nil, false)
		var sls []*object.StoredSlice
		for _, sl := range s.sls {
			o, _ := object.SliceTransform(k.Watch.Slices)(sl) // the watcher's transform
			sls = append(sls, o.(*object.StoredSlice))
		}
		a.ApplyService(stored.Key(), stored, sls, true)
	}
	return k
}

// TestZonalNames follows the in-tree plugin's zonal_test cases: pin narrows to a zone and is NODATA
// for an empty one, prefer falls back to every endpoint, SRV is narrowed the same way, other types
// are NODATA, and everything but a headless service's zone-scoped name stays NXDOMAIN.
func TestZonalNames(t *testing.T) {
	k := zonalCluster(t, "zonal\nmulticluster clusterset.local")
	const (
		hdls = "hdls.testns.svc.cluster.local."
		pinA = "us-west-2a.pin._zone." + hdls
		pinB = "us-west-2b.pin._zone." + hdls
		pinC = "us-west-2c.pin._zone." + hdls
		preC = "us-west-2c.prefer._zone." + hdls
	)
	nxdomain := func(rule, qname string) plugintest.Case {
		return plugintest.Case{Rule: rule, Case: test.Case{Qname: qname, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{soa5("cluster.local.")}}}
	}
	nodata := func(rule, qname string, qtype uint16) plugintest.Case {
		return plugintest.Case{Rule: rule, Case: test.Case{Qname: qname, Qtype: qtype, Ns: []dns.RR{soa5("cluster.local.")}}}
	}
	a := func(owner string, ips ...string) []dns.RR {
		var rrs []dns.RR
		for _, ip := range ips {
			rrs = append(rrs, test.A(owner+" 5 IN A "+ip))
		}
		return rrs
	}
	srv := func(owner string, weight int, targets ...string) []dns.RR {
		var rrs []dns.RR
		for _, target := range targets {
			rrs = append(rrs, test.SRV(fmt.Sprintf("%s 5 IN SRV 0 %d 80 %s.%s", owner, weight, target, hdls)))
		}
		return rrs
	}
	all := []string{"172.0.0.1", "172.0.0.2", "172.0.0.3", "172.0.0.5", "172.0.0.6"}
	plugintest.RunCases(t, k, []plugintest.Case{
		{Rule: "pin: the endpoints of the zone", Case: test.Case{Qname: pinA, Qtype: dns.TypeA, Answer: a(pinA, "172.0.0.1")}},
		{Rule: "pin: a zone matches in any case", Case: test.Case{Qname: pinB, Qtype: dns.TypeA, Answer: a(pinB, "172.0.0.2", "172.0.0.3")}},
		{Rule: "pin: AAAA in the zone", Case: test.Case{Qname: pinA, Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA(pinA + " 5 IN AAAA fd00::1")}}},
		nodata("pin: a zone of only a not-ready endpoint is NODATA", pinC, dns.TypeA),
		nodata("pin: a zone no endpoint has is NODATA", "nowhere.pin._zone."+hdls, dns.TypeA),
		{Rule: "pin: a zone value with dots", Case: test.Case{Qname: "corp.example.com.pin._zone." + hdls, Qtype: dns.TypeA,
			Answer: a("corp.example.com.pin._zone."+hdls, "172.0.0.5")}},
		{Rule: "prefer: narrows like pin when the zone has endpoints", Case: test.Case{Qname: "us-west-2a.prefer._zone." + hdls,
			Qtype: dns.TypeA, Answer: a("us-west-2a.prefer._zone."+hdls, "172.0.0.1")}},
		{Rule: "prefer: an empty zone falls back to every endpoint", Case: test.Case{Qname: preC, Qtype: dns.TypeA, Answer: a(preC, all...)}},
		nodata("prefer: a zone with only IPv4 endpoints has no AAAA (no fallback)", "us-west-2b.prefer._zone."+hdls, dns.TypeAAAA),
		{Rule: "prefer: SRV falls back too", Case: test.Case{Qname: preC, Qtype: dns.TypeSRV,
			Answer: srv(preC, 16, "172-0-0-1", "172-0-0-2", "172-0-0-3", "172-0-0-5", "172-0-0-6", "web-0"),
			Extra: append(append(a("172-0-0-1."+hdls, "172.0.0.1"), append(a("172-0-0-2."+hdls, "172.0.0.2"), a("172-0-0-3."+hdls, "172.0.0.3")...)...),
				append(append(a("172-0-0-5."+hdls, "172.0.0.5"), a("172-0-0-6."+hdls, "172.0.0.6")...), test.AAAA("web-0."+hdls+" 5 IN AAAA fd00::1"))...)}},
		{Rule: "pin: SRV narrowed to the zone", Case: test.Case{Qname: pinB, Qtype: dns.TypeSRV, Answer: srv(pinB, 50, "172-0-0-2", "172-0-0-3"),
			Extra: append(a("172-0-0-2."+hdls, "172.0.0.2"), a("172-0-0-3."+hdls, "172.0.0.3")...)}},
		nodata("pin: SRV of an empty zone is NODATA", pinC, dns.TypeSRV),
		nodata("pin: TXT is NODATA", pinA, dns.TypeTXT),
		nodata("prefer: TXT is NODATA", preC, dns.TypeTXT),
		nxdomain("a service that does not exist", "us-west-2a.pin._zone.ghost.testns.svc.cluster.local."),
		nxdomain("an unknown directive", "us-west-2a.florp._zone."+hdls),
		nxdomain("no zone", "pin._zone."+hdls),
		nxdomain("no directive", "us-west-2a._zone."+hdls),
		nxdomain("a ClusterIP service has no zone-scoped names", "us-west-2a.pin._zone.clstr.testns.svc.cluster.local."),
		nxdomain("an ExternalName service has none either", "us-west-2a.pin._zone.ext.testns.svc.cluster.local."),
		{Rule: "the plain name is unchanged", Case: test.Case{Qname: hdls, Qtype: dns.TypeA, Answer: a(hdls, all...)}},
		{Rule: "not in a multicluster zone", Case: test.Case{Qname: "us-west-2a.pin._zone.hdls.testns.svc.clusterset.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{soa5("clusterset.local.")}}},
	})

	// Without the option the shape is too long, as ever.
	k = zonalCluster(t, "ttl 5")
	plugintest.Check(t, k, nxdomain("without zonal", pinA))
}

func soa5(zone string) dns.RR {
	return test.SOA(fmt.Sprintf("%s 5 IN SOA ns.dns.%s hostmaster.%s 0 7200 1800 86400 5", zone, zone, zone))
}

// TestZonalMetadata: with zonal, kubetree/zone is the zone a zone-scoped name asks for ("" for
// other names), as the in-tree plugin's kubernetes/zone.
func TestZonalMetadata(t *testing.T) {
	k, _ := plugintest.Wired(t, "kubetree cluster.local {\n zonal\n}")
	for _, tc := range []struct{ name, zone string }{
		{"corp.example.com.prefer._zone.db.prod.svc.cluster.local.", "corp.example.com"},
		{"db.prod.svc.cluster.local.", ""},
	} {
		ctx := metadata.ContextWithMetadata(context.Background())
		ctx = k.Metadata(ctx, plugintest.From("10.9.9.9", tc.name, nil))
		f := metadata.ValueFunc(ctx, "kubetree/zone")
		if f == nil || f() != tc.zone {
			t.Errorf("%s: kubetree/zone = %v, want %q", tc.name, f, tc.zone)
		} else if got := metadata.ValueFunc(ctx, "kubetree/service")(); got != "db" {
			t.Errorf("%s: kubetree/service = %q, want db", tc.name, got)
		}
	}
}

// TestZonalAllocations: answering a zone-scoped name (parsing the zone, narrowing the endpoints)
// allocates no more than answering the headless service's own name: only the reply.
func TestZonalAllocations(t *testing.T) {
	k := zonalCluster(t, "zonal")
	allocs := func(name string) float64 {
		r := new(dns.Msg)
		r.SetQuestion(name, dns.TypeA)
		w := &plugintest.CaptureWriter{}
		return testing.AllocsPerRun(100, func() { _, _ = k.ServeDNS(context.Background(), w, r) })
	}
	plain := allocs("hdls.testns.svc.cluster.local.")
	for _, name := range []string{"us-west-2b.pin._zone.hdls.testns.svc.cluster.local.", "us-west-2c.prefer._zone.hdls.testns.svc.cluster.local."} {
		if n := allocs(name); n > plain {
			t.Errorf("%s: %v allocations, more than the plain name's %v", name, n, plain)
		}
	}
}
