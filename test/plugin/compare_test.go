package plugin_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The in-tree kubernetes plugin, driven in-process on the same objects, so that ServeDNS costs can
// be compared query by query. Its index is a stand-in filled through the in-tree plugin's own
// conversions; it answers from prebuilt maps without allocating, which flatters the in-tree plugin.

// comparedCluster is a dual-stack ClusterIP service and a headless service with ten endpoints.
func comparedCluster() []runtime.Object {
	var eps []k8stest.Endpoint
	for i := range 10 {
		e := k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.244.1.%d", i+1)}}
		if i%2 == 0 {
			e.Hostname = fmt.Sprintf("db-%d", i)
		}
		eps = append(eps, e)
	}
	return []runtime.Object{
		k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, k8stest.TCP("http", 80)),
		k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
			k8stest.Endpoint{Addrs: []string{"10.244.0.1"}}),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)), eps...),
	}
}

var comparedQueries = []struct {
	name  string
	qname string
	qtype uint16
}{
	{"A ClusterIP", "web.prod.svc.cluster.local.", dns.TypeA},
	{"AAAA ClusterIP", "web.prod.svc.cluster.local.", dns.TypeAAAA},
	{"SRV ClusterIP", "_http._tcp.web.prod.svc.cluster.local.", dns.TypeSRV},
	{"A headless 10 endpoints", "db.prod.svc.cluster.local.", dns.TypeA},
	{"A endpoint", "db-0.db.prod.svc.cluster.local.", dns.TypeA},
	{"SRV endpoint", "db-0.db.prod.svc.cluster.local.", dns.TypeSRV},
	{"SRV dashed endpoint", "10-244-1-2.db.prod.svc.cluster.local.", dns.TypeSRV},
	{"NXDOMAIN search path", "web.prod.svc.cluster.local.prod.svc.cluster.local.", dns.TypeA},
	{"NODATA AAAA", "db.prod.svc.cluster.local.", dns.TypeAAAA},
	{"PTR", "10.0.96.10.in-addr.arpa.", dns.TypePTR},
}

// comparedHandlers returns kubetree (through its real watcher) and the in-tree plugin, serving the
// same objects in the same zones.
func comparedHandlers(t testing.TB) (kubetree, inTree plugin.Handler) {
	objs := comparedCluster()
	const stanza = " cluster.local in-addr.arpa ip6.arpa"
	c := plugintest.StartCluster(t, "kubetree"+stanza, objs...)
	c.Next = test.NextHandler(dns.RcodeRefused, nil)
	return c.Kubetree, plugintest.InTreeHandler(t, "kubernetes"+stanza, comparedCluster())
}

// TestSameAnswersAsKubernetes asks kubetree and the in-tree plugin the same questions on the same
// data: both give the same answer. (BenchmarkServeDNSAgainstKubernetes compares their cost.)
func TestSameAnswersAsKubernetes(t *testing.T) {
	kt, k8s := comparedHandlers(t)
	for _, q := range comparedQueries {
		m := new(dns.Msg)
		m.SetQuestion(q.qname, q.qtype)
		var replies [2]*dns.Msg
		for i, h := range []plugin.Handler{kt, k8s} {
			w := &plugintest.CaptureWriter{}
			h.ServeDNS(context.Background(), w, m)
			replies[i] = w.Msg
		}
		if replies[0] == nil || replies[1] == nil {
			t.Fatalf("%s: no reply (kubetree %v, kubernetes %v)", q.name, replies[0] != nil, replies[1] != nil)
		}
		if a, b := summary(replies[0]), summary(replies[1]); a != b {
			t.Errorf("%s: kubetree and kubernetes disagree:\nkubetree:   %s\nkubernetes: %s", q.name, a, b)
		}
	}
}

// caseQueries are questions in mixed case, each answered in the question's case by the in-tree
// plugin (CoreDNS's TestPreserveCase): the owner names as asked, and the zone of every name it makes
// (SRV targets and their glue, the SOA's nameserver and mailbox) as asked.
var caseQueries = []struct {
	qname string
	qtype uint16
}{
	{"not-a-service.prod.svc.ClUsTeR.lOcAl.", dns.TypeA},
	{"Cluster.local.", dns.TypeSOA},
	{"CLUSTER.LOCAL.", dns.TypeA},
	{"wEb.PrOd.SvC.cLuStEr.LoCaL.", dns.TypeA},
	{"wEb.PrOd.SvC.cLuStEr.LoCaL.", dns.TypeAAAA},
	{"wEb.PrOd.SvC.cLuStEr.LoCaL.", dns.TypeSRV},
	{"_HtTp._TcP.wEb.PrOd.SvC.cLuStEr.LoCaL.", dns.TypeSRV},
	{"DB.prod.svc.Cluster.Local.", dns.TypeA},
	{"DB.prod.svc.Cluster.Local.", dns.TypeSRV},
	{"_PG._TCP.db.prod.svc.Cluster.Local.", dns.TypeSRV},
	{"Db-0.Db.Prod.Svc.Cluster.Local.", dns.TypeA},
	{"Db-0.Db.Prod.Svc.Cluster.Local.", dns.TypeSRV},
	{"10-244-1-2.db.prod.svc.CLUSTER.local.", dns.TypeSRV},
	{"Prod.Svc.Cluster.Local.", dns.TypeA},
	{"Nope.Prod.Svc.Cluster.Local.", dns.TypeAAAA},
	{"Dns-Version.Cluster.Local.", dns.TypeTXT},
	{"10.0.96.10.IN-ADDR.ARPA.", dns.TypePTR},
}

// TestSameCaseAsKubernetes asks kubetree and the in-tree plugin the questions of caseQueries on
// the same data: both give the same reply, byte for byte but for the SOA
// serial (each keeps its own) and the order of records (neither promises one).
func TestSameCaseAsKubernetes(t *testing.T) {
	kt, k8s := comparedHandlers(t)
	for _, q := range caseQueries {
		m := new(dns.Msg)
		m.SetQuestion(q.qname, q.qtype)
		var replies [2]string
		for i, h := range []plugin.Handler{kt, k8s} {
			w := &plugintest.CaptureWriter{}
			h.ServeDNS(context.Background(), w, m)
			if w.Msg == nil {
				t.Fatalf("%s %s: no reply from %s", q.qname, dns.TypeToString[q.qtype], h.Name())
			}
			replies[i] = wireText(t, w.Msg)
		}
		if replies[0] != replies[1] {
			t.Errorf("%s %s: kubetree and kubernetes disagree:\nkubetree:   %s\nkubernetes: %s", q.qname, dns.TypeToString[q.qtype], replies[0], replies[1])
		}
	}
}

// wireText is m as sent, header and records: each section's records packed one by one (names
// uncompressed, so in their case), in order of their bytes, with the SOA serial 0 and SRV weights 0
// (the README lists where they differ: a dual-stack service's).
func wireText(t testing.TB, m *dns.Msg) string {
	t.Helper()
	section := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			if soa, ok := rr.(*dns.SOA); ok {
				c := *soa
				c.Serial = 0
				rr = &c
			}
			if srv, ok := rr.(*dns.SRV); ok {
				c := *srv
				c.Weight = 0
				rr = &c
			}
			buf := make([]byte, dns.Len(rr))
			n, err := dns.PackRR(rr, buf, 0, nil, false)
			if err != nil {
				t.Fatalf("packing %v: %v", rr, err)
			}
			out = append(out, fmt.Sprintf("%x (%s)", buf[:n], strings.Join(strings.Fields(rr.String()), " ")))
		}
		slices.Sort(out)
		return strings.Join(out, "; ")
	}
	return fmt.Sprintf("%s aa=%v tc=%v | %s | %s | %s", dns.RcodeToString[m.Rcode], m.Authoritative, m.Truncated,
		section(m.Answer), section(m.Ns), section(m.Extra))
}

// summary is a reply's rcode and sorted answer rdata, without TTLs, weights and the SOA serial.
func summary(m *dns.Msg) string {
	var rrs []string
	for _, rr := range m.Answer {
		if s, ok := rr.(*dns.SRV); ok {
			rrs = append(rrs, fmt.Sprintf("SRV %d %s", s.Port, s.Target))
			continue
		}
		f := strings.Fields(rr.String())
		rrs = append(rrs, strings.Join(append([]string{f[0]}, f[3:]...), " "))
	}
	slices.Sort(rrs)
	return dns.RcodeToString[m.Rcode] + " " + strings.Join(rrs, "; ")
}

// BenchmarkServeDNSAgainstKubernetes measures each query on both plugins, side by side: compare
// allocs/op of kubetree with those of kubernetes (make allocs prints the ratios).
func BenchmarkServeDNSAgainstKubernetes(b *testing.B) {
	kt, k8s := comparedHandlers(b)
	benchmarkSideBySide(b, []namedHandler{{"kubetree", kt}, {"kubernetes", k8s}},
		func(b *testing.B, h namedHandler, r *dns.Msg) {
			w := plugintest.NewServerWriter()
			for b.Loop() {
				h.ServeDNS(context.Background(), w, r)
			}
		})
}

// namedHandler is a plugin a benchmark runs, under its name.
type namedHandler struct {
	name string
	plugin.Handler
}

// benchmarkSideBySide runs serve for each compared query on each handler, as sub-benchmark
// QUERY/HANDLER with its allocations reported.
func benchmarkSideBySide(b *testing.B, handlers []namedHandler, serve func(b *testing.B, h namedHandler, r *dns.Msg)) {
	for _, q := range comparedQueries {
		r := new(dns.Msg)
		r.SetQuestion(q.qname, q.qtype)
		for _, h := range handlers {
			b.Run(q.name+"/"+h.name, func(b *testing.B) {
				b.ReportAllocs()
				serve(b, h, r)
			})
		}
	}
}

// TestCaseDifferencesFromKubernetes: NS at the apex and ns.dns.<zone> asked with the zone in other
// than lower case, where the two plugins differ by the question's case (README's Differences):
// kubetree answers them in the question's case. The in-tree plugin compares the lower-cased
// question with the zone as asked (its handler.go and ns.go's isDefaultNS): NS at the apex goes to
// its NODATA path (here, without its own addresses, it has no NS in lower case either), and
// ns.dns.<zone> is NXDOMAIN where in lower case it is NODATA.
func TestCaseDifferencesFromKubernetes(t *testing.T) {
	const stanza = " cluster.local"
	c := plugintest.StartCluster(t, "kubetree"+stanza, comparedCluster()...)
	c.Applier.PublishNameserver([]net.IP{net.ParseIP("10.244.0.53")})
	inTree := plugintest.InTreeHandler(t, "kubernetes"+stanza, comparedCluster())
	soa := func(zone string) dns.RR {
		return test.SOA(zone + " 5 IN SOA ns.dns." + zone + " hostmaster." + zone + " 0 7200 1800 86400 5")
	}
	for _, tc := range []struct {
		qname              string
		qtype              uint16
		kubetree, inTreeIs test.Case
	}{
		{"Cluster.Local.", dns.TypeNS,
			test.Case{Answer: []dns.RR{test.NS("Cluster.Local. 5 IN NS ns.dns.Cluster.Local.")},
				Extra: []dns.RR{test.A("ns.dns.Cluster.Local. 5 IN A 10.244.0.53")}},
			test.Case{Ns: []dns.RR{soa("Cluster.Local.")}}},
		{"ns.dns.Cluster.Local.", dns.TypeA,
			test.Case{Answer: []dns.RR{test.A("ns.dns.Cluster.Local. 5 IN A 10.244.0.53")}},
			test.Case{Rcode: dns.RcodeNameError, Ns: []dns.RR{soa("Cluster.Local.")}}},
		{"ns.dns.cluster.local.", dns.TypeA,
			test.Case{Answer: []dns.RR{test.A("ns.dns.cluster.local. 5 IN A 10.244.0.53")}},
			test.Case{Ns: []dns.RR{soa("cluster.local.")}}},
	} {
		for _, side := range []struct {
			name string
			h    plugin.Handler
			want test.Case
		}{{"kubetree", c.Plugin, tc.kubetree}, {"kubernetes", inTree, tc.inTreeIs}} {
			want := side.want
			want.Qname, want.Qtype = tc.qname, tc.qtype
			t.Run(side.name+" "+tc.qname+" "+dns.TypeToString[tc.qtype], func(t *testing.T) {
				plugintest.CheckHandler(t, side.h, func(plugin.Handler) {}, plugintest.Case{Case: want})
			})
		}
	}
}
