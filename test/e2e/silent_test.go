package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// kubeconfigFor is the admin kubeconfig with another server address.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	kc, err := os.ReadFile(env.vars["KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	kc = regexp.MustCompile(`server: \S+`).ReplaceAll(kc, []byte("server: "+server))
	path := t.TempDir() + "/kubeconfig"
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// servedAfter polls each CoreDNS until name answers ip, and returns how long each took from start
// (missing: not within limit).
func servedAfter(start time.Time, limit time.Duration, name, ip string, servers ...*coreDNS) map[*coreDNS]time.Duration {
	out := map[*coreDNS]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range servers {
		wg.Go(func() {
			for time.Since(start) < limit {
				if m, err := c.try("udp", name, dns.TypeA); err == nil && len(answers(m)) == 1 && answers(m)[0] == ip {
					mu.Lock()
					out[c] = time.Since(start)
					mu.Unlock()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	return out
}

func shown(d map[*coreDNS]time.Duration, c *coreDNS) string {
	if v, ok := d[c]; ok {
		return v.Round(10 * time.Millisecond).String()
	}
	return "not within the limit"
}

// throughProxy starts kubetree (with plugins) and the in-tree plugin beside it, both reaching a
// second API server through a proxy that the test can freeze.
func throughProxy(t *testing.T, plugins []string) (*k8stest.Proxy, *coreDNS, *coreDNS) {
	t.Helper()
	second := newAPIServer(t)
	proxy := k8stest.NewProxy(t, second.url[len("https://"):])
	kubeconfig := kubeconfigFor(t, "https://"+proxy.Addr())
	kt := startCoreDNSWith(t, plugins, "kubeconfig "+kubeconfig)
	k8s := startCoreDNSPlugin(t, "kubernetes", nil, "kubeconfig "+kubeconfig)
	return proxy, kt, k8s
}

// freezeToMain acts as a load balancer moving off a dead host: new connections through proxy go to
// the main API server, and every open one freezes (no bytes, no FIN, no RST). It returns when.
func freezeToMain(t *testing.T, proxy *k8stest.Proxy) time.Time {
	t.Helper()
	main := env.vars["APISERVER_PORT"]
	if main == "" {
		t.Fatal("no APISERVER_PORT in the control plane's env")
	}
	proxy.Switch("127.0.0.1:" + main)
	proxy.Freeze()
	return time.Now()
}

// TestFrozenAPIServerConnection: the connection to the API server freezes (no bytes, no FIN, no
// RST) while new connections reach a healthy API server. kubetree finds the dead connection through
// its HTTP/2 health check and serves a change made meanwhile, sooner than the in-tree plugin beside
// it, and every existing name keeps answering throughout.
func TestFrozenAPIServerConnection(t *testing.T) {
	t.Parallel() // with the other long waits, after every other test (TestMain says why)
	ns := newNamespace(t, "frozen")
	var names []string
	for i := range 3 {
		s := createService(t, k8stest.ClusterIPService(ns, fmt.Sprintf("stay%d", i), nil, k8stest.TCP("http", 80)))
		names = append(names, svcName(ns, s.Name))
	}
	proxy, kt, k8s := throughProxy(t, nil)
	for _, c := range []*coreDNS{kt, k8s} {
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitRcode(t, names[0], dns.TypeA, dns.RcodeSuccess)
	}
	time.Sleep(time.Second) // the watches are open and idle

	p := probe(kt, names)
	frozen := freezeToMain(t, proxy)
	born := createService(t, k8stest.ClusterIPService(ns, "born", nil, k8stest.TCP("http", 80)))
	served := servedAfter(frozen, 2*time.Minute, svcName(ns, "born"), born.Spec.ClusterIP, kt, k8s)
	p.finish()

	report(t, "connection to the API server frozen: a change made meanwhile served by kubetree after %s, by the kubernetes plugin after %s; kubetree's queries meanwhile: %s",
		shown(served, kt), shown(served, k8s), p)
	ktTook, ok := served[kt]
	if !ok {
		t.Fatal("kubetree never served the change made after its connection froze")
	}
	if k8sTook, ok := served[k8s]; ok && k8sTook <= ktTook {
		t.Errorf("kubetree (%s) was not sooner than the kubernetes plugin (%s)", ktTook, k8sTook)
	}
	if p.nxdomain.Load() != 0 || p.servfail.Load() != 0 || p.failed.Load() != 0 || p.answered.Load() == 0 {
		t.Fatalf("existing names must keep answering while the connection is dead: %s", p)
	}
}

// TestFrozenBusyWatch: a busy EndpointSlice watch goes over HTTP/1.1, which has no PING; its
// connection freezes (no bytes, no FIN, no RST) while new connections reach a healthy API server.
// kubetree closes the silent connection, watches again over HTTP/2, and serves a change made
// meanwhile, sooner than the in-tree plugin beside it.
func TestFrozenBusyWatch(t *testing.T) {
	t.Parallel() // with the other long waits, after every other test (TestMain says why)
	ns := newNamespace(t, "frozenbusy")
	createService(t, k8stest.HeadlessService(ns, "busy", k8stest.TCP("http", 80)))
	ports := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	at := func(i int) string { return fmt.Sprintf("10.95.%d.%d", i/250, i%250+1) }
	slice := k8stest.Slice(ns, "busy", "busy-1", discovery.AddressTypeIPv4, ports, k8stest.Endpoint{Addrs: []string{at(0)}})
	applySlice(t, slice)
	proxy, kt, k8s := throughProxy(t, []string{"debug"})
	busy := svcName(ns, "busy")
	for _, c := range []*coreDNS{kt, k8s} {
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitAnswer(t, busy, dns.TypeA, at(0))
	}

	// Twice the changes that make a watch busy, as fast as the API server takes them (not at the
	// shared client's 5 a second).
	cfg, err := clientcmd.BuildConfigFromFlags("", env.vars["KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	slices := kubernetes.NewForConfigOrDie(cfg).DiscoveryV1().EndpointSlices(ns)
	cur, err := slices.Get(bg, slice.Name, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const changes = 100
	for i := 1; i <= changes; i++ {
		cur.Endpoints[0].Addresses = []string{at(i)}
		if cur, err = slices.Update(bg, cur, meta.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kt.waitAnswer(t, busy, dns.TypeA, at(changes))
	if !strings.Contains(kt.out.String(), "endpointslices: 50 events within 5s: watching over HTTP/1.1") {
		t.Fatalf("%d slice changes did not move the watch to HTTP/1.1:\n%s", changes, kt.out.String())
	}

	frozen := freezeToMain(t, proxy)
	cur.Endpoints[0].Addresses = []string{at(changes + 1)}
	if _, err = slices.Update(bg, cur, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	served := servedAfter(frozen, 2*time.Minute, busy, at(changes+1), kt, k8s)
	report(t, "busy watch's connection frozen: a change made meanwhile served by kubetree after %s, by the kubernetes plugin after %s",
		shown(served, kt), shown(served, k8s))
	ktTook, ok := served[kt]
	if !ok {
		t.Fatalf("kubetree never served the change made after its busy watch's connection froze:\n%s", kt.out.String())
	}
	if k8sTook, ok := served[k8s]; ok && k8sTook <= ktTook {
		t.Errorf("kubetree (%s) was not sooner than the kubernetes plugin (%s)", ktTook, k8sTook)
	}
	if !strings.Contains(kt.out.String(), "endpointslices: nothing read over HTTP/1.1 for 5s: watching over HTTP/2") {
		t.Errorf("the frozen HTTP/1.1 watch was not ended for its silence:\n%s", kt.out.String())
	}
}

// TestStoppedAPIServer: the API server kubetree talks to is stopped with SIGSTOP for 30 s (its
// sockets stay open, nothing answers), while changes go through another one; existing names keep
// answering, and once it continues the changes are served, beside the in-tree plugin.
func TestStoppedAPIServer(t *testing.T) {
	t.Parallel() // with the other long waits, after every other test (TestMain says why)
	const stopped = 30 * time.Second
	ns := newNamespace(t, "stopped")
	var names []string
	for i := range 3 {
		s := createService(t, k8stest.ClusterIPService(ns, fmt.Sprintf("stay%d", i), nil, k8stest.TCP("http", 80)))
		names = append(names, svcName(ns, s.Name))
	}
	api := newAPIServer(t)
	kt := startCoreDNS(t, "kubeconfig "+api.kubeconfig)
	k8s := startCoreDNSPlugin(t, "kubernetes", nil, "kubeconfig "+api.kubeconfig)
	for _, c := range []*coreDNS{kt, k8s} {
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitRcode(t, names[0], dns.TypeA, dns.RcodeSuccess)
	}

	p := probe(kt, names)
	if err := api.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	defer func() {
		if !continued {
			api.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	time.Sleep(stopped / 2)
	born := createService(t, k8stest.ClusterIPService(ns, "born", nil, k8stest.TCP("http", 80)))
	time.Sleep(stopped / 2)
	if err := api.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	back := time.Now()
	served := servedAfter(back, 2*time.Minute, svcName(ns, "born"), born.Spec.ClusterIP, kt, k8s)
	p.finish()

	report(t, "API server stopped (SIGSTOP) for %s: a change made meanwhile served by kubetree %s after SIGCONT, by the kubernetes plugin %s after; kubetree's queries meanwhile: %s",
		stopped, shown(served, kt), shown(served, k8s), p)
	if _, ok := served[kt]; !ok {
		t.Fatal("kubetree never served the change made while its API server was stopped")
	}
	if p.nxdomain.Load() != 0 || p.servfail.Load() != 0 || p.failed.Load() != 0 || p.answered.Load() == 0 {
		t.Fatalf("existing names must keep answering while the API server is stopped: %s", p)
	}
}

// TestAuditInStep: against a real API server (pages from the watch cache, pods decoded slim), an
// audit of a cluster the watches kept in step finds nothing to repair.
func TestAuditInStep(t *testing.T) {
	ns := newNamespace(t, "audit")
	createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	runningPod(t, ns, "client", nil, "10.1.202.5")
	c := startCoreDNS(t, "pods verified", "audit_interval 10s")
	eventually(t, "ready", 30*time.Second, c.isReady)
	eventually(t, "an audit", time.Minute, func() bool { return strings.Contains(c.out.String(), "audit: ") })
	if out := c.out.String(); !strings.Contains(out, "audit: in step with the API server") {
		t.Fatalf("the audit of a cluster in step did not say so:\n%s", out)
	}
	if strings.Contains(c.scrape(), "coredns_kubetree_audit_repairs_total{") {
		t.Errorf("an audit in step counted repairs")
	}
}
