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

// TestAPIServerOutage: while the API server is gone, the last known answers keep coming and no
// existing name is ever NXDOMAIN; changes made meanwhile appear once it is back.
func TestAPIServerOutage(t *testing.T) {
	ns := newNamespace(t, "outage")
	var names []string
	for i := range 5 {
		s := createService(t, clusterIP(ns, fmt.Sprintf("stay%d", i), false, tcpPort("http", 80)))
		names = append(names, svcName(ns, s.Name))
	}
	createService(t, clusterIP(ns, "doomed", false, tcpPort("http", 80)))
	api := newAPIServer(t)
	c := startCoreDNS(t, "kubeconfig "+api.kubeconfig)
	eventually(t, "ready", 30*time.Second, c.isReady)
	c.waitRcode(t, svcName(ns, "doomed"), dns.TypeA, dns.RcodeSuccess)

	p := probe(c, names)
	api.stop(t)
	time.Sleep(3 * time.Second) // queries keep running against the last known state
	born := createService(t, clusterIP(ns, "born", false, tcpPort("http", 80)))
	deleteService(t, ns, "doomed")
	time.Sleep(2 * time.Second)
	if !c.isReady() {
		t.Log("ready plugin reports not ready while the API server is away")
	}

	api.start(t)
	back := time.Now()
	c.waitAnswer(t, svcName(ns, "born"), dns.TypeA, born.Spec.ClusterIP)
	c.waitRcode(t, svcName(ns, "doomed"), dns.TypeA, dns.RcodeNameError)
	converged := time.Since(back)
	p.finish()

	report(t, "changes made during the outage served %s after the API server was ready again; queries meanwhile: %s", converged, p)
	if p.nxdomain.Load() != 0 || p.servfail.Load() != 0 || p.failed.Load() != 0 {
		t.Fatalf("existing names must keep answering through the outage: %s", p)
	}
	if p.answered.Load() == 0 {
		t.Fatal("no query was answered during the outage")
	}
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
