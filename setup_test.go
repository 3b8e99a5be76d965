package kubetree

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics/vars"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
)

// TestSetup checks what parse cannot: errors are wrapped with the plugin's name, and a good stanza
// adds the plugin to the server without starting anything.
func TestSetup(t *testing.T) {
	c := caddy.NewTestController("dns", "kubetree 10.0.0.0/8")
	if err := setup(c); err == nil || !strings.HasPrefix(err.Error(), "plugin/kubetree: ") {
		t.Errorf("want a parse error prefixed plugin/kubetree, got %v", err)
	}

	c = caddy.NewTestController("dns", "kubetree cluster.local {\n\tkubeconfig /nonexistent/kube.conf\n}")
	if err := setup(c); err == nil || !strings.HasPrefix(err.Error(), "plugin/kubetree: kubeconfig /nonexistent/kube.conf: ") {
		t.Errorf("want a client error prefixed plugin/kubetree and the option, got %v", err)
	}

	c = caddy.NewTestController("dns", "kubetree cluster.local {\n\tendpoint http://127.0.0.1:1\n}")
	if err := setup(c); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if n := len(dnsserver.GetConfig(c).Plugin); n != 1 {
		t.Errorf("%d plugins added, want 1", n)
	}
}

// TestStartupErrorsNameTheOption: an error of setup names the option and the value it comes from,
// not only what failed underneath (a file, a listener).
func TestStartupErrorsNameTheOption(t *testing.T) {
	for _, tc := range []struct {
		name, stanza string
		dnsPort      string   // the server block's port; "" as in a bare test controller
		listen       []string // the server block's bind addresses
		err          string   // "" for none
	}{
		{name: "a missing kubeconfig", stanza: "kubeconfig /nonexistent/a.conf",
			err: "plugin/kubetree: kubeconfig /nonexistent/a.conf: "},
		{name: "a second missing kubeconfig, with a context", stanza: "kubeconfig /nonexistent/b.conf other",
			err: "plugin/kubetree: kubeconfig /nonexistent/b.conf other: "},
		{name: "missing client certificates", stanza: "endpoint https://127.0.0.1:1\n\ttls /nonexistent/c.pem /nonexistent/k.pem /nonexistent/ca.pem",
			err: "plugin/kubetree: endpoint https://127.0.0.1:1 with tls /nonexistent/c.pem /nonexistent/k.pem /nonexistent/ca.pem: "},
		{name: "explain on the DNS port", stanza: "endpoint http://127.0.0.1:1\n\texplain :45053", dnsPort: "45053",
			err: "plugin/kubetree: explain :45053: this server block answers DNS on port 45053 there; give explain a port of its own, such as 127.0.0.1:9155"},
		{name: "explain on the DNS port of every address", stanza: "endpoint http://127.0.0.1:1\n\texplain 127.0.0.1:45053", dnsPort: "45053",
			err: "plugin/kubetree: explain 127.0.0.1:45053: this server block answers DNS on port 45053 there"},
		{name: "explain on the DNS port of the bound address", stanza: "endpoint http://127.0.0.1:1\n\texplain 127.0.0.1:45053", dnsPort: "45053",
			listen: []string{"::1", "127.0.0.1"}, err: "plugin/kubetree: explain 127.0.0.1:45053: this server block answers DNS on port 45053 there"},
		{name: "explain on the DNS port of another address", stanza: "endpoint http://127.0.0.1:1\n\texplain 127.0.0.2:45053", dnsPort: "45053",
			listen: []string{"127.0.0.1"}},
		{name: "explain on a port of its own", stanza: "endpoint http://127.0.0.1:1\n\texplain :9155", dnsPort: "45053"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := caddy.NewTestController("dns", "kubetree cluster.local {\n\t"+tc.stanza+"\n}")
			cfg := dnsserver.GetConfig(c)
			cfg.Port, cfg.ListenHosts = tc.dnsPort, tc.listen
			err := setup(c)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("setup: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("want an error starting %q, got %v", tc.err, err)
			}
		})
	}
}

// TestChecksBesideOtherPlugins: what the server block's other plugins make unsafe or impossible is
// refused as the instance starts, with the options of both plugins named: isolate beside a
// transfer to anyone of kubetree's zones, and explain on the prometheus plugin's address.
func TestChecksBesideOtherPlugins(t *testing.T) {
	for _, tc := range []struct {
		name, options, transfer, prometheus, err string
	}{
		{name: "isolate, and every name transferred to anyone", options: "pods verified\n\tisolate refuse", transfer: "transfer cluster.local {\n\tto *\n}",
			err: "isolate beside transfer cluster.local. { to * }: a zone transfer carries every name of cluster.local. to anyone who asks, whatever isolate hides; " +
				"name the secondaries in transfer's to (to 10.0.0.53), or leave cluster.local. out of transfer"},
		{name: "isolate, and every zone transferred to anyone", options: "pods verified\n\tisolate refuse", transfer: "transfer . {\n\tto 10.0.0.53 *\n}",
			err: "isolate beside transfer cluster.local. { to * }"},
		{name: "isolate, and transfers to named secondaries", options: "pods verified\n\tisolate refuse", transfer: "transfer cluster.local {\n\tto 10.0.0.53\n}"},
		{name: "isolate, and another zone transferred to anyone", options: "pods verified\n\tisolate refuse", transfer: "transfer example.org {\n\tto *\n}"},
		{name: "no isolate, and every name transferred to anyone", options: "pods verified", transfer: "transfer cluster.local {\n\tto *\n}"},
		{name: "explain on the prometheus address", options: "explain :9153", prometheus: ":9153",
			err: "explain :9153: the prometheus plugin of this server block listens on :9153; give explain a port of its own, such as 127.0.0.1:9155"},
		{name: "explain on every address, prometheus on one", options: "explain 0.0.0.0:9153", prometheus: "127.0.0.1:9153",
			err: "explain 0.0.0.0:9153: the prometheus plugin of this server block listens on 127.0.0.1:9153"},
		{name: "explain beside prometheus", options: "explain", prometheus: ":9153"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := parse(caddy.NewTestController("dns", "kubetree cluster.local {\n\t"+tc.options+"\n}"))
			if err != nil {
				t.Fatal(err)
			}
			c := caddy.NewTestController("dns", "")
			server := dnsserver.GetConfig(c)
			if tc.prometheus != "" {
				server.AddPlugin(func(next plugin.Handler) plugin.Handler { return &prometheusStandIn{Addr: tc.prometheus, Next: next} })
			}
			if tc.transfer != "" {
				server.AddPlugin(transferPlugin(t, tc.transfer))
			}
			server.AddPlugin(func(next plugin.Handler) plugin.Handler { k.Next = next; return k })
			if _, err := dnsserver.NewServer("dns://127.0.0.1:0", []*dnsserver.Config{server}); err != nil {
				t.Fatal(err) // builds the chain, so that server.Handler finds the plugins; serves nothing
			}
			err = k.checkBesidePlugins(server)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("want an error starting %q, got %v", tc.err, err)
			}
		})
	}
}

// transferPlugin is the transfer plugin, set up from a stanza as CoreDNS sets it up.
func transferPlugin(t *testing.T, stanza string) plugin.Plugin {
	t.Helper()
	setupTransfer, err := caddy.DirectiveAction("dns", "transfer")
	if err != nil {
		t.Fatal(err)
	}
	c := caddy.NewTestController("dns", stanza)
	if err := setupTransfer(c); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	return dnsserver.GetConfig(c).Plugin[0]
}

// prometheusStandIn is the prometheus plugin as kubetree reads it: a handler named prometheus with
// its listen address in Addr (TestPrometheusAddrIsRead checks the real plugin has it).
type prometheusStandIn struct {
	Addr string
	Next plugin.Handler
}

func (*prometheusStandIn) Name() string { return "prometheus" }
func (*prometheusStandIn) ServeDNS(context.Context, dns.ResponseWriter, *dns.Msg) (int, error) {
	return dns.RcodeServerFailure, nil
}

// TestPrometheusAddrIsRead: the prometheus plugin of the CoreDNS module this one builds with keeps
// its listen address in the string field Addr of Metrics, which checkBesidePlugins reads.
func TestPrometheusAddrIsRead(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/coredns/coredns").Output()
	if err != nil {
		t.Fatalf("go list the CoreDNS module: %v", err)
	}
	file := filepath.Join(strings.TrimSpace(string(out)), "plugin", "metrics", "metrics.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Metrics" {
			return true
		}
		for _, field := range ts.Type.(*ast.StructType).Fields.List {
			typ, ok := field.Type.(*ast.Ident)
			for _, name := range field.Names {
				found = found || name.Name == "Addr" && ok && typ.Name == "string"
			}
		}
		return false
	})
	if !found {
		t.Errorf("%s: Metrics has no Addr string field: explain's check against the prometheus address reads nothing", file)
	}
}

// TestSameListener: two listen addresses take the same TCP port when the ports are equal and
// their hosts are equal or one of them is every address.
func TestSameListener(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{":9153", ":9153", true},
		{":9153", "127.0.0.1:9153", true},
		{"[::]:9153", "127.0.0.1:9153", true},
		{"0.0.0.0:9153", "[::1]:9153", true},
		{"127.0.0.1:9153", "[::ffff:127.0.0.1]:9153", true},
		{"localhost:9153", "LOCALHOST:9153", true},
		{"127.0.0.1:9153", "127.0.0.2:9153", false},
		{":9153", ":9155", false},
		{"127.0.0.1", "127.0.0.1:53", false},
	} {
		if got := sameListener(tc.a, tc.b); got != tc.same {
			t.Errorf("sameListener(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// TestTrustedPodsAreWarned: once the pods are known, a client_subnet_from network that holds pods
// (not on the host's network, as a node-local cache is) is warned of, with how many and one of them.
func TestTrustedPodsAreWarned(t *testing.T) {
	k, parts, err := NewForTests(caddy.NewTestController("dns", "kubetree cluster.local {\n\tpods verified\n\tisolate refuse\n\tclient_subnet_from 10.244.0.0/16 169.254.20.10\n}"),
		TestStandIns{Server: "test://" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	a := parts.Applier
	for _, p := range []*api.Pod{
		k8stest.Pod("ns1", "web", "10.244.1.5"),
		k8stest.Pod("ns2", "db", "10.244.2.7"),
		hostNetwork(k8stest.Pod("kube-system", "node-local-dns", "169.254.20.10")),
		k8stest.Pod("ns3", "elsewhere", "10.96.0.9"),
	} {
		slim, err := k.podStore.SlimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		a.ApplyPod(nil, slim.(*object.StoredPod))
	}
	want := []string{"client_subnet_from 10.244.0.0/16 holds the addresses of 2 pods (such as ns1/web at 10.244.1.5): any of them can name " +
		"any other client, and read the names isolate hides from it; give client_subnet_from the addresses the node-local caches send from only"}
	if got := k.trustedPods(); !slices.Equal(got, want) {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
}

func hostNetwork(p *api.Pod) *api.Pod {
	p.Spec.HostNetwork = true
	return p
}

// TestCoreDNSRefusesToStart: CoreDNS, started in this process from a Corefile as coremain starts
// it, refuses the unsafe and the impossible with kubetree's error, naming the option, before any
// listener opens: explain on the server block's DNS port (refused by setup, where the DNS listener
// used to fail and be blamed), and isolate beside a transfer to anyone (refused as it starts).
func TestCoreDNSRefusesToStart(t *testing.T) {
	directives := dnsserver.Directives
	t.Cleanup(func() { dnsserver.Directives = directives })
	dnsserver.Directives = slices.Insert(slices.Clone(directives), slices.Index(directives, "kubernetes"), pluginName)
	for _, tc := range []struct{ name, corefile, err string }{
		{name: "explain on the DNS port", corefile: ".:45053 {\n    kubetree cluster.local {\n        endpoint http://127.0.0.1:1\n        explain 127.0.0.1:45053\n    }\n}",
			err: "plugin/kubetree: explain 127.0.0.1:45053: this server block answers DNS on port 45053 there"},
		{name: "isolate beside transfer to *", corefile: ".:45053 {\n    transfer {\n        to *\n    }\n    kubetree cluster.local {\n        endpoint http://127.0.0.1:1\n" +
			"        pods verified\n        isolate refuse\n    }\n}",
			err: "plugin/kubetree: isolate beside transfer cluster.local. { to * }: a zone transfer carries every name of cluster.local. to anyone who asks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := caddy.Start(caddy.CaddyfileInput{Contents: []byte(tc.corefile), ServerTypeName: "dns"})
			t.Cleanup(func() { startFailed.stopAll() }) // CoreDNS would exit; the test stops what was made
			if err == nil {
				inst.Stop()
				t.Fatal("CoreDNS started")
			}
			if !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("want an error saying %q, got %v", tc.err, err)
			}
		})
	}
}

// A ready plugin that monitors continuously sees an instance that shuts down as not ready.
func TestNotReadyOnceShuttingDown(t *testing.T) {
	k := &Kubetree{}
	k.synced.Store(true)
	if !k.Ready() {
		t.Fatal("synced, yet not ready")
	}
	k.draining.Store(true)
	if k.Ready() {
		t.Error("ready while shutting down")
	}
}

// The drain at shutdown waits for the UDP queries to stop coming: it counts them as the
// prometheus plugin does, across every server, zone and type, and leaves out those over TCP
// (NodeLocal DNSCache's connections would keep it waiting to its limit).
func TestUDPQueriesReceivedCountsThePrometheusPluginsUDPRequests(t *testing.T) {
	before := udpQueriesReceived()
	vars.RequestCount.WithLabelValues("dns://:53", "cluster.local.", "", "udp", "1", "A").Add(3)
	vars.RequestCount.WithLabelValues("dns://:1053", ".", "", "udp", "2", "AAAA").Inc()
	vars.RequestCount.WithLabelValues("dns://:53", "cluster.local.", "", "tcp", "1", "A").Add(5)
	if got := udpQueriesReceived() - before; got != 4 {
		t.Errorf("udpQueriesReceived grew by %d after 4 UDP and 5 TCP requests, want 4", got)
	}
}

// TestNoLinkLocalGlue: the interface addresses a server without a bind names as its own are the
// ones a client elsewhere can reach: loopback, link-local and multicast addresses are left out.
func TestNoLinkLocalGlue(t *testing.T) {
	var addrs []net.Addr
	for _, cidr := range []string{"127.0.0.1/8", "::1/128", "192.0.2.2/24", "fd00::2/64", "fe80::1c2a:3bff:fe4d:5e6f/64", "169.254.20.10/32"} {
		ip, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, &net.IPNet{IP: ip, Mask: n.Mask})
	}
	var got []string
	for _, ip := range interfaceIPs(addrs) {
		got = append(got, ip.String())
	}
	if want := []string{"192.0.2.2", "fd00::2"}; !slices.Equal(got, want) {
		t.Errorf("interface addresses %v, want %v", got, want)
	}
}
