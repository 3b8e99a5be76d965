package e2e

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// switchProxy forwards TCP connections to an API server. freeze stops every connection it holds
// (no byte in either direction, no FIN, no RST: a host that lost power, a black-holed path) and
// sends new connections to another API server, as a cluster's load balancing would.
type switchProxy struct {
	l      net.Listener
	target atomic.Value // string
	mu     sync.Mutex
	conns  []net.Conn
	cur    chan struct{} // closed to freeze the connections open at that moment
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{l: l, cur: make(chan struct{})}
	p.target.Store(target)
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

// freezeAndSwitch freezes the open connections and sends new ones to target.
func (p *switchProxy) freezeAndSwitch(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target.Store(target)
	close(p.cur)
	p.cur = make(chan struct{})
}

func (p *switchProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target.Load().(string))
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		frozen := p.cur
		p.mu.Unlock()
		go pipe(out, in, frozen)
		go pipe(in, out, frozen)
	}
}

func pipe(dst, src net.Conn, frozen chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-frozen:
			return // drop it; both connections stay open
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

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

// TestFrozenAPIServerConnection: the connection to the API server freezes (no bytes, no FIN, no
// RST) while new connections reach a healthy API server. kubetree finds the dead connection through
// its HTTP/2 health check and serves a change made meanwhile, sooner than the in-tree plugin beside
// it, and every existing name keeps answering throughout.
func TestFrozenAPIServerConnection(t *testing.T) {
	ns := newNamespace(t, "frozen")
	var names []string
	for i := range 3 {
		s := createService(t, clusterIP(ns, fmt.Sprintf("stay%d", i), false, tcpPort("http", 80)))
		names = append(names, svcName(ns, s.Name))
	}
	second := newAPIServer(t)
	proxy := newSwitchProxy(t, second.url[len("https://"):])
	kubeconfig := kubeconfigFor(t, "https://"+proxy.l.Addr().String())
	kt := startCoreDNS(t, "kubeconfig "+kubeconfig)
	k8s := startCoreDNSPlugin(t, "kubernetes", nil, "kubeconfig "+kubeconfig)
	for _, c := range []*coreDNS{kt, k8s} {
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitRcode(t, names[0], dns.TypeA, dns.RcodeSuccess)
	}
	time.Sleep(time.Second) // the watches are open and idle

	p := probe(kt, names)
	main := env.vars["APISERVER_PORT"]
	if main == "" {
		t.Fatal("no APISERVER_PORT in the control plane's env")
	}
	proxy.freezeAndSwitch("127.0.0.1:" + main)
	frozen := time.Now()
	born := createService(t, clusterIP(ns, "born", false, tcpPort("http", 80)))
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

// TestStoppedAPIServer: the API server kubetree talks to is stopped with SIGSTOP for 30 s (its
// sockets stay open, nothing answers), while changes go through another one; existing names keep
// answering, and once it continues the changes are served, beside the in-tree plugin.
func TestStoppedAPIServer(t *testing.T) {
	const stopped = 30 * time.Second
	ns := newNamespace(t, "stopped")
	var names []string
	for i := range 3 {
		s := createService(t, clusterIP(ns, fmt.Sprintf("stay%d", i), false, tcpPort("http", 80)))
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
	born := createService(t, clusterIP(ns, "born", false, tcpPort("http", 80)))
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
	createService(t, clusterIP(ns, "web", false, tcpPort("http", 80)))
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
