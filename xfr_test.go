package kubetree_test

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/transfer"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"
	"github.com/kubetree/kubetree/internal/records"

	"github.com/miekg/dns"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// notifies records the zones a notifier was asked to send NOTIFY for.
type notifies struct {
	mu    sync.Mutex
	zones []string
}

func (n *notifies) send(zone string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.zones = append(n.zones, zone)
	return nil
}

func (n *notifies) has(zone string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.zones, zone)
}

// startTransferCluster is plugintest.StartCluster with the transfer plugin present: journal and notifier on.
func startTransferCluster(t *testing.T, objs ...runtime.Object) (*plugintest.Cluster, *notifies) {
	t.Helper()
	n := &notifies{}
	c := plugintest.StartClusterWith(t, plugintest.Zones, func(c *plugintest.Cluster) {
		c.Applier.EnableTransfer(n.send)
		t.Cleanup(func() { _ = c.Applier.Close() })
	}, objs...)
	c.Barrier(t) // a slice's key can land behind the sync barrier
	return c, n
}

const (
	xWeb = "web.prod.svc.cluster.local."
	xDB  = "db.prod.svc.cluster.local."
)

func transferCluster() []runtime.Object {
	return []runtime.Object{
		k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.0.0.10"}, k8stest.TCP("http", 80)),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", "TCP", 5432)),
			k8stest.Endpoint{Addrs: []string{"10.0.0.20"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.0.0.21"}}),
		k8stest.ExternalNameService("prod", "ext", "example.com"),
	}
}

var (
	// transferZone is what AXFR cluster.local carries for transferCluster, the SOA aside.
	transferZone = []string{
		"cluster.local. 5 IN NS ns.dns.cluster.local.",
		`dns-version.cluster.local. 28800 IN TXT "1.1.0"`,
		plugintest.RecA(xWeb, "10.0.0.10"),
		plugintest.RecSRV(xWeb, 100, 80, xWeb),
		plugintest.RecSRV("_http._tcp."+xWeb, 100, 80, xWeb),
		plugintest.RecA(xDB, "10.0.0.20"),
		plugintest.RecA(xDB, "10.0.0.21"),
		plugintest.RecA("db-0."+xDB, "10.0.0.20"),
		plugintest.RecA("10-0-0-21."+xDB, "10.0.0.21"),
		plugintest.RecSRV("_pg._tcp."+xDB, 50, 5432, "db-0."+xDB),
		plugintest.RecSRV("_pg._tcp."+xDB, 50, 5432, "10-0-0-21."+xDB),
		"ext.prod.svc.cluster.local. 5 IN CNAME example.com.",
	}
	transferReverse = []string{
		"10.in-addr.arpa. 5 IN NS ns.dns.cluster.local.",
		plugintest.RecPTR("10.0.0.10.in-addr.arpa.", xWeb),
		plugintest.RecPTR("20.0.0.10.in-addr.arpa.", "db-0."+xDB),
		plugintest.RecPTR("21.0.0.10.in-addr.arpa.", "10-0-0-21."+xDB),
	}
)

// TestTransferAXFR checks the whole of both zones: the in-tree plugin's records for each kind of
// service, and PTR records in the reverse zone.
func TestTransferAXFR(t *testing.T) {
	c, _ := startTransferCluster(t, transferCluster()...)
	for _, tc := range []struct {
		zone string
		want []string
	}{{plugintest.ClusterZone, transferZone}, {"10.in-addr.arpa.", transferReverse}} {
		t.Run(tc.zone, func(t *testing.T) {
			_, got := plugintest.AXFRBody(t, plugintest.Xfr(t, c.Plugin, tc.zone, 0))
			if want := plugintest.Texts(t, tc.want...); !slices.Equal(got, want) {
				t.Errorf("AXFR %s:\n got %q\nwant %q", tc.zone, got, want)
			}
		})
	}
}

// TestTransferAXFRIPv6: ip6.arpa carries the PTR records of IPv6 cluster IPs and endpoints, and
// in-addr.arpa none of them.
func TestTransferAXFRIPv6(t *testing.T) {
	c := plugintest.StartClusterWith(t, "kubetree cluster.local in-addr.arpa ip6.arpa", nil,
		k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"fd00::10", "10.0.0.10"}, k8stest.TCP("http", 80)),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv6, k8stest.SlicePorts(k8stest.SlicePort("pg", "TCP", 5432)),
			k8stest.Endpoint{Addrs: []string{"fd00::20"}, Hostname: "db-0"}))
	c.Barrier(t)
	ptr6 := func(addr string) string { name, _ := dns.ReverseAddr(addr); return name }
	for _, tc := range []struct {
		zone string
		want []string
	}{
		{"ip6.arpa.", []string{
			"ip6.arpa. 5 IN NS ns.dns.cluster.local.",
			plugintest.RecPTR(ptr6("fd00::10"), xWeb),
			plugintest.RecPTR(ptr6("fd00::20"), "db-0."+xDB),
		}},
		{"in-addr.arpa.", []string{"in-addr.arpa. 5 IN NS ns.dns.cluster.local.", plugintest.RecPTR("10.0.0.10.in-addr.arpa.", xWeb)}},
	} {
		_, got := plugintest.AXFRBody(t, plugintest.Xfr(t, c.Plugin, tc.zone, 0))
		if want := plugintest.Texts(t, tc.want...); !slices.Equal(got, want) {
			t.Errorf("AXFR %s:\n got %q\nwant %q", tc.zone, got, want)
		}
	}
}

// TestTransferNotAuthoritative: only the zones themselves are transferred; the transfer plugin then
// asks the next Transferer.
func TestTransferNotAuthoritative(t *testing.T) {
	c, _ := startTransferCluster(t)
	for _, zone := range []string{"example.org.", "svc.cluster.local.", "in-addr.arpa."} {
		if _, err := c.Transfer(zone, 0); !errors.Is(err, transfer.ErrNotAuthoritative) {
			t.Errorf("Transfer(%s): %v, want ErrNotAuthoritative", zone, err)
		}
	}
}

// TestTransferBeforeSync: a zone half listed is not handed out as the zone.
func TestTransferBeforeSync(t *testing.T) {
	k, _ := plugintest.Wired(t, plugintest.Zones)
	if _, err := k.Transfer(plugintest.ClusterZone, 0); !errors.Is(err, records.ErrNotSynced) {
		t.Errorf("Transfer before the first sync: %v, want records.ErrNotSynced", err)
	}
}

// ixfrParts checks the condensed IXFR form (new SOA, old SOA, deleted, new SOA, added, new SOA)
// and returns its serials and sections.
func ixfrParts(t *testing.T, rrs []dns.RR) (from, to uint32, deleted, added []string) {
	t.Helper()
	var soas []int
	for i, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeSOA {
			soas = append(soas, i)
		}
	}
	if len(soas) != 4 || soas[0] != 0 || soas[1] != 1 || soas[3] != len(rrs)-1 {
		t.Fatalf("not a condensed IXFR: SOAs at %v of %d records", soas, len(rrs))
	}
	to, from = rrs[0].(*dns.SOA).Serial, rrs[1].(*dns.SOA).Serial
	if rrs[soas[2]].(*dns.SOA).Serial != to || rrs[soas[3]].(*dns.SOA).Serial != to {
		t.Fatalf("IXFR SOAs disagree: %v", rrs)
	}
	return from, to, plugintest.ZoneText(rrs[2:soas[2]]), plugintest.ZoneText(rrs[soas[2]+1 : soas[3]])
}

// TestTransferIXFR follows a secondary through two changes: IXFR from each journaled serial is the
// net difference, from the current serial a single SOA, and from an unknown one a full transfer.
// The changes come faster than the serial's second: each still gets a serial of its own.
func TestTransferIXFR(t *testing.T) {
	c, n := startTransferCluster(t, transferCluster()...)
	s0, _ := plugintest.AXFRBody(t, plugintest.Xfr(t, c.Plugin, plugintest.ClusterZone, 0))
	r0, _ := plugintest.AXFRBody(t, plugintest.Xfr(t, c.Plugin, "10.in-addr.arpa.", 0))

	c.Create(t, k8stest.ClusterIPService("prod", "api", []string{"10.0.0.30"}, k8stest.TCP("http", 8080)))
	c.Barrier(t)
	api := "api.prod.svc.cluster.local."
	apiRecords := []string{plugintest.RecA(api, "10.0.0.30"), plugintest.RecSRV(api, 100, 8080, api), plugintest.RecSRV("_http._tcp."+api, 100, 8080, api)}
	s1, _ := plugintest.AXFRBody(t, plugintest.Xfr(t, c.Plugin, plugintest.ClusterZone, 0))
	if !records.SerialBefore(s0, s1) {
		t.Fatalf("serial %d did not move past %d", s1, s0)
	}
	from, to, deleted, added := ixfrParts(t, plugintest.Xfr(t, c.Plugin, plugintest.ClusterZone, s0))
	if from != s0 || to != s1 || len(deleted) != 0 || !slices.Equal(added, plugintest.Texts(t, apiRecords...)) {
		t.Errorf("IXFR from %d: %d -> %d, deleted %q, added %q", s0, from, to, deleted, added)
	}

	c.Remove(t, k8stest.ClusterIPService("prod", "web", []string{"10.0.0.10"}, k8stest.TCP("http", 80)))
	c.Barrier(t)
	webRecords := []string{plugintest.RecA(xWeb, "10.0.0.10"), plugintest.RecSRV(xWeb, 100, 80, xWeb), plugintest.RecSRV("_http._tcp."+xWeb, 100, 80, xWeb)}
	from, to, deleted, added = ixfrParts(t, plugintest.Xfr(t, c.Plugin, plugintest.ClusterZone, s1))
	if from != s1 || !records.SerialBefore(s1, to) || !slices.Equal(deleted, plugintest.Texts(t, webRecords...)) || len(added) != 0 {
		t.Errorf("IXFR from %d: %d -> %d, deleted %q, added %q", s1, from, to, deleted, added)
	}
	s2 := to
	// From s0, the two changes condensed into one.
	from, to, deleted, added = ixfrParts(t, plugintest.Xfr(t, c.Plugin, plugintest.ClusterZone, s0))
	if from != s0 || to != s2 || !slices.Equal(deleted, plugintest.Texts(t, webRecords...)) || !slices.Equal(added, plugintest.Texts(t, apiRecords...)) {
		t.Errorf("IXFR from %d: %d -> %d, deleted %q, added %q", s0, from, to, deleted, added)
	}
	// The reverse zone journals its PTR records.
	_, _, deleted, added = ixfrParts(t, plugintest.Xfr(t, c.Plugin, "10.in-addr.arpa.", r0))
	if want := plugintest.Texts(t, plugintest.RecPTR("10.0.0.10.in-addr.arpa.", xWeb)); !slices.Equal(deleted, want) {
		t.Errorf("reverse IXFR deleted %q, want %q", deleted, want)
	}
	if want := plugintest.Texts(t, plugintest.RecPTR("30.0.0.10.in-addr.arpa.", api)); !slices.Equal(added, want) {
		t.Errorf("reverse IXFR added %q, want %q", added, want)
	}

	// Current: one SOA.
	if rrs := plugintest.Xfr(t, c.Plugin, plugintest.ClusterZone, s2); len(rrs) != 1 || rrs[0].(*dns.SOA).Serial != s2 {
		t.Errorf("IXFR from the current serial: %v, want its SOA alone", rrs)
	}
	// Unknown: the whole zone.
	serial, body := plugintest.AXFRBody(t, plugintest.Xfr(t, c.Plugin, plugintest.ClusterZone, s0-1000))
	want := slices.DeleteFunc(slices.Clone(transferZone), func(s string) bool { return slices.Contains(webRecords, s) })
	if want = plugintest.Texts(t, append(want, apiRecords...)...); serial != s2 || !slices.Equal(body, want) {
		t.Errorf("IXFR from an unknown serial, serial %d (want %d):\n got %q\nwant %q", serial, s2, body, want)
	}
	plugintest.WaitFor(t, "NOTIFY of both zones", func() bool { return n.has(plugintest.ClusterZone) && n.has("10.in-addr.arpa.") })
}

// BenchmarkTransferAXFR transfers cluster.local holding 10,000 ClusterIP services and 1,000 headless
// ones of 10 endpoints: the time the snapshot holds the applier's lock (snapshot-µs, what a change
// can wait), and the whole transfer.
func BenchmarkTransferAXFR(b *testing.B) {
	k, a := plugintest.Wired(b, plugintest.Zones)
	k.SyncedFlag.Store(true)
	a.ApplyNamespace("prod", true)
	for i := range 10000 {
		name := "s" + strconv.Itoa(i)
		svc, sls := plugintest.Slim(b, k8stest.ClusterIPService("prod", name, []string{"10.1." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250)}, k8stest.TCP("http", 80)), nil, false)
		a.ApplyService("prod/"+name, svc, sls, true)
	}
	for i := range 1000 {
		name := "h" + strconv.Itoa(i)
		var eps []k8stest.Endpoint
		for j := range 10 {
			eps = append(eps, k8stest.Endpoint{Addrs: []string{"10.2." + strconv.Itoa(i/25) + "." + strconv.Itoa((i%25)*10+j)}})
		}
		svc, sls := plugintest.Slim(b, k8stest.HeadlessService("prod", name, k8stest.TCP("pg", 5432)),
			[]*discovery.EndpointSlice{k8stest.Slice("prod", name, name+"-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", "TCP", 5432)), eps...)}, false)
		a.ApplyService("prod/"+name, svc, sls, true)
	}
	z := k.ServedZones[0]
	var held time.Duration
	records := 0
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		a.Snapshot(z, 0)
		held += time.Since(start)
		records = len(plugintest.Xfr(b, k, plugintest.ClusterZone, 0))
	}
	b.ReportMetric(float64(held.Microseconds())/float64(b.N), "snapshot-µs")
	b.ReportMetric(float64(records), "records")
}
