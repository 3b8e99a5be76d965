package plugin_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	_ "github.com/coredns/coredns/plugin/file" // the file directive, for chainOf
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree"
	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"
	"github.com/kubetree/kubetree/internal/probe"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// isolatedCluster is three namespaces, each with a pod, a ClusterIP service and a headless one
// (an endpoint with a hostname and a named port), a fourth namespace labelled shared=yes, the
// kubernetes Service in default, and a host-network pod.
func isolatedCluster() []runtime.Object {
	objs := []runtime.Object{
		k8stest.Namespace("default"),
		k8stest.ClusterIPService("default", "kubernetes", []string{"10.96.0.1"}, k8stest.TCP("https", 443)),
		k8stest.ClusterIPService("default", "web", []string{"10.96.0.2"}, k8stest.TCP("http", 80)),
		k8stest.WithLabels(k8stest.Namespace("shared"), "shared", "yes"),
		k8stest.ClusterIPService("shared", "cache", []string{"10.96.4.1"}, k8stest.TCP("redis", 6379)),
	}
	hostNet := k8stest.Pod("kube-system", "node-agent", "10.244.9.1")
	hostNet.Spec.HostNetwork = true
	objs = append(objs, k8stest.Namespace("kube-system"), hostNet)
	for i, ns := range []string{"red", "green", "blue"} {
		n := string(rune('1' + i))
		objs = append(objs, k8stest.Namespace(ns),
			k8stest.Pod(ns, "client", "10.244."+n+".5"),
			k8stest.ClusterIPService(ns, "api", []string{"10.96." + n + ".1"}, k8stest.TCP("http", 80)),
			k8stest.HeadlessService(ns, "db", k8stest.TCP("sql", 5432)),
			k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("sql", api.ProtocolTCP, 5432)),
				k8stest.Endpoint{Addrs: []string{"10.244." + n + ".10"}, Hostname: "db-0"}))
	}
	return objs
}

// TestIsolate: with isolate, a client pod resolves its own namespace, default and the labelled
// namespaces; every other namespace's names are NXDOMAIN to it (A, SRV, endpoint names, PTR,
// pod names, the namespace itself), counted. Unidentified clients see the open namespaces only
// under refuse, everything under allow.
func TestIsolate(t *testing.T) {
	const red, green, stranger, hostNet = "10.244.1.5", "10.244.2.5", "10.240.9.9", "10.244.9.1"
	c := plugintest.StartCluster(t, "kubetree cluster.local in-addr.arpa {\n\tpods verified\n\tisolate refuse\n\tisolate_labels shared=yes\n}", isolatedCluster()...)
	k := c.Plugin
	counted := func(client string) float64 {
		return testutil.ToFloat64(c.Metrics.Isolated(client))
	}
	type seen struct {
		rcode  int
		answer []string
	}
	nx := seen{dns.RcodeNameError, []string{}}
	cases := []struct {
		rule, source, name string
		qtype              uint16
		want               seen
		hidden             bool
	}{
		{"its own service", red, "api.red.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("api.red.svc.cluster.local.", "10.96.1.1")}}, false},
		{"its own headless service", red, "db.red.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("db.red.svc.cluster.local.", "10.244.1.10")}}, false},
		{"its own endpoint name", red, "db-0.db.red.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("db-0.db.red.svc.cluster.local.", "10.244.1.10")}}, false},
		{"its own SRV", red, "_sql._tcp.db.red.svc.cluster.local.", dns.TypeSRV, seen{dns.RcodeSuccess, []string{plugintest.RecSRV("_sql._tcp.db.red.svc.cluster.local.", 100, 5432, "db-0.db.red.svc.cluster.local.")}}, false},
		{"its own endpoint's PTR", red, "10.1.244.10.in-addr.arpa.", dns.TypePTR, seen{dns.RcodeSuccess, []string{plugintest.RecPTR("10.1.244.10.in-addr.arpa.", "db-0.db.red.svc.cluster.local.")}}, false},
		{"its own namespace, in upper case", red, "API.RED.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("API.RED.svc.cluster.local.", "10.96.1.1")}}, false},
		{"a service in default", red, "web.default.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("web.default.svc.cluster.local.", "10.96.0.2")}}, false},
		{"a labelled namespace", red, "cache.shared.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("cache.shared.svc.cluster.local.", "10.96.4.1")}}, false},
		{"another namespace's service", red, "api.green.svc.cluster.local.", dns.TypeA, nx, true},
		{"another namespace's service, AAAA", red, "api.green.svc.cluster.local.", dns.TypeAAAA, nx, true},
		{"another namespace's headless service", red, "db.green.svc.cluster.local.", dns.TypeA, nx, true},
		{"another namespace's endpoint name", red, "db-0.db.green.svc.cluster.local.", dns.TypeA, nx, true},
		{"another namespace's SRV", red, "_sql._tcp.db.green.svc.cluster.local.", dns.TypeSRV, nx, true},
		{"another namespace's SRV of a ClusterIP service", red, "_http._tcp.api.blue.svc.cluster.local.", dns.TypeSRV, nx, true},
		{"another namespace's cluster IP PTR", red, "1.2.96.10.in-addr.arpa.", dns.TypePTR, nx, true},
		{"another namespace's endpoint PTR", red, "10.2.244.10.in-addr.arpa.", dns.TypePTR, nx, true},
		{"another namespace itself", red, "green.svc.cluster.local.", dns.TypeA, nx, true},
		{"another namespace's pod name", red, "10-244-2-5.green.pod.cluster.local.", dns.TypeA, nx, true},
		{"its own pod name", red, "10-244-1-5.red.pod.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("10-244-1-5.red.pod.cluster.local.", "10.244.1.5")}}, false},
		{"the other pod, from its own namespace", green, "api.green.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("api.green.svc.cluster.local.", "10.96.2.1")}}, false},
		{"the other pod, not the first's", green, "api.red.svc.cluster.local.", dns.TypeA, nx, true},
		{"the apex", red, "cluster.local.", dns.TypeNS, seen{dns.RcodeSuccess, []string{"cluster.local. 5 IN NS ns.dns.cluster.local."}}, false},
		{"dns-version", red, "dns-version.cluster.local.", dns.TypeTXT, seen{dns.RcodeSuccess, []string{`dns-version.cluster.local. 28800 IN TXT "1.1.0"`}}, false},
		{"svc.<zone>", red, "svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{}}, false},
		{"a name that does not exist in its namespace", red, "nothing.red.svc.cluster.local.", dns.TypeA, nx, false},
		{"unidentified under refuse: default", stranger, "web.default.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("web.default.svc.cluster.local.", "10.96.0.2")}}, false},
		{"unidentified under refuse: a labelled namespace", stranger, "cache.shared.svc.cluster.local.", dns.TypeA, seen{dns.RcodeSuccess, []string{plugintest.RecA("cache.shared.svc.cluster.local.", "10.96.4.1")}}, false},
		{"unidentified under refuse: any other", stranger, "api.red.svc.cluster.local.", dns.TypeA, nx, true},
		{"a host-network pod is unidentified", hostNet, "api.red.svc.cluster.local.", dns.TypeA, nx, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			client := "pod"
			if tc.source == stranger || tc.source == hostNet {
				client = "unidentified"
			}
			before := counted(client)
			rcode, answer, _ := askFrom(t, k, tc.source, tc.name, tc.qtype)
			want := plugintest.ZoneText(plugintest.ParseRRs(t, tc.want.answer...))
			if rcode != tc.want.rcode || !slices.Equal(answer, want) {
				t.Errorf("%s %s from %s: %s %q, want %s %q", tc.name, dns.TypeToString[tc.qtype], tc.source,
					dns.RcodeToString[rcode], answer, dns.RcodeToString[tc.want.rcode], want)
			}
			if n := counted(client) - before; n != map[bool]float64{true: 1}[tc.hidden] {
				t.Errorf("isolated_total{client=%q} grew by %v, want %v", client, n, map[bool]float64{true: 1}[tc.hidden])
			}
		})
	}

	// The kubernetes Service in default is every client's, even when default is not open.
	closed := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n\tisolate refuse red\n}", isolatedCluster()...)
	for _, tc := range []struct {
		name  string
		rcode int
	}{
		{"kubernetes.default.svc.cluster.local.", dns.RcodeSuccess},
		{"web.default.svc.cluster.local.", dns.RcodeNameError},
		{"api.red.svc.cluster.local.", dns.RcodeSuccess},
	} {
		if rcode, _, _ := askFrom(t, closed.Plugin, green, tc.name, dns.TypeA); rcode != tc.rcode {
			t.Errorf("isolate refuse red: %s from green: %s, want %s", tc.name, dns.RcodeToString[rcode], dns.RcodeToString[tc.rcode])
		}
	}
	// Under allow, a client that is no known pod resolves everything; a pod is still isolated.
	allow := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n\tisolate allow\n}", isolatedCluster()...)
	if rcode, _, _ := askFrom(t, allow.Plugin, stranger, "api.red.svc.cluster.local.", dns.TypeA); rcode != dns.RcodeSuccess {
		t.Errorf("isolate allow: another namespace from an unidentified client: %s, want NOERROR", dns.RcodeToString[rcode])
	}
	if rcode, _, _ := askFrom(t, allow.Plugin, green, "api.red.svc.cluster.local.", dns.TypeA); rcode != dns.RcodeNameError {
		t.Errorf("isolate allow: another namespace from a pod: %s, want NXDOMAIN", dns.RcodeToString[rcode])
	}
}

// TestIsolateFollowsNamespaceLabels: a namespace that gains the label opens to every client, and
// closes when it loses it.
func TestIsolateFollowsNamespaceLabels(t *testing.T) {
	const red = "10.244.1.5"
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n\tisolate refuse\n\tisolate_labels shared=yes\n}", isolatedCluster()...)
	rcodeOf := func() int { r, _, _ := askFrom(t, c.Plugin, red, "api.blue.svc.cluster.local.", dns.TypeA); return r }
	if r := rcodeOf(); r != dns.RcodeNameError {
		t.Fatalf("blue before it is labelled: %s, want NXDOMAIN", dns.RcodeToString[r])
	}
	c.Update(t, k8stest.WithLabels(k8stest.Namespace("blue"), "shared", "yes"))
	plugintest.WaitFor(t, "blue open once labelled", func() bool { return rcodeOf() == dns.RcodeSuccess })
	c.Update(t, k8stest.WithLabels(k8stest.Namespace("blue"), "shared", "no"))
	plugintest.WaitFor(t, "blue closed once the label changes", func() bool { return rcodeOf() == dns.RcodeNameError })
}

// TestIsolateAutoPath: autopath searches the client's own namespace first, and a name isolation
// hides is not found through the search path either.
func TestIsolateAutoPath(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n\tisolate refuse\n}", isolatedCluster()...)
	state := plugintest.From("10.244.1.5", "api.red.svc.cluster.local.", nil)
	path := c.AutoPath(state)
	if len(path) == 0 || path[0] != "red.svc.cluster.local." {
		t.Fatalf("search path %q, want the client's namespace first", path)
	}
	for _, search := range path {
		if search == "" {
			continue
		}
		name := "api.green." + search
		if rcode, _, _ := askFrom(t, c.Plugin, "10.244.1.5", name, dns.TypeA); rcode != dns.RcodeNameError {
			t.Errorf("%s through the search path: %s, want NXDOMAIN", name, dns.RcodeToString[rcode])
		}
	}
}

// BenchmarkServeDNSIsolated is what isolate costs per query: a client pod asking for a name of
// its own namespace, of the open default, of another namespace (hidden), and a PTR.
func BenchmarkServeDNSIsolated(b *testing.B) {
	c := plugintest.StartCluster(b, "kubetree cluster.local in-addr.arpa {\n\tpods verified\n\tisolate refuse\n}", isolatedCluster()...)
	ctx := context.Background()
	w := &plugintest.FixedAddrWriter{Addr: &net.UDPAddr{IP: net.ParseIP("10.244.1.5"), Port: 40212}}
	for _, bc := range []struct {
		name, qname string
		qtype       uint16
		rcode       int
	}{
		{"A own namespace", "api.red.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess},
		{"A default", "web.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess},
		{"A hidden", "api.green.svc.cluster.local.", dns.TypeA, dns.RcodeNameError},
		{"PTR own", "10.1.244.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess},
		{"PTR hidden", "10.2.244.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
	} {
		if rcode, _, _ := askFrom(b, c.Plugin, "10.244.1.5", bc.qname, bc.qtype); rcode != bc.rcode {
			b.Fatalf("%s: %s, want %s", bc.name, dns.RcodeToString[rcode], dns.RcodeToString[bc.rcode])
		}
		r := new(dns.Msg)
		r.SetQuestion(bc.qname, bc.qtype)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.ServeDNS(ctx, w, r)
			}
		})
	}
}

// TestCacheBypassedForPerClientAnswers: with isolate or topology an answer is made for its client,
// so kubetree asks the cache plugin of its server block (cache.ZoneBypasser) to bypass every zone
// of the stanza; without them, nothing.
func TestCacheBypassedForPerClientAnswers(t *testing.T) {
	var _ interface{ CacheBypassZones() []string } = (*kubetree.Kubetree)(nil) // cache.ZoneBypasser
	for _, tc := range []struct {
		options string
		want    []string
	}{
		{"", nil},
		{"pods verified", nil},
		{"pods verified\n\tisolate refuse", []string{"cluster.local.", "in-addr.arpa."}},
		{"pods verified\n\ttopology", []string{"cluster.local.", "in-addr.arpa."}},
	} {
		k, _ := plugintest.Wired(t, "kubetree cluster.local in-addr.arpa {\n\t"+tc.options+"\n}")
		if got := k.CacheBypassZones(); !slices.Equal(got, tc.want) {
			t.Errorf("%q: the cache bypasses %v, want %v", tc.options, got, tc.want)
		}
	}
}

// TestExplainSeesWhatTheClientSees: /explain with client= answers what that client gets, isolation
// included, and says that isolate hid the name; the self-probe still resolves every name; and
// neither counts in coredns_kubetree_isolated_total, which counts clients' queries.
func TestExplainSeesWhatTheClientSees(t *testing.T) {
	const red, green = "10.244.1.5", "10.244.2.5"
	// The probe asks a name that isolate hides from every client but red's.
	c := plugintest.StartCluster(t, "kubetree cluster.local in-addr.arpa {\n\tpods verified\n\tisolate refuse\n\tprobe api.red.svc.cluster.local\n}", isolatedCluster()...)
	plugintest.WaitFor(t, "the client pods indexed", func() bool {
		return c.Pods.ClientAt(netip.MustParseAddr(red)) != nil && c.Pods.ClientAt(netip.MustParseAddr(green)) != nil
	})
	counted := func() float64 {
		return testutil.ToFloat64(c.Metrics.Isolated("pod")) + testutil.ToFloat64(c.Metrics.Isolated("unidentified"))
	}
	before := counted()
	ex := explainerOf(c)
	for _, tc := range []struct {
		rule, name string
		qtype      uint16
		client     string
		rcode      string
		reason     string
		answers    int
	}{
		{"its own namespace", "api.red.svc.cluster.local.", dns.TypeA, red, "NOERROR", explainapi.ReasonService, 1},
		{"another namespace: hidden", "api.red.svc.cluster.local.", dns.TypeA, green, "NXDOMAIN", explainapi.ReasonIsolated, 0},
		{"another namespace's endpoint: hidden", "db-0.db.red.svc.cluster.local.", dns.TypeA, green, "NXDOMAIN", explainapi.ReasonIsolated, 0},
		{"an open namespace", "web.default.svc.cluster.local.", dns.TypeA, green, "NOERROR", explainapi.ReasonService, 1},
		{"no known pod, under isolate refuse", "api.red.svc.cluster.local.", dns.TypeA, "10.240.9.9", "NXDOMAIN", explainapi.ReasonIsolated, 0},
		{"a PTR of another namespace's address", "1.1.96.10.in-addr.arpa.", dns.TypePTR, green, "NXDOMAIN", explainapi.ReasonIsolated, 0},
	} {
		x := ex.Explain(context.Background(), tc.name, tc.qtype, netip.MustParseAddr(tc.client))
		if x.Rcode != tc.rcode || x.Reason != tc.reason || len(x.Answer) != tc.answers {
			t.Errorf("%s: %s from %s: %s %s %v (%s); want %s %s and %d answers", tc.rule, tc.name, tc.client, x.Rcode, x.Reason, x.Answer, x.Why, tc.rcode, tc.reason, tc.answers)
		}
		// What the client itself gets over ServeDNS is the same.
		if rcode, answers, _ := askFrom(t, c.Plugin, tc.client, tc.name, tc.qtype); dns.RcodeToString[rcode] != x.Rcode || len(answers) != len(x.Answer) {
			t.Errorf("%s: the client gets %s %v, explain says %s %v", tc.rule, dns.RcodeToString[rcode], answers, x.Rcode, x.Answer)
		}
	}
	after := counted()
	if got := after - before; got != 4 { // the four hidden queries the clients asked, not explain's
		t.Errorf("isolated_total grew by %v, want 4: explain's queries are not the clients'", got)
	}
	probed := plugintest.CountsOf(t, c.Metrics).Results[probe.ResultSuccess]
	probe.New(c.Probe, c.Answerer, c.Metrics).Probe()
	if got := plugintest.CountsOf(t, c.Metrics).Results[probe.ResultSuccess]; got != probed+1 {
		t.Error("the self-probe does not find api.red under isolate refuse")
	}
	if got := counted() - after; got != 0 {
		t.Errorf("the probe counted in isolated_total (%v)", got)
	}
}

// chainOf is a server of one block (zone .) whose chain is cache, file and k, made by the plugins'
// own setup from corefile lines, as CoreDNS makes it: the file plugin's upstream lookups re-enter
// the server through the chain, as they do in a running CoreDNS.
func chainOf(t *testing.T, k *plugintest.Plugin, lines ...string) *dnsserver.Server {
	t.Helper()
	cfg := &dnsserver.Config{Zone: ".", Port: "53", ListenHosts: []string{""}}
	for _, line := range lines {
		directive, _, _ := strings.Cut(line, " ")
		c := caddy.NewTestController("dns", line)
		setup, err := caddy.DirectiveAction("dns", directive)
		if err != nil {
			t.Fatal(err)
		}
		if err := setup(c); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		cfg.Plugin = append(cfg.Plugin, dnsserver.GetConfig(c).Plugin...)
	}
	cfg.Plugin = append(cfg.Plugin, func(next plugin.Handler) plugin.Handler { k.Next = next; return k })
	s, err := dnsserver.NewServer("dns://:53", []*dnsserver.Config{cfg})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestIsolateThroughAnotherPluginsCNAME: a name of another plugin (file) that is a CNAME into an
// isolated namespace, behind cache: the file plugin resolves the target through CoreDNS itself,
// and the reply it builds, which the cache keeps for every client, carries kubetree's answer. So
// that answer is every client's: whichever pod asks first, no pod of another namespace gets the
// address (A, SRV target, the owner's own pod after another asked first), and a CNAME into an
// open namespace resolves for all.
func TestIsolateThroughAnotherPluginsCNAME(t *testing.T) {
	const red, green = "10.244.1.5", "10.244.2.5"
	c := plugintest.StartCluster(t, "kubetree cluster.local in-addr.arpa {\n\tpods verified\n\tisolate refuse\n\tisolate_labels shared=yes\n}", isolatedCluster()...)
	zone := filepath.Join(t.TempDir(), "db.corp.example")
	if err := os.WriteFile(zone, []byte(`$ORIGIN corp.example.
@       3600 IN SOA ns.corp.example. hostmaster.corp.example. 1 7200 3600 1209600 3600
@       3600 IN NS  ns.corp.example.
ns      3600 IN A   192.0.2.53
a-api   3600 IN CNAME api.red.svc.cluster.local.
a-db    3600 IN CNAME db-0.db.red.svc.cluster.local.
cache   3600 IN CNAME cache.shared.svc.cluster.local.
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := chainOf(t, c.Plugin, "cache 30 .", "file "+zone+" corp.example")
	ask := func(source, name string, qtype uint16) (int, []string) {
		t.Helper()
		w := dnstest.NewRecorder(&test.ResponseWriter{RemoteIP: source})
		r := new(dns.Msg)
		r.SetQuestion(name, qtype)
		s.ServeDNS(context.WithValue(context.Background(), dnsserver.Key{}, s), w, r)
		if w.Msg == nil {
			t.Fatalf("%s %s from %s: no reply", name, dns.TypeToString[qtype], source)
		}
		var answer []string
		for _, rr := range w.Msg.Answer {
			answer = append(answer, dns.Type(rr.Header().Rrtype).String()+" "+strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
		return w.Msg.Rcode, answer
	}
	for _, tc := range []struct {
		rule, name string
		qtype      uint16
		first      string // the client that asks first
	}{
		{"the owner asks first, then another namespace", "a-api.corp.example.", dns.TypeA, red},
		{"another namespace asks first, then the owner", "a-db.corp.example.", dns.TypeA, green},
	} {
		firstCode, firstAnswer := ask(tc.first, tc.name, tc.qtype)
		for _, source := range []string{red, green, red} {
			code, answer := ask(source, tc.name, tc.qtype)
			if code != firstCode || !slices.Equal(answer, firstAnswer) {
				t.Errorf("%s: %s from %s: %s %v, but the first asker got %s %v: one client's answer served to another",
					tc.rule, tc.name, source, dns.RcodeToString[code], answer, dns.RcodeToString[firstCode], firstAnswer)
			}
			for _, rr := range answer {
				if strings.HasPrefix(rr, "A ") {
					t.Errorf("%s: %s from %s: %v: the address of a name of an isolated namespace, in a reply the cache keeps for every client", tc.rule, tc.name, source, answer)
				}
			}
		}
	}
	for _, source := range []string{red, green} {
		if code, answer := ask(source, "cache.corp.example.", dns.TypeA); code != dns.RcodeSuccess || !slices.Contains(answer, "A 10.96.4.1") {
			t.Errorf("a CNAME into the open namespace, from %s: %s %v, want its address", source, dns.RcodeToString[code], answer)
		}
	}
	if code, _ := ask(green, "api.red.svc.cluster.local.", dns.TypeA); code != dns.RcodeNameError {
		t.Errorf("api.red from green's pod, directly: %s, want NXDOMAIN", dns.RcodeToString[code])
	}
}
