package e2e

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// Zone transfers through the transfer plugin: kubetree's AXFR beside the in-tree plugin's on the
// same API data, the transfer plugin's ACL deciding, NOTIFY on a change, IXFR of the change.

// notifyListener records the NOTIFY messages sent to it, and acknowledges them as a secondary does.
type notifyListener struct {
	addr   string
	server *dns.Server
	mu     sync.Mutex
	zones  []string
}

func startNotifyListener(t testing.TB) *notifyListener {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &notifyListener{addr: pc.LocalAddr().String()}
	l.server = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Opcode == dns.OpcodeNotify && len(r.Question) == 1 {
			l.mu.Lock()
			l.zones = append(l.zones, r.Question[0].Name)
			l.mu.Unlock()
		}
		m := new(dns.Msg)
		m.SetReply(r)
		w.WriteMsg(m)
	})}
	go l.server.ActivateAndServe()
	t.Cleanup(func() { l.server.Shutdown() })
	return l
}

// count returns how many NOTIFY for zone arrived.
func (l *notifyListener) count(zone string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, z := range l.zones {
		if z == zone {
			n++
		}
	}
	return n
}

// transferIn runs AXFR (serial 0) or IXFR from serial of zone over TCP and returns the records in
// order, or the reply's rcode when the transfer is refused.
func (c *coreDNS) transferIn(t testing.TB, zone string, serial uint32) ([]dns.RR, int) {
	t.Helper()
	m := new(dns.Msg)
	if serial == 0 {
		m.SetAxfr(zone)
	} else {
		m.SetIxfr(zone, serial, "ns.dns."+zone, "hostmaster."+zone)
	}
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 30 * time.Second}
	envs, err := tr.In(m, c.addr)
	if err != nil {
		t.Fatalf("%s of %s: %v", dns.TypeToString[m.Question[0].Qtype], zone, err)
	}
	var out []dns.RR
	for e := range envs {
		if e.Error != nil {
			if strings.Contains(e.Error.Error(), "bad xfr rcode") {
				return nil, rcodeOf(e.Error.Error())
			}
			t.Fatalf("%s of %s: %v", dns.TypeToString[m.Question[0].Qtype], zone, e.Error)
		}
		out = append(out, e.RR...)
	}
	return out, dns.RcodeSuccess
}

// rcodeOf reads the rcode from miekg/dns's "dns: bad xfr rcode: N" error; -1 if there is none.
func rcodeOf(text string) int {
	_, n, _ := strings.Cut(text, "bad xfr rcode: ")
	code, err := strconv.Atoi(n)
	if err != nil {
		return -1
	}
	return code
}

// zoneLines writes records one a line as sortedReply does (SOA serial 0), sorted; keep chooses
// which.
func zoneLines(rrs []dns.RR, keep func(dns.RR) bool) []string {
	var out []string
	for _, rr := range rrs {
		if !keep(rr) {
			continue
		}
		if soa, ok := rr.(*dns.SOA); ok {
			c := *soa
			c.Serial = 0
			rr = &c
		}
		out = append(out, strings.Join(strings.Fields(rr.String()), " "))
	}
	slices.Sort(out)
	return out
}

// soaSerial checks that a full transfer starts and ends with the SOA and returns its serial.
func soaSerial(t testing.TB, rrs []dns.RR) uint32 {
	t.Helper()
	first, ok1 := rrs[0].(*dns.SOA)
	last, ok2 := rrs[len(rrs)-1].(*dns.SOA)
	if len(rrs) < 2 || !ok1 || !ok2 || first.Serial != last.Serial {
		t.Fatalf("transfer does not start and end with its SOA: %v", rrs)
	}
	return first.Serial
}

// TestTransferSameAsKubernetes: AXFR cluster.local from kubetree and from the in-tree plugin, on the
// same API data, carries the same records, apart from the differences the README lists, which
// this test spells out; the reverse zone carries PTR records; NOTIFY follows a change, and IXFR
// returns it.
func TestTransferSameAsKubernetes(t *testing.T) {
	ns := newNamespace(t, "xfr")
	createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80), k8stest.TCP("https", 443)))
	createService(t, k8stest.ClusterIPService(ns, "plain", nil, k8stest.TCP("", 8080)))
	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
		k8stest.Endpoint{Addrs: []string{"10.244.9.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.9.2"}},
		k8stest.Endpoint{Addrs: []string{"10.244.9.3"}, NotReady: true}))
	createService(t, k8stest.ExternalNameService(ns, "docs", "www.example.org"))

	notify := startNotifyListener(t)
	p := startPair(t, []string{"transfer {\n        to " + notify.addr + "\n    }"})
	p.waitAnswer(t, svcName(ns, "db"), dns.TypeA, "10.244.9.1", "10.244.9.2")
	for _, c := range p.both() {
		c.waitAnswer(t, svcName(ns, "docs"), dns.TypeCNAME, "www.example.org.")
		eventually(t, "web's records", 30*time.Second, func() bool {
			return len(c.query(t, "tcp", svcName(ns, "web"), dns.TypeA).Answer) == 1 &&
				len(c.query(t, "tcp", svcName(ns, "plain"), dns.TypeA).Answer) == 1
		})
	}

	// This test's names, and the apex's; other tests' services share the zone. The ns.dns glue is
	// checked on its own below: it is what each plugin's NS answers say.
	ours := func(rr dns.RR) bool {
		name := rr.Header().Name
		return strings.HasSuffix(name, "."+ns+".svc.cluster.local.") || name == "cluster.local." ||
			name == "dns-version.cluster.local."
	}
	kt, rc := p.kubetree.transferIn(t, "cluster.local.", 0)
	if rc != dns.RcodeSuccess {
		t.Fatalf("kubetree: AXFR %s", dns.RcodeToString[rc])
	}
	k8s, rc := p.kubernetes.transferIn(t, "cluster.local.", 0)
	if rc != dns.RcodeSuccess {
		t.Fatalf("kubernetes: AXFR %s", dns.RcodeToString[rc])
	}
	soaSerial(t, kt)
	soaSerial(t, k8s)
	ktLines, k8sLines := zoneLines(kt, ours), zoneLines(k8s, ours)
	// The differences the README lists, each written as the record on one side only.
	web, plain := svcName(ns, "web"), svcName(ns, "plain")
	onlyKubetree := []string{
		// The apex NS: the in-tree plugin's transfer has none when it does not know its own
		// addresses (bind 127.0.0.1, as here).
		"cluster.local. 5 IN NS ns.dns.cluster.local.",
		`dns-version.cluster.local. 28800 IN TXT "1.1.0"`,            // the zone's own record
		"web." + ns + ".svc.cluster.local. 5 IN SRV 0 50 443 " + web, // weights spread over the set
		"web." + ns + ".svc.cluster.local. 5 IN SRV 0 50 80 " + web,
	}
	onlyKubernetes := []string{
		"plain." + ns + ".svc.cluster.local. 5 IN SRV 0 100 8080 " + plain, // an unnamed port
		"web." + ns + ".svc.cluster.local. 5 IN SRV 0 100 443 " + web,
		"web." + ns + ".svc.cluster.local. 5 IN SRV 0 100 80 " + web,
	}
	slices.Sort(onlyKubetree)
	slices.Sort(onlyKubernetes)
	gotKT := slices.DeleteFunc(slices.Clone(ktLines), func(s string) bool { return slices.Contains(k8sLines, s) })
	gotK8s := slices.DeleteFunc(slices.Clone(k8sLines), func(s string) bool { return slices.Contains(ktLines, s) })
	if !slices.Equal(gotKT, onlyKubetree) || !slices.Equal(gotK8s, onlyKubernetes) {
		t.Errorf("AXFR cluster.local differs beyond the README's list:\n only kubetree:   %q\n want            %q\n only kubernetes: %q\n want            %q",
			gotKT, onlyKubetree, gotK8s, onlyKubernetes)
	}
	glue := zoneLines(kt, func(rr dns.RR) bool { return rr.Header().Name == "ns.dns.cluster.local." })
	var nsAnswer []dns.RR
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		nsAnswer = append(nsAnswer, p.kubetree.query(t, "tcp", "ns.dns.cluster.local.", qtype).Answer...)
	}
	if want := zoneLines(nsAnswer, func(dns.RR) bool { return true }); len(glue) == 0 || !slices.Equal(glue, want) {
		t.Errorf("kubetree's AXFR has ns.dns glue %q, its queries answer %q", glue, want)
	}
	if len(ktLines) < 12 {
		t.Errorf("kubetree's AXFR holds only %d of this test's records: %q", len(ktLines), ktLines)
	}

	// The reverse zone: PTR records, as the PTR queries answer (the in-tree plugin sends none).
	webIP := answers(p.kubetree.query(t, "tcp", web, dns.TypeA))[0]
	rev, _ := dns.ReverseAddr(webIP)
	wantPTR := []string{rev + " 5 IN PTR " + web, "1.9.244.10.in-addr.arpa. 5 IN PTR db-0." + svcName(ns, "db"),
		"2.9.244.10.in-addr.arpa. 5 IN PTR 10-244-9-2." + svcName(ns, "db")}
	for name, c := range map[string]*coreDNS{"kubetree": p.kubetree, "kubernetes": p.kubernetes} {
		rrs, rc := c.transferIn(t, "in-addr.arpa.", 0)
		if rc != dns.RcodeSuccess {
			t.Fatalf("%s: AXFR in-addr.arpa %s", name, dns.RcodeToString[rc])
		}
		ptrs := zoneLines(rrs, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypePTR })
		if name == "kubernetes" {
			if len(ptrs) != 0 {
				t.Errorf("the in-tree plugin's reverse AXFR has PTR records now (README says none): %q", ptrs)
			}
			continue
		}
		for _, w := range wantPTR {
			if !slices.Contains(ptrs, w) {
				t.Errorf("kubetree's AXFR in-addr.arpa lacks %q", w)
			}
			name, _, _ := strings.Cut(w, " ")
			if got := zoneLines(p.kubetree.query(t, "tcp", name, dns.TypePTR).Answer, func(dns.RR) bool { return true }); !slices.Equal(got, []string{w}) {
				t.Errorf("PTR %s answers %q, the transfer %q", name, got, w)
			}
		}
	}

	// A change: NOTIFY, and IXFR from the serial before it is the change.
	before := soaSerial(t, kt)
	notified := notify.count("cluster.local.")
	api := createService(t, k8stest.ClusterIPService(ns, "api", nil, k8stest.TCP("http", 8080)))
	eventually(t, "NOTIFY for cluster.local after the change", 30*time.Second, func() bool { return notify.count("cluster.local.") > notified })
	p.kubetree.waitAnswer(t, svcName(ns, "api"), dns.TypeA, api.Spec.ClusterIP)
	rrs, rc := p.kubetree.transferIn(t, "cluster.local.", before)
	if rc != dns.RcodeSuccess {
		t.Fatalf("IXFR: %s", dns.RcodeToString[rc])
	}
	var soas []int
	for i, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeSOA {
			soas = append(soas, i)
		}
	}
	if len(soas) != 4 || soas[0] != 0 || soas[1] != 1 || soas[3] != len(rrs)-1 || rrs[1].(*dns.SOA).Serial != before {
		t.Fatalf("IXFR from %d is not the condensed difference: %v", before, rrs)
	}
	apiName := svcName(ns, "api")
	wantAdded := zoneLines([]dns.RR{
		mustRR(t, apiName+" 5 IN A "+api.Spec.ClusterIP),
		mustRR(t, apiName+" 5 IN SRV 0 100 8080 "+apiName),
		mustRR(t, "_http._tcp."+apiName+" 5 IN SRV 0 100 8080 "+apiName),
	}, func(dns.RR) bool { return true })
	deleted := zoneLines(rrs[2:soas[2]], func(dns.RR) bool { return true })
	added := zoneLines(rrs[soas[2]+1:soas[3]], func(dns.RR) bool { return true })
	if len(deleted) != 0 || !slices.Equal(added, wantAdded) {
		t.Errorf("IXFR from %d: deleted %q, added %q; want nothing deleted and %q", before, deleted, added, wantAdded)
	}
	// From the current serial: the SOA alone.
	now := rrs[0].(*dns.SOA).Serial
	if cur, _ := p.kubetree.transferIn(t, "cluster.local.", now); len(cur) != 1 {
		t.Errorf("IXFR from the current serial %d: %d records, want the SOA alone", now, len(cur))
	}
}

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// TestTransferRefused: without the transfer plugin AXFR is refused, and with it only the hosts
// its to line names get one.
func TestTransferRefused(t *testing.T) {
	for _, plugins := range [][]string{nil, {"transfer {\n        to 192.0.2.53\n    }"}} {
		c := startCoreDNSWith(t, plugins)
		eventually(t, "ready", 30*time.Second, c.isReady)
		for _, zone := range []string{"cluster.local.", "in-addr.arpa."} {
			if rrs, rc := c.transferIn(t, zone, 0); rc != dns.RcodeRefused {
				t.Errorf("with %q: AXFR %s from 127.0.0.1: %s, %d records; want REFUSED", plugins, zone, dns.RcodeToString[rc], len(rrs))
			}
		}
	}
}

// TestNameserverTransferSameAsKubernetes: with namespaces leaving out the namespace of the cluster
// DNS Service this server is behind, NS answers and AXFR name the same nameserver, the Service
// (not ns.dns.<zone>), with its cluster IP, in kubetree as in the in-tree plugin (whose transfer
// gives the address TTL 0, a listed difference).
func TestNameserverTransferSameAsKubernetes(t *testing.T) {
	var self string // an address of this machine the in-tree plugin also finds
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil && ip.To4() != nil && !ip.IsLoopback() {
			self = ip.String()
			break
		}
	}
	if self == "" {
		t.Skip("no non-loopback IPv4 address on this machine to be an endpoint")
	}
	dnsNS, served := newNamespace(t, "xfr-dns"), newNamespace(t, "xfr-served")
	svc := createService(t, k8stest.ClusterIPService(dnsNS, "dns", nil, k8stest.UDP("dns", 53)))
	applySlice(t, k8stest.Slice(dnsNS, "dns", "dns-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolUDP, 53)),
		k8stest.Endpoint{Addrs: []string{self}}))
	p := startPair(t, []string{unbound, "transfer {\n        to 127.0.0.1\n    }"}, "namespaces "+served)
	nameserver := svcName(dnsNS, "dns")
	for _, c := range p.both() {
		eventually(t, c.directive+"'s NS names the DNS Service", 30*time.Second, func() bool {
			m := c.query(t, "tcp", "cluster.local.", dns.TypeNS)
			return len(m.Answer) == 1 && m.Answer[0].(*dns.NS).Ns == nameserver
		})
	}
	withoutTTL := func(lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			f := strings.Fields(l)
			out[i] = strings.Join(append(f[:1:1], f[2:]...), " ")
		}
		return out
	}
	want := []string{"cluster.local. IN NS " + nameserver, nameserver + " IN A " + svc.Spec.ClusterIP}
	for _, c := range p.both() {
		rrs, rc := c.transferIn(t, "cluster.local.", 0)
		if rc != dns.RcodeSuccess {
			t.Fatalf("%s: AXFR %s", c.directive, dns.RcodeToString[rc])
		}
		carried := withoutTTL(zoneLines(rrs, func(rr dns.RR) bool {
			return rr.Header().Rrtype == dns.TypeNS || rr.Header().Name == nameserver || strings.HasPrefix(rr.Header().Name, "ns.dns.")
		}))
		m := c.query(t, "tcp", "cluster.local.", dns.TypeNS)
		answered := withoutTTL(zoneLines(append(m.Answer, m.Extra...), func(dns.RR) bool { return true }))
		if !slices.Equal(carried, want) || !slices.Equal(answered, want) {
			t.Errorf("%s: the nameserver in AXFR %q, in the NS answer %q; want both %q", c.directive, carried, answered, want)
		}
	}
}
