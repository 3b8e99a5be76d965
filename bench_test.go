package kubetree

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkLookup walks a tree of 1,000 services in 10 namespaces.
func BenchmarkLookup(b *testing.B) {
	k := benchKubetree(b)
	for i := range 1000 {
		s := &service{Namespace: fmt.Sprintf("ns%d", i%10), Name: fmt.Sprintf("svc%d", i), Kind: clusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})},
			Ports:      []port{{Name: "http", Protocol: "tcp", Port: 80}}}
		k.graft(s)
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
				k.tree.Lookup(bc.qname, "cluster.local.")
			}
		})
	}
}

// BenchmarkServeDNS answers from a synced cluster through a writer that does not pack, so that the
// allocations are the plugin's own.
func BenchmarkServeDNS(b *testing.B) {
	var eps []ep
	for i := range 10 {
		eps = append(eps, ep{addrs: []string{fmt.Sprintf("10.244.0.%d", i+1)}})
	}
	c := newCluster(b, "kubetree cluster.local 10.0.0.0/8", []runtime.Object{
		namespace("prod"),
		clusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, tcp("http", 80), udp("dns", 53)),
		headlessService("prod", "db", tcp("pg", 5432)),
		slice("prod", "db", "db-1", discovery.AddressTypeIPv4, slicePorts(slicePort("pg", api.ProtocolTCP, 5432)), eps...),
	}...)
	w := &test.ResponseWriter{}
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
	} {
		r := new(dns.Msg)
		r.SetQuestion(bc.qname, bc.qtype)
		// The benchmark must measure the answer it names.
		rec := &recorder{ResponseWriter: w}
		c.k.ServeDNS(ctx, rec, r)
		if rec.msg == nil || rec.msg.Rcode != bc.rcode || len(rec.msg.Answer) != bc.count {
			b.Fatalf("%s: unexpected reply %v", bc.name, rec.msg)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.k.ServeDNS(ctx, w, r)
			}
		})
	}
}

// BenchmarkApplyService rebuilds one dual-stack ClusterIP service with two ports and three
// endpoints and swaps it into the tree.
func BenchmarkApplyService(b *testing.B) {
	k := benchKubetree(b)
	s := &service{Namespace: "prod", Name: "web", Kind: clusterIP,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::10")},
		Ports:      []port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "dns", Protocol: "udp", Port: 53}},
		Slices: []*endpointSlice{newEndpointSlice([]port{{Name: "http", Protocol: "tcp", Port: 8080}}, []endpoint{
			{Addr: netip.MustParseAddr("10.244.0.1")},
			{Addr: netip.MustParseAddr("10.244.0.2")},
			{Addr: netip.MustParseAddr("10.244.0.3")},
		})}}
	b.ReportAllocs()
	for b.Loop() {
		k.graft(s)
	}
}

// BenchmarkHeadlessEndpointChange changes one endpoint of a headless service with 1,000 endpoints
// in 10 slices, and rebuilds and swaps in that service only.
func BenchmarkHeadlessEndpointChange(b *testing.B) {
	k := benchKubetree(b)
	s := &service{Namespace: "prod", Name: "db", Kind: headless}
	for i := range 10 {
		var eps []endpoint
		for j := range 100 {
			eps = append(eps, endpoint{Addr: netip.AddrFrom4([4]byte{10, 244, byte(i), byte(j + 1)})})
		}
		s.Slices = append(s.Slices, newEndpointSlice([]port{{Name: "pg", Protocol: "tcp", Port: 5432}}, eps))
	}
	k.graft(s)
	// A changed endpoint arrives as a new stored slice; the other nine are shared as they are.
	before := s.Slices[3]
	eps := before.endpoints()
	eps[42].Addr = netip.MustParseAddr("10.245.0.1")
	after := newEndpointSlice(before.Ports, eps)
	versions := [2]*endpointSlice{before, after}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		s.Slices[3] = versions[n%2]
		k.graft(s)
	}
}

func benchKubetree(b *testing.B) *Kubetree {
	b.Helper()
	k, err := parse(caddy.NewTestController("dns", "kubetree cluster.local"))
	if err != nil {
		b.Fatal(err)
	}
	k.tree = NewTree(k.Zones, k.apex)
	k.synced.Store(true)
	return k
}

// graft builds one service and swaps it into the tree, as the watcher does for a changed service.
func (k *Kubetree) graft(s *service) {
	zone := k.forward[0]
	k.tree.PublishService(s.Name+"."+s.Namespace+".svc.", k.forward, []*svcRecords{k.build(s, zone)})
}

// recorder keeps the reply without packing it.
type recorder struct {
	dns.ResponseWriter
	msg *dns.Msg
}

func (r *recorder) WriteMsg(m *dns.Msg) error { r.msg = m; return nil }
