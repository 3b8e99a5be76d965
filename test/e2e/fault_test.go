package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// apiServer is a second kube-apiserver on the shared etcd. One CoreDNS talks only to it, so a test
// can take it away and bring it back at the same address while changes go through the main one,
// as in a cluster with several API servers.
type apiServer struct {
	args       []string
	url        string
	kubeconfig string
	cmd        *exec.Cmd
	done       chan struct{}
	log        *os.File
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	raw, err := os.ReadFile(env.dir + "/kube-apiserver.args")
	if err != nil {
		t.Fatal(err)
	}
	p := port(freePorts(t, 1)[0])
	a := &apiServer{url: "https://127.0.0.1:" + p, kubeconfig: t.TempDir() + "/kubeconfig"}
	for _, arg := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if strings.HasPrefix(arg, "--secure-port=") {
			arg = "--secure-port=" + p
		}
		a.args = append(a.args, arg)
	}
	kc, _ := os.ReadFile(env.vars["KUBECONFIG"])
	kc = regexp.MustCompile(`server: \S+`).ReplaceAll(kc, []byte("server: "+a.url))
	if err := os.WriteFile(a.kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	a.log, _ = os.Create(t.TempDir() + "/kube-apiserver.log")
	a.start(t)
	t.Cleanup(func() { a.stop(t) })
	return a
}

// start runs the API server and waits until it is ready.
func (a *apiServer) start(t *testing.T) {
	t.Helper()
	a.cmd = exec.Command(env.root+"/bin/kube-apiserver", a.args...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.done = make(chan struct{})
	go func() { a.cmd.Wait(); close(a.done) }()
	eventually(t, "second kube-apiserver ready", 90*time.Second, a.ready)
}

func (a *apiServer) ready() bool {
	req, _ := http.NewRequest("GET", a.url+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer "+env.vars["ADMIN_TOKEN"])
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (a *apiServer) stop(t *testing.T) {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	select {
	case <-a.done:
		return
	default:
	}
	a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
	}
}

// prober queries names over UDP until stopped and counts every kind of answer.
type prober struct {
	answered, nxdomain, servfail, failed atomic.Int64
	stop                                 chan struct{}
	wg                                   sync.WaitGroup
}

func probe(c *coreDNS, names []string) *prober {
	p := &prober{stop: make(chan struct{})}
	p.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			m, err := c.try("udp", names[i%len(names)], dns.TypeA)
			switch {
			case err != nil:
				p.failed.Add(1)
			case m.Rcode == dns.RcodeNameError:
				p.nxdomain.Add(1)
			case m.Rcode == dns.RcodeServerFailure:
				p.servfail.Add(1)
			case len(m.Answer) > 0:
				p.answered.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	return p
}

func (p *prober) finish() { close(p.stop); p.wg.Wait() }

func (p *prober) String() string {
	return fmt.Sprintf("answered %d, NXDOMAIN %d, SERVFAIL %d, no reply %d",
		p.answered.Load(), p.nxdomain.Load(), p.servfail.Load(), p.failed.Load())
}

// TestAPIServerOutage: while the API server is gone for 30 seconds, the last known answers keep
// coming and no existing name is ever NXDOMAIN; changes made meanwhile (through another API server)
// appear soon after it is back. The in-tree kubernetes plugin goes through the same outage side by
// side, for the report.
func TestAPIServerOutage(t *testing.T) {
	t.Parallel() // with the other long waits, after every other test (TestMain says why)
	const outage = 30 * time.Second
	ns := newNamespace(t, "outage")
	var names []string
	for i := range 5 {
		s := createService(t, k8stest.ClusterIPService(ns, fmt.Sprintf("stay%d", i), nil, k8stest.TCP("http", 80)))
		names = append(names, svcName(ns, s.Name))
	}
	createService(t, k8stest.ClusterIPService(ns, "doomed", nil, k8stest.TCP("http", 80)))
	api := newAPIServer(t)
	kt := startCoreDNS(t, "kubeconfig "+api.kubeconfig)
	k8s := startCoreDNSPlugin(t, "kubernetes", nil, "kubeconfig "+api.kubeconfig)
	for _, c := range []*coreDNS{kt, k8s} {
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitRcode(t, svcName(ns, "doomed"), dns.TypeA, dns.RcodeSuccess)
	}

	p := probe(kt, names)
	api.stop(t)
	time.Sleep(outage / 2) // queries keep running against the last known state
	born := createService(t, k8stest.ClusterIPService(ns, "born", nil, k8stest.TCP("http", 80)))
	deleteService(t, ns, "doomed")
	time.Sleep(outage / 2)

	api.start(t)
	back := time.Now()
	converged := map[*coreDNS]time.Duration{}
	var wg sync.WaitGroup
	for _, c := range []*coreDNS{kt, k8s} {
		wg.Go(func() {
			for time.Since(back) < 2*time.Minute {
				m1, err1 := c.try("udp", svcName(ns, "born"), dns.TypeA)
				m2, err2 := c.try("udp", svcName(ns, "doomed"), dns.TypeA)
				if err1 == nil && err2 == nil && len(answers(m1)) == 1 && answers(m1)[0] == born.Spec.ClusterIP &&
					m2.Rcode == dns.RcodeNameError {
					mu.Lock()
					converged[c] = time.Since(back)
					mu.Unlock()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	p.finish()

	report(t, "after a %s outage, changes made meanwhile served %s after the API server was ready again (kubernetes plugin: %s); kubetree's queries during the outage: %s",
		outage, show(converged, kt), show(converged, k8s), p)
	if _, ok := converged[kt]; !ok {
		t.Fatal("kubetree never served the changes made during the outage")
	}
	if p.nxdomain.Load() != 0 || p.servfail.Load() != 0 || p.failed.Load() != 0 {
		t.Fatalf("existing names must keep answering through the outage: %s", p)
	}
	if p.answered.Load() == 0 {
		t.Fatal("no query was answered during the outage")
	}
}

var mu sync.Mutex

func show(converged map[*coreDNS]time.Duration, c *coreDNS) string {
	mu.Lock()
	defer mu.Unlock()
	if d, ok := converged[c]; ok {
		return d.Round(time.Millisecond).String()
	}
	return "not within 2m"
}

// TestStartupWithoutAPIServer: cluster names are SERVFAIL (never NXDOMAIN) until the first sync,
// the ready plugin says not ready, and other names are still forwarded.
func TestStartupWithoutAPIServer(t *testing.T) {
	closed := freePorts(t, 1)[0] // nothing listens here
	c := startCoreDNS(t, "endpoint https://"+closed, "startup_timeout 1s")
	for _, name := range []string{"kubernetes.default.svc.cluster.local.", "nothing.default.svc.cluster.local."} {
		for _, network := range []string{"udp", "tcp"} {
			if m := c.query(t, network, name, dns.TypeA); m.Rcode != dns.RcodeServerFailure {
				t.Fatalf("%s over %s before any sync: want SERVFAIL, got %s", name, network, dns.RcodeToString[m.Rcode])
			}
		}
	}
	if c.isReady() {
		t.Fatal("ready before any sync with the API server")
	}
	m := c.query(t, "udp", "www.example.org.", dns.TypeA)
	if got := answers(m); len(got) != 1 || got[0] != "192.0.2.1" {
		t.Fatalf("names outside the cluster zone must still be forwarded, got %v", m)
	}
}
