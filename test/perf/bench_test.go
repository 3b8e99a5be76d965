package perf_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkLookup walks a tree of 1,000 services in 10 namespaces.
func BenchmarkLookup(b *testing.B) {
	k, a := plugintest.Wired(b, "kubetree cluster.local")
	for i := range 1000 {
		ns := fmt.Sprintf("ns%d", i%10)
		a.ApplyNamespace(ns, true)
		svc, _ := plugintest.Slim(b, k8stest.ClusterIPService(ns, fmt.Sprintf("svc%d", i), []string{fmt.Sprintf("10.96.%d.%d", i>>8, i&255)}, k8stest.TCP("http", 80)), nil, false)
		a.ApplyService(svc.Key(), svc, nil, true)
	}
	for _, bc := range []struct{ name, qname string }{
		{"service", "svc123.ns3.svc.cluster.local."},
		{"upper case", "SVC123.Ns3.svc.Cluster.Local."},
		{"srv", "_http._tcp.svc123.ns3.svc.cluster.local."},
		{"missing", "nope.ns3.svc.cluster.local."},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				k.Tree.Lookup(bc.qname, "cluster.local.")
			}
		})
	}
}

// BenchmarkServeDNS answers from a synced cluster through a writer that does not pack, so that the
// allocations are the plugin's own.
func BenchmarkServeDNS(b *testing.B) {
	var eps []k8stest.Endpoint
	for i := range 10 {
		eps = append(eps, k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.244.0.%d", i+1)}})
	}
	c := plugintest.StartCluster(b, "kubetree cluster.local 10.0.0.0/8", []runtime.Object{
		k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, k8stest.TCP("http", 80), k8stest.UDP("dns", 53)),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)), eps...),
	}...)
	w := plugintest.NewServerWriter()
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		qname string
		qtype uint16
		rcode int
		count int // answer records
	}{
		{"A clusterIP", "web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
		{"AAAA clusterIP", "web.prod.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, 1},
		{"SRV clusterIP", "_http._tcp.web.prod.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, 1},
		{"A headless 10 endpoints", "db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 10},
		{"NXDOMAIN", "nope.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
		{"NODATA", "prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 0},
		{"PTR", "10.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, 1},
		// The zone asked in mixed case: the names made in it (SRV target and glue, the SOA's) are
		// copies in the question's case; in lower case they are not.
		{"SRV clusterIP, zone in mixed case", "_http._tcp.web.prod.svc.Cluster.Local.", dns.TypeSRV, dns.RcodeSuccess, 1},
		{"NXDOMAIN, zone in mixed case", "nope.prod.svc.Cluster.Local.", dns.TypeA, dns.RcodeNameError, 0},
	} {
		r := new(dns.Msg)
		r.SetQuestion(bc.qname, bc.qtype)
		// The benchmark must measure the answer it names.
		rec := &plugintest.CaptureWriter{}
		c.ServeDNS(ctx, rec, r)
		if rec.Msg == nil || rec.Msg.Rcode != bc.rcode || len(rec.Msg.Answer) != bc.count {
			b.Fatalf("%s: unexpected reply %v", bc.name, rec.Msg)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.ServeDNS(ctx, w, r)
			}
		})
	}
}

// BenchmarkServeDNSTopology answers a headless service of 10 endpoints in two zones, each hinted
// for its zone, without and with topology: from a client pod in zone-a (which gets zone-a's 5),
// and from a client that is no pod (every endpoint). The writer returns one address, as a server's
// does, so that the allocations are the plugin's own.
func BenchmarkServeDNSTopology(b *testing.B) {
	objs := topologyBenchObjects()
	ctx := context.Background()
	for _, option := range []string{"off", "on"} {
		c := plugintest.StartCluster(b, topologyBenchStanza[option], objs...)
		for _, bc := range []struct {
			name, client, qname string
			qtype               uint16
			count               map[string]int // answer records, off and on
		}{
			{"A headless, client in zone-a", "10.244.1.1", "db.prod.svc.cluster.local.", dns.TypeA, map[string]int{"off": 10, "on": 5}},
			{"A headless, client no pod", "10.9.9.9", "db.prod.svc.cluster.local.", dns.TypeA, map[string]int{"off": 10, "on": 10}},
			{"SRV headless, client in zone-a", "10.244.1.1", "_pg._tcp.db.prod.svc.cluster.local.", dns.TypeSRV, map[string]int{"off": 10, "on": 5}},
			{"A endpoint name, client in zone-a", "10.244.1.1", "10-244-0-2.db.prod.svc.cluster.local.", dns.TypeA, map[string]int{"off": 1, "on": 1}},
		} {
			r := new(dns.Msg)
			r.SetQuestion(bc.qname, bc.qtype)
			w := &plugintest.FixedAddrWriter{Addr: &net.UDPAddr{IP: net.ParseIP(bc.client), Port: 40000}}
			c.ServeDNS(ctx, w, r)
			if w.Msg == nil || w.Msg.Rcode != dns.RcodeSuccess || len(w.Msg.Answer) != bc.count[option] {
				b.Fatalf("%s (topology %s): unexpected reply %v", bc.name, option, w.Msg)
			}
			b.Run(bc.name+"/topology "+option, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c.ServeDNS(ctx, w, r)
				}
			})
		}
	}
}

// BenchmarkServeDNSTopologyCost is BenchmarkServeDNSTopology's queries with topology on against off,
// alternated in short rounds so that a shared machine's load falls on both alike: it reports the
// median of the rounds' time ratios (on/off) per query.
func BenchmarkServeDNSTopologyCost(b *testing.B) {
	objs := topologyBenchObjects()
	off := plugintest.StartCluster(b, topologyBenchStanza["off"], objs...).Plugin
	on := plugintest.StartCluster(b, topologyBenchStanza["on"], objs...).Plugin
	ctx := context.Background()
	for _, bc := range []struct{ name, client, qname string }{
		{"A headless, client in zone-a", "10.244.1.1", "db.prod.svc.cluster.local."},
		{"A headless, client no pod", "10.9.9.9", "db.prod.svc.cluster.local."},
		{"A endpoint name, client in zone-a", "10.244.1.1", "10-244-0-2.db.prod.svc.cluster.local."},
	} {
		r := new(dns.Msg)
		r.SetQuestion(bc.qname, dns.TypeA)
		w := &plugintest.FixedAddrWriter{Addr: &net.UDPAddr{IP: net.ParseIP(bc.client), Port: 40000}}
		b.Run(bc.name, func(b *testing.B) {
			var ratios []float64
			timed := func(k *plugintest.Plugin) time.Duration {
				start := time.Now()
				for range 500 {
					k.ServeDNS(ctx, w, r)
				}
				return time.Since(start)
			}
			for b.Loop() {
				ratios = append(ratios, float64(timed(on))/float64(timed(off)))
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "on/off")
		})
	}
}

// topologyBenchObjects is the topology benchmarks' cluster: a headless service of 10 endpoints in
// two zones, each hinted for its zone, and a client pod on a node in zone-a.
func topologyBenchObjects() []runtime.Object {
	var eps []k8stest.Endpoint
	for i := range 10 {
		zone := []string{"zone-a", "zone-b"}[i%2]
		eps = append(eps, k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.244.0.%d", i+1)}, Zone: zone, ForZones: []string{zone}})
	}
	return []runtime.Object{k8stest.Namespace("prod"), k8stest.Namespace("client"), k8stest.Node("node-a1", "zone-a"),
		k8stest.OnNode(k8stest.Pod("client", "app", "10.244.1.1"), "node-a1"),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)), eps...)}
}

// topologyBenchStanza is the topology benchmarks' stanza, by whether topology is "off" or "on".
var topologyBenchStanza = map[string]string{
	"off": "kubetree cluster.local {\n\tpods verified\n}",
	"on":  "kubetree cluster.local {\n\tpods verified\n\ttopology\n}",
}

// BenchmarkApplyService applies one dual-stack ClusterIP service with two ports and three
// endpoints, as the watcher does when it changes: assembled, built and swapped into the tree.
func BenchmarkApplyService(b *testing.B) {
	_, a := plugintest.Wired(b, "kubetree cluster.local")
	a.ApplyNamespace("prod", true)
	svc, sls := plugintest.Slim(b, k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, k8stest.TCP("http", 80), k8stest.UDP("dns", 53)),
		[]*discovery.EndpointSlice{k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
			k8stest.Endpoint{Addrs: []string{"10.244.0.1"}}, k8stest.Endpoint{Addrs: []string{"10.244.0.2"}}, k8stest.Endpoint{Addrs: []string{"10.244.0.3"}})}, false)
	b.ReportAllocs()
	for b.Loop() {
		a.ApplyService(svc.Key(), svc, sls, true)
	}
}

// BenchmarkHeadlessEndpointChange changes one endpoint of a headless service with 1,000 endpoints
// in 10 slices, and applies that service only; with a reverse zone, its PTR names too.
func BenchmarkHeadlessEndpointChange(b *testing.B) {
	for _, stanza := range []string{"kubetree cluster.local", "kubetree cluster.local in-addr.arpa"} {
		b.Run(strings.TrimPrefix(stanza, "kubetree "), func(b *testing.B) { benchmarkHeadlessEndpointChange(b, stanza) })
	}
}

func benchmarkHeadlessEndpointChange(b *testing.B, stanza string) {
	_, a := plugintest.Wired(b, stanza)
	a.ApplyNamespace("prod", true)
	var apiSlices []*discovery.EndpointSlice
	for i := range 10 {
		var eps []k8stest.Endpoint
		for j := range 100 {
			eps = append(eps, k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.244.%d.%d", i, j+1)}})
		}
		apiSlices = append(apiSlices, k8stest.Slice("prod", "db", fmt.Sprintf("db-%d", i), discovery.AddressTypeIPv4,
			k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)), eps...))
	}
	// A changed endpoint arrives as a new stored slice; the other nine are shared as they are.
	changed := apiSlices[3].DeepCopy()
	changed.Endpoints[42].Addresses = []string{"10.245.0.1"}
	svc, sls := plugintest.Slim(b, k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)), append(apiSlices, changed), false)
	versions := [2]*object.StoredSlice{sls[3], sls[10]}
	sls = sls[:10]
	a.ApplyService(svc.Key(), svc, sls, true)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		sls[3] = versions[n%2]
		a.ApplyService(svc.Key(), svc, sls, true)
	}
}
