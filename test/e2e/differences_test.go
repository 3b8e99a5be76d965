package e2e

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// README's "Differences from the kubernetes plugin" claims to list every way kubetree's answers
// differ from the in-tree plugin's. Here each difference is a bullet of that section (found by a
// phrase of it), questions whose replies from both plugins are spelled out, and a rule that
// recognizes it; TestDifferencesFromKubernetes runs both plugins side by side on one API server,
// asks those questions over UDP, UDP with EDNS0 and TCP, and then sweeps a table of names around the
// same objects with every type, failing on a difference that no bullet explains.

// nameKind is what a name of the sweep is, as far as the differences care.
type nameKind int

const (
	kindApex           nameKind = iota // a zone's apex
	kindBetween                        // svc.<zone>, pod.<zone>, <ns>.svc.<zone>, <ns>.pod.<zone>
	kindNSDNS                          // ns.dns.<zone>
	kindVersion                        // dns-version.<zone>
	kindService                        // <svc>.<ns>.svc.<zone>, ClusterIP or headless
	kindExternalName                   // <svc>.<ns>.svc.<zone> of an ExternalName service
	kindEndpoint                       // <endpoint>.<svc>.<ns>.svc.<zone>
	kindPort                           // _<port>._<proto>.<svc>.<ns>.svc.<zone>
	kindProto                          // _<proto>.<svc>.<ns>.svc.<zone>
	kindPod                            // <address>.<ns>.pod.<zone>, the address as the API server has it
	kindPodSpelling                    // the same pod, its IPv6 address spelled otherwise
	kindPTR                            // an address with a PTR record, in a reverse zone
	kindPartialReverse                 // a name between a reverse zone's apex and a PTR name
	kindMissing                        // a name that does not exist
)

// sweepName is one name the sweep asks about.
type sweepName struct {
	name string
	kind nameKind
}

// differencesNamespace holds the test's objects; dual is its dual-stack service.
const differencesNamespace = "differences"

// readmeDifference is one bullet of README's Differences section.
type readmeDifference struct {
	bullet string // words of the bullet, which the section must hold
	// explains reports whether kubetree's reply kt and the in-tree plugin's k8s to a question of
	// type qtype about n are this difference.
	explains func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool
}

// readmeDifferences: the bullets the sweep can meet around its objects. The first four were there
// before this file; the rest are spelled out question by question in TestDifferencesFromKubernetes.
var readmeDifferences = []readmeDifference{
	{bullet: "`_<proto>.<svc>.<ns>.svc.<zone>` is NODATA",
		explains: func(n sweepName, _ uint16, kt, k8s *dns.Msg) bool {
			return n.kind == kindProto && isNoData(kt) && isNXDomain(k8s)
		}},
	{bullet: "A dual-stack ClusterIP service's SRV record has weight 100, not 50.",
		explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
			dual := strings.HasSuffix(n.name, "dual."+differencesNamespace+".svc.cluster.local.")
			return dual && qtype == dns.TypeSRV &&
				sortedReply(kt) == strings.ReplaceAll(sortedReply(k8s), " IN SRV 0 50 ", " IN SRV 0 100 ")
		}},
	{bullet: "its SOA names `ns.dns.<first forward zone>`", // and so do the negative replies there
		explains: func(n sweepName, _ uint16, kt, k8s *dns.Msg) bool {
			return inReverseZone(n.name) && asInTree(sortedReply(kt)) == sortedReply(k8s)
		}},
	{bullet: "Outside a cluster DNS Service, NS names `ns.dns.<zone>` at the addresses the server answers on",
		explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
			nameserver := n.kind == kindApex && qtype == dns.TypeNS ||
				n.kind == kindNSDNS && (qtype == dns.TypeA || qtype == dns.TypeAAAA)
			return nameserver && len(kt.Answer) > 0 && isNoData(k8s)
		}},

	{bullet: bulletPortName, explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
		address := qtype == dns.TypeA || qtype == dns.TypeAAAA
		return n.kind == kindPort && address && isNoData(kt) && isAnswer(k8s, n.name, qtype)
	}},
	{bullet: bulletExternalName, explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
		cname := kt.Rcode == dns.RcodeSuccess && len(kt.Answer) > 0 && kt.Answer[0].Header().Rrtype == dns.TypeCNAME &&
			kt.Answer[0].Header().Name == n.name
		other := !slices.Contains([]uint16{dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeANY}, qtype)
		return n.kind == kindExternalName && other && cname && isNoData(k8s)
	}},
	{bullet: bulletNoRecords, explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
		listed := qtype == dns.TypeTXT && slices.Contains([]nameKind{kindApex, kindBetween, kindNSDNS}, n.kind) ||
			qtype == dns.TypePTR && n.kind == kindNSDNS ||
			qtype != dns.TypeTXT && qtype != dns.TypeSOA && n.kind == kindVersion
		return listed && isNoData(kt) && isNXDomain(k8s)
	}},
	{bullet: bulletReverse, explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
		listed := n.kind == kindPTR && qtype != dns.TypePTR || n.kind == kindPartialReverse
		return listed && qtype != dns.TypeSOA && isNoData(kt) && isNXDomain(k8s)
	}},
	{bullet: bulletSOA, explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
		return n.kind == kindMissing && qtype == dns.TypeSOA && isNXDomain(kt) && isNoData(k8s)
	}},
	{bullet: bulletPodSpelling, explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
		resolves := qtype == dns.TypeAAAA && isAnswer(kt, n.name, qtype) || qtype != dns.TypeAAAA && isNoData(kt)
		return n.kind == kindPodSpelling && resolves && isNXDomain(k8s)
	}},
	{bullet: bulletPodSRV, explains: func(n sweepName, qtype uint16, kt, k8s *dns.Msg) bool {
		if n.kind != kindPod || qtype != dns.TypeSRV || !isNoData(kt) || !isAnswer(k8s, n.name, qtype) {
			return false
		}
		srv := k8s.Answer[0].(*dns.SRV)
		return len(k8s.Answer) == 1 && srv.Port == 0 && strings.EqualFold(srv.Target, n.name)
	}},
}

// The phrases of the bullets this file spells out.
const (
	bulletPortName     = "A and AAAA there are NODATA"
	bulletExternalName = "the in-tree plugin answers the CNAME for A, AAAA and CNAME only"
	bulletNoRecords    = "every type but TXT and SOA at `dns-version.<zone>`"
	bulletReverse      = "a name between the zone's apex and an address"
	bulletSOA          = "the in-tree plugin answers SOA below a zone's apex NODATA"
	bulletPodSpelling  = "every spelling of the pod's IPv6 address names it"
	bulletPodSRV       = "an SRV record of port 0 with the pod name as its target"
)

// TestDifferencesListedInREADME: every difference this file knows is a bullet of README's
// "Differences from the kubernetes plugin".
func TestDifferencesListedInREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Differences from the kubernetes plugin\n")
	if !ok {
		t.Fatal(`README.md has no "## Differences from the kubernetes plugin" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	section = oneLine(section)
	for _, d := range readmeDifferences {
		if !strings.Contains(section, oneLine(d.bullet)) {
			t.Errorf("README's Differences section does not say %q", d.bullet)
		}
	}
}

var runsOfSpace = regexp.MustCompile(`\s+`)

// oneLine joins a bullet's wrapped lines.
func oneLine(s string) string { return runsOfSpace.ReplaceAllString(s, " ") }

// TestDifferencesFromKubernetes: kubetree and the in-tree plugin, with `pods verified` and autopath,
// differ exactly as README's bullets say, and nowhere else around the same objects.
func TestDifferencesFromKubernetes(t *testing.T) {
	ns := newNamespace(t, differencesNamespace)
	web := createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	dual := createService(t, k8stest.DualStack(k8stest.ClusterIPService(ns, "dual", nil, k8stest.TCP("http", 80))))
	if len(dual.Spec.ClusterIPs) != 2 {
		t.Fatalf("API server gave no dual-stack service: %v", dual.Spec.ClusterIPs)
	}
	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
		k8stest.Endpoint{Addrs: []string{"10.244.31.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.31.2"}}))
	createService(t, k8stest.HeadlessService(ns, "empty", k8stest.TCP("pg", 5432))) // no ready endpoint: no name
	applySlice(t, k8stest.Slice(ns, "empty", "empty-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
		k8stest.Endpoint{Addrs: []string{"10.244.31.3"}, NotReady: true}))
	createService(t, k8stest.ExternalNameService(ns, "docs", "www.example.org"))
	const client, v6 = "127.0.91.5", "2001:db8::5" // client's address is on loopback: it can ask
	runningPod(t, ns, "client", nil, client)
	runningPod(t, ns, "v6", nil, v6)

	p := startPair(t, []string{"autopath @plugin"}, "pods verified")
	p.waitAnswer(t, svcName(ns, "web"), dns.TypeA, web.Spec.ClusterIP)
	p.waitAnswer(t, svcName(ns, "db"), dns.TypeA, "10.244.31.1", "10.244.31.2")
	p.waitAnswer(t, "127-0-91-5."+ns+".pod.cluster.local.", dns.TypeA, client)
	p.waitAnswer(t, "2001-db8--5."+ns+".pod.cluster.local.", dns.TypeAAAA, v6)
	p.waitAnswer(t, svcName(ns, "dual"), dns.TypeAAAA, dual.Spec.ClusterIPs[1])
	p.waitAnswer(t, svcName(ns, "docs"), dns.TypeCNAME, "www.example.org.")

	var (
		svc      = func(name string) string { return svcName(ns, name) }
		pod      = func(label string) string { return label + "." + ns + ".pod.cluster.local." }
		webPTR   = arpaName(web.Spec.ClusterIP)
		dualPTR  = arpaName(dual.Spec.ClusterIPs[1])
		cluster  = soaLine("cluster.local.", "ns.dns.cluster.local.")
		v4       = soaLine("in-addr.arpa.", "ns.dns.cluster.local.") // kubetree's (listed)
		v4InTree = soaLine("in-addr.arpa.", "ns.dns.in-addr.arpa.")
	)

	t.Run("spelled out", func(t *testing.T) {
		for _, tc := range []struct {
			bullet     string
			name       string
			qtype      uint16
			kubetree   string // the reply, as sortedReply writes it
			kubernetes string
		}{
			{bulletPortName, "_http._tcp." + svc("web"), dns.TypeA,
				wantNoData(cluster), wantAnswer("_http._tcp." + svc("web") + " 5 IN A " + web.Spec.ClusterIP)},
			{bulletPortName, "_http._tcp." + svc("dual"), dns.TypeAAAA,
				wantNoData(cluster), wantAnswer("_http._tcp." + svc("dual") + " 5 IN AAAA " + dual.Spec.ClusterIPs[1])},
			{bulletPortName, "_pg._tcp." + svc("db"), dns.TypeA,
				wantNoData(cluster), wantAnswer("_pg._tcp."+svc("db")+" 5 IN A 10.244.31.1", "_pg._tcp."+svc("db")+" 5 IN A 10.244.31.2")},
			{bulletPortName + " (other types: NODATA in both)", "_http._tcp." + svc("web"), dns.TypeTXT,
				wantNoData(cluster), wantNoData(cluster)},

			{bulletExternalName, svc("docs"), dns.TypeTXT,
				wantAnswer(svc("docs") + " 5 IN CNAME www.example.org."), wantNoData(cluster)},
			{bulletExternalName, svc("docs"), dns.TypeSRV,
				wantAnswer(svc("docs") + " 5 IN CNAME www.example.org."), wantNoData(cluster)},
			{bulletExternalName, svc("docs"), dns.TypeMX,
				wantAnswer(svc("docs") + " 5 IN CNAME www.example.org."), wantNoData(cluster)},
			{bulletExternalName + " (A: the same)", svc("docs"), dns.TypeA,
				wantAnswer(svc("docs")+" 5 IN CNAME www.example.org.", "www.example.org. 60 IN A 192.0.2.1"),
				wantAnswer(svc("docs")+" 5 IN CNAME www.example.org.", "www.example.org. 60 IN A 192.0.2.1")},

			{bulletNoRecords, "cluster.local.", dns.TypeTXT, wantNoData(cluster), wantNXDomain(cluster)},
			{bulletNoRecords, ns + ".svc.cluster.local.", dns.TypeTXT, wantNoData(cluster), wantNXDomain(cluster)},
			{bulletNoRecords, ns + ".pod.cluster.local.", dns.TypeTXT, wantNoData(cluster), wantNXDomain(cluster)},
			{bulletNoRecords, "ns.dns.cluster.local.", dns.TypePTR, wantNoData(cluster), wantNXDomain(cluster)},
			{bulletNoRecords, "dns-version.cluster.local.", dns.TypeA, wantNoData(cluster), wantNXDomain(cluster)},

			{bulletReverse, webPTR, dns.TypeA, wantNoData(v4), wantNXDomain(v4InTree)},
			{bulletReverse, webPTR, dns.TypeTXT, wantNoData(v4), wantNXDomain(v4InTree)},
			{bulletReverse, "31.244.10.in-addr.arpa.", dns.TypePTR, wantNoData(v4), wantNXDomain(v4InTree)},
			{bulletReverse, "31.244.10.in-addr.arpa.", dns.TypeA, wantNoData(v4), wantNXDomain(v4InTree)},
			{bulletReverse + " (PTR at the address: the same)", webPTR, dns.TypePTR,
				wantAnswer(webPTR + " 5 IN PTR " + svc("web")), wantAnswer(webPTR + " 5 IN PTR " + svc("web"))},

			{bulletSOA, svc("empty"), dns.TypeSOA, wantNXDomain(cluster), wantNoData(cluster)},
			{bulletSOA, svc("missing"), dns.TypeSOA, wantNXDomain(cluster), wantNoData(cluster)},
			{bulletSOA + " (A: NXDOMAIN in both)", svc("empty"), dns.TypeA, wantNXDomain(cluster), wantNXDomain(cluster)},

			{bulletPodSpelling, pod("2001-db8-0-0-0-0-0-5"), dns.TypeAAAA,
				wantAnswer(pod("2001-db8-0-0-0-0-0-5") + " 5 IN AAAA " + v6), wantNXDomain(cluster)},
			{bulletPodSpelling, pod("2001-db8--0-5"), dns.TypeAAAA,
				wantAnswer(pod("2001-db8--0-5") + " 5 IN AAAA " + v6), wantNXDomain(cluster)},
			{bulletPodSpelling + " (the compressed spelling: the same)", pod("2001-db8--5"), dns.TypeAAAA,
				wantAnswer(pod("2001-db8--5") + " 5 IN AAAA " + v6), wantAnswer(pod("2001-db8--5") + " 5 IN AAAA " + v6)},

			{bulletPodSRV, pod("127-0-91-5"), dns.TypeSRV, wantNoData(cluster),
				wantAnswerExtra([]string{pod("127-0-91-5") + " 5 IN SRV 0 100 0 " + pod("127-0-91-5")},
					pod("127-0-91-5")+" 5 IN A "+client)},
			{bulletPodSRV, pod("2001-db8--5"), dns.TypeSRV, wantNoData(cluster),
				wantAnswerExtra([]string{pod("2001-db8--5") + " 5 IN SRV 0 100 0 " + pod("2001-db8--5")},
					pod("2001-db8--5")+" 5 IN AAAA "+v6)},
		} {
			for _, c := range carriers {
				kt := sortedReply(p.kubetree.askOver(t, c, "", tc.name, tc.qtype))
				k8s := sortedReply(p.kubernetes.askOver(t, c, "", tc.name, tc.qtype))
				if kt != tc.kubetree {
					t.Errorf("%s: %s %s over %s: kubetree answers\n  %s\nwant\n  %s",
						tc.bullet, tc.name, dns.TypeToString[tc.qtype], c.name, kt, tc.kubetree)
				}
				if k8s != tc.kubernetes {
					t.Errorf("%s: %s %s over %s: the in-tree plugin answers\n  %s\nwant\n  %s",
						tc.bullet, tc.name, dns.TypeToString[tc.qtype], c.name, k8s, tc.kubernetes)
				}
			}
		}
	})

	t.Run("through autopath", func(t *testing.T) {
		// The client's resolver appends its first search domain to the pod name it was given. The
		// in-tree plugin does not know the name at <zone>, so the search goes on to the host's search
		// path and the bare name, which forward sends to the stub (an A record for every name).
		spelled := pod("2001-db8-0-0-0-0-0-5")
		asked := spelled[:len(spelled)-len("cluster.local.")] + ns + ".svc.cluster.local."
		beyond := strings.TrimSuffix(spelled, "cluster.local.")
		if search := hostSearch(); len(search) > 0 {
			beyond += search[0]
		}
		for _, tc := range []struct {
			qtype                uint16
			kubetree, kubernetes string
		}{
			// kubetree: the pod, at <zone>. The in-tree plugin: the stub's reply for the bare name,
			// empty for AAAA.
			{dns.TypeAAAA,
				wantAnswer(asked+" 5 IN CNAME "+spelled, spelled+" 5 IN AAAA "+v6),
				notAuthoritative(wantAnswer())},
			// kubetree: the pod's name, without an A record. The in-tree plugin: the stub's A record
			// for the bare name.
			{dns.TypeA,
				wantNoData(cluster),
				notAuthoritative(wantAnswer(asked+" 60 IN CNAME "+beyond, beyond+" 60 IN A 192.0.2.1"))},
		} {
			for _, c := range carriers {
				kt := sortedReply(p.kubetree.askOver(t, c, client, asked, tc.qtype))
				k8s := sortedReply(p.kubernetes.askOver(t, c, client, asked, tc.qtype))
				if kt != tc.kubetree {
					t.Errorf("%s %s from the pod over %s: kubetree answers\n  %s\nwant\n  %s",
						asked, dns.TypeToString[tc.qtype], c.name, kt, tc.kubetree)
				}
				if k8s != tc.kubernetes {
					t.Errorf("%s %s from the pod over %s: the in-tree plugin answers\n  %s\nwant\n  %s",
						asked, dns.TypeToString[tc.qtype], c.name, k8s, tc.kubernetes)
				}
			}
		}
	})

	t.Run("sweep", func(t *testing.T) {
		names := []sweepName{
			{"cluster.local.", kindApex},
			{"in-addr.arpa.", kindApex},
			{"ip6.arpa.", kindApex},
			{"svc.cluster.local.", kindBetween},
			{"pod.cluster.local.", kindBetween},
			{ns + ".svc.cluster.local.", kindBetween},
			{ns + ".pod.cluster.local.", kindBetween},
			{"ns.dns.cluster.local.", kindNSDNS},
			{"dns-version.cluster.local.", kindVersion},
			{svc("web"), kindService},
			{svc("dual"), kindService},
			{svc("db"), kindService},
			{svc("docs"), kindExternalName},
			{"db-0." + svc("db"), kindEndpoint},
			{"10-244-31-2." + svc("db"), kindEndpoint},
			{"_http._tcp." + svc("web"), kindPort},
			{"_http._tcp." + svc("dual"), kindPort},
			{"_pg._tcp." + svc("db"), kindPort},
			{"_tcp." + svc("web"), kindProto},
			{"_tcp." + svc("db"), kindProto},
			{pod("127-0-91-5"), kindPod},
			{pod("2001-db8--5"), kindPod},
			{pod("2001-db8-0-0-0-0-0-5"), kindPodSpelling},
			{pod("2001-db8--0-5"), kindPodSpelling},
			{pod("2001-0db8--5"), kindPodSpelling},
			{webPTR, kindPTR},
			{dualPTR, kindPTR},
			{"1.31.244.10.in-addr.arpa.", kindPTR},
			{"2.31.244.10.in-addr.arpa.", kindPTR},
			{"31.244.10.in-addr.arpa.", kindPartialReverse},
			{"10.in-addr.arpa.", kindPartialReverse},
			{dualPTR[32:], kindPartialReverse}, // the /64
			{dualPTR[8:], kindMissing},         // inside the /64: not counted
			{"3.31.244.10.in-addr.arpa.", kindMissing},
			{"7.7.7.7.in-addr.arpa.", kindMissing},
			{svc("missing"), kindMissing},
			{svc("empty"), kindMissing},
			{"_http._udp." + svc("web"), kindMissing},
			{"_pg._tcp." + svc("empty"), kindMissing},
			{"_http._tcp." + svc("docs"), kindMissing},
			{"x." + svc("db"), kindMissing},
			{"web.nope.svc.cluster.local.", kindMissing},
			{"foo.cluster.local.", kindMissing},
			{pod("127-0-91-6"), kindMissing},
			{pod("127-000-91-5"), kindMissing},
		}
		types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeCNAME, dns.TypeSRV, dns.TypePTR,
			dns.TypeMX, dns.TypeNS, dns.TypeSOA, dns.TypeHTTPS, dns.TypeCAA, dns.TypeANY}
		seen := map[string]int{}
		for _, n := range names {
			for _, qtype := range types {
				for _, c := range carriers {
					kt := p.kubetree.askOver(t, c, "", n.name, qtype)
					k8s := p.kubernetes.askOver(t, c, "", n.name, qtype)
					if sortedReply(kt) == sortedReply(k8s) {
						continue
					}
					i := slices.IndexFunc(readmeDifferences, func(d readmeDifference) bool {
						return d.explains(n, qtype, kt, k8s)
					})
					if i < 0 || !sameSOA(kt, k8s, n.name) {
						t.Errorf("%s %s over %s: a difference README does not list:\n  kubetree:   %s\n  kubernetes: %s",
							n.name, dns.TypeToString[qtype], c.name, sortedReply(kt), sortedReply(k8s))
						continue
					}
					seen[readmeDifferences[i].bullet]++
				}
			}
		}
		// Each bullet is met, so that a rule that no longer matches anything shows.
		for _, d := range readmeDifferences {
			if seen[d.bullet] == 0 {
				t.Errorf("the sweep met no difference of %q", d.bullet)
			}
		}
	})
}

// carrier is how a question travels.
type carrier struct {
	name    string
	network string
	bufsize uint16 // EDNS0 UDP buffer size; 0 for none
}

var carriers = []carrier{{"UDP", "udp", 0}, {"UDP with EDNS0", "udp", 1232}, {"TCP", "tcp", 0}}

// askOver asks c one question over carrier, from source (a loopback address) unless it is "".
func (c *coreDNS) askOver(t testing.TB, over carrier, source, name string, qtype uint16) *dns.Msg {
	t.Helper()
	client := &dns.Client{Net: over.network, Timeout: 2 * time.Second}
	if source != "" {
		ip := net.ParseIP(source)
		client.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: ip}}
		if over.network == "tcp" {
			client.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		}
	}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if over.bufsize > 0 {
		m.SetEdns0(over.bufsize, false)
	}
	r, _, err := client.Exchange(m, c.addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], over.name, err)
	}
	if over.bufsize > 0 && r.IsEdns0() == nil {
		t.Errorf("%s %s over %s: the reply has no OPT record", name, dns.TypeToString[qtype], over.name)
	}
	return r
}

// soaLine is a zone's SOA record as sortedReply writes it (serial 0), with mname as its name server.
func soaLine(zone, mname string) string {
	return fmt.Sprintf("%s 5 IN SOA %s hostmaster.%s 0 7200 1800 86400 5", zone, mname, zone)
}

// The replies, as sortedReply writes them.
func wantNoData(soa string) string   { return "NOERROR aa |  | " + soa + " | " }
func wantNXDomain(soa string) string { return "NXDOMAIN aa |  | " + soa + " | " }
func wantAnswer(rrs ...string) string {
	return wantAnswerExtra(rrs)
}
func wantAnswerExtra(answer []string, extra ...string) string {
	answer, extra = slices.Sorted(slices.Values(answer)), slices.Sorted(slices.Values(extra))
	return "NOERROR aa | " + strings.Join(answer, "; ") + " |  | " + strings.Join(extra, "; ")
}
func notAuthoritative(reply string) string {
	return strings.Replace(reply, "NOERROR aa |", "NOERROR |", 1)
}

// isNoData: the name exists, without records of the type.
func isNoData(m *dns.Msg) bool { return isNegative(m, dns.RcodeSuccess) }

// isNXDomain: the name does not exist.
func isNXDomain(m *dns.Msg) bool { return isNegative(m, dns.RcodeNameError) }

// isNegative: an authoritative reply of rcode with no answer and the zone's SOA.
func isNegative(m *dns.Msg, rcode int) bool {
	return m.Rcode == rcode && m.Authoritative && len(m.Answer) == 0 &&
		len(m.Ns) == 1 && m.Ns[0].Header().Rrtype == dns.TypeSOA
}

// isAnswer: records of qtype, every one owned by name.
func isAnswer(m *dns.Msg, name string, qtype uint16) bool {
	if m.Rcode != dns.RcodeSuccess || !m.Authoritative || len(m.Answer) == 0 {
		return false
	}
	for _, rr := range m.Answer {
		if rr.Header().Rrtype != qtype || !strings.EqualFold(rr.Header().Name, name) {
			return false
		}
	}
	return true
}

// sameSOA: where both replies carry the zone's SOA in the authority section, it is the same record,
// but for the name server of a reverse zone's SOA (an older bullet).
func sameSOA(kt, k8s *dns.Msg, name string) bool {
	if len(kt.Ns) != 1 || len(k8s.Ns) != 1 {
		return true
	}
	a, b := sortedReply(&dns.Msg{Ns: kt.Ns}), sortedReply(&dns.Msg{Ns: k8s.Ns})
	if inReverseZone(name) {
		a = asInTree(a)
	}
	return a == b
}

func inReverseZone(name string) bool {
	return dns.IsSubDomain("in-addr.arpa.", name) || dns.IsSubDomain("ip6.arpa.", name)
}

// asInTree writes kubetree's reverse zone SOA as the in-tree plugin does: ns.dns.<reverse zone>.
func asInTree(reply string) string {
	for _, zone := range []string{"in-addr.arpa.", "ip6.arpa."} {
		reply = strings.ReplaceAll(reply, "IN SOA ns.dns.cluster.local. hostmaster."+zone,
			"IN SOA ns.dns."+zone+" hostmaster."+zone)
	}
	return reply
}

func arpaName(ip string) string {
	name, err := dns.ReverseAddr(ip)
	if err != nil {
		panic(err)
	}
	return name
}

// hostSearch is the host's search path, which the in-tree plugin's autopath appends after <zone>.
func hostSearch() []string {
	conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range conf.Search {
		out = append(out, strings.ToLower(dns.Fqdn(s)))
	}
	return out
}
