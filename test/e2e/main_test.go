// Package e2e runs bin/coredns with kubetree against a real kube-apiserver and etcd on 127.0.0.1
// (hack/cluster.sh) and checks it over real UDP and TCP sockets. `make e2e` runs it.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// env is the control plane every test shares; each test works in namespaces of its own.
var env struct {
	root    string // repository root
	dir     string // cluster state (hack/cluster.sh DIR)
	vars    map[string]string
	client  kubernetes.Interface
	stubDNS string // a DNS server standing in for the world beyond the cluster
}

// TestMain starts the control plane every test shares. The four tests that spend most of their
// time waiting (an API server stopped, restarted or frozen behind a proxy: about 4 minutes one after
// the other) call t.Parallel: go test runs them together after every other test has ended, each
// against its own API server or proxy in namespaces of its own, and make e2e lets all four run at
// once (-parallel 4). Their checks compare kubetree with the in-tree plugin beside it, or count
// unanswered queries with a 2 s timeout: none depends on the machine being idle.
func TestMain(m *testing.M) {
	if os.Getenv("KUBETREE_E2E") == "" {
		fmt.Println("e2e: skipped; run `make e2e` (it builds the binaries and sets KUBETREE_E2E=1)")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, _ := filepath.Abs("../..")
	env.root = root
	dir, err := os.MkdirTemp("", "kubetree-e2e-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	env.dir = dir
	defer os.RemoveAll(dir)
	if out, err := exec.Command(root+"/hack/cluster.sh", "start", dir).CombinedOutput(); err != nil {
		fmt.Printf("e2e: cannot start the control plane: %v\n%s\n", err, out)
		return 1
	}
	defer exec.Command(root+"/hack/cluster.sh", "stop", dir).Run()
	env.vars = readEnv(dir + "/env")
	cfg, err := clientcmd.BuildConfigFromFlags("", env.vars["KUBECONFIG"])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	env.client = kubernetes.NewForConfigOrDie(cfg)
	stop := startStubDNS()
	defer stop()
	return m.Run()
}

func readEnv(path string) map[string]string {
	vars := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return vars
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			vars[k] = strings.Trim(v, `"'`)
		}
	}
	return vars
}

// startStubDNS answers every question with A 192.0.2.1 (TEST-NET-1, never contacted): it is where
// `forward` sends names outside the cluster. Over UDP, a name under stubTruncated is answered with
// TC set, as an upstream whose answer does not fit (over TCP, whole).
func startStubDNS() func() {
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN A 192.0.2.1")
			m.Answer = append(m.Answer, rr)
		}
		_, udp := w.RemoteAddr().(*net.UDPAddr)
		m.Truncated = udp && dns.IsSubDomain(stubTruncated, r.Question[0].Name)
		w.WriteMsg(m)
	})
	// forward asks over TCP when its client did: serve both on one port. A port free for UDP
	// may be taken for TCP ("bind: address already in use"): then try another.
	var pc net.PacketConn
	var l net.Listener
	var err error
	for try := 0; ; try++ {
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		l, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		if try == 100 {
			panic(fmt.Sprintf("no port free for both UDP and TCP in 100 tries: %v", err))
		}
	}
	env.stubDNS = pc.LocalAddr().String()
	udp := &dns.Server{PacketConn: pc, Handler: handler}
	tcp := &dns.Server{Listener: l, Handler: handler}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	return func() { udp.Shutdown(); tcp.Shutdown() }
}

// stubTruncated is the zone whose names the stub upstream answers over UDP with TC set.
const stubTruncated = "cut.example.net."

// coreDNS is one running bin/coredns.
type coreDNS struct {
	cmd       *exec.Cmd
	addr      string // DNS, UDP and TCP
	ready     string // http address of the ready plugin
	pprof     string
	metrics   string
	corefile  string
	plugins   []string
	directive string
	zones     []string // stanza zones beyond cluster.local in-addr.arpa ip6.arpa
	out       *syncBuffer
	done      chan struct{}
}

// startCoreDNS runs bin/coredns with a kubetree stanza holding options (one per line); the
// kubeconfig of the admin user unless options name their own.
func startCoreDNS(t testing.TB, options ...string) *coreDNS {
	t.Helper()
	return startCoreDNSWith(t, nil, options...)
}

// startCoreDNSWith also adds plugins (whole Corefile lines) to the server block.
func startCoreDNSWith(t testing.TB, plugins []string, options ...string) *coreDNS {
	t.Helper()
	return startCoreDNSPlugin(t, "kubetree", plugins, options...)
}

// startCoreDNSPlugin runs the stanza under directive: kubetree, or the in-tree kubernetes plugin
// for a side-by-side comparison.
func startCoreDNSPlugin(t testing.TB, directive string, plugins []string, options ...string) *coreDNS {
	t.Helper()
	return startCoreDNSZones(t, directive, nil, plugins, options...)
}

// startCoreDNSZones gives the stanza zones beyond cluster.local in-addr.arpa ip6.arpa.
func startCoreDNSZones(t testing.TB, directive string, zones, plugins []string, options ...string) *coreDNS {
	t.Helper()
	ports := freePorts(t, 4)
	c := &coreDNS{
		addr: ports[0], ready: ports[1], pprof: ports[2], metrics: ports[3],
		corefile: filepath.Join(t.TempDir(), "Corefile"), out: &syncBuffer{}, done: make(chan struct{}),
	}
	hasClient := false
	for _, o := range options {
		if strings.HasPrefix(o, "kubeconfig") || strings.HasPrefix(o, "endpoint") {
			hasClient = true
		}
	}
	if !hasClient {
		options = append(options, "kubeconfig "+env.vars["KUBECONFIG"])
	}
	c.plugins, c.directive, c.zones = plugins, directive, zones
	c.writeCorefile(t, options)
	c.cmd = exec.Command(coreDNSBinary(), "-conf", c.corefile, "-dns.port", port(c.addr))
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		secrets := credentials(t, options)
		c.checkNoSecrets(t, secrets, c.scrape())
		c.stop()
		out := c.out.String()
		c.checkNoSecrets(t, secrets, out)
		if strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("coredns (built with -race) found a data race")
		}
		if t.Failed() {
			t.Logf("coredns output:\n%s", out)
		}
	})
	eventually(t, "coredns listening", 30*time.Second, func() bool {
		conn, err := net.Dial("tcp", c.addr)
		if err == nil {
			conn.Close()
		}
		select {
		case <-c.done:
			t.Fatalf("coredns exited:\n%s", c.out.String())
		default:
		}
		return err == nil
	})
	return c
}

// unbound, as a plugin line, leaves bind out of the Corefile: CoreDNS then listens on every
// interface, and the in-tree plugin finds the server's addresses (which it cannot with bind).
const unbound = "# no bind: every interface"

// readyContinuously, as a plugin line, has the ready plugin ask the plugins every time (monitor
// continuously) rather than stop once they were ready.
const readyContinuously = "# ready: monitor continuously"

func (c *coreDNS) writeCorefile(t testing.TB, options []string) {
	t.Helper()
	bind := "bind 127.0.0.1"
	if slices.Contains(c.plugins, unbound) {
		bind = unbound
	}
	ready := c.ready
	if slices.Contains(c.plugins, readyContinuously) {
		ready += " {\n        monitor continuously\n    }"
	}
	corefile := fmt.Sprintf(`.:%s {
    %s
    errors
    ready %s
    pprof %s
    prometheus %s
    %s
    %s %s {
        %s
    }
    forward . %s
}
`, port(c.addr), bind, ready, c.pprof, c.metrics, strings.Join(c.plugins, "\n    "), c.directive,
		strings.Join(append([]string{"cluster.local", "in-addr.arpa", "ip6.arpa"}, c.zones...), " "),
		strings.Join(options, "\n        "), env.stubDNS)
	if err := os.WriteFile(c.corefile, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
}

// coreDNSBinary is the CoreDNS the tests run: KUBETREE_COREDNS (make e2e gives the one built with
// -race, so that the plugin's own goroutines are checked too), else bin/coredns.
func coreDNSBinary() string {
	if b := os.Getenv("KUBETREE_COREDNS"); b != "" {
		return b
	}
	return env.root + "/bin/coredns"
}

// credentials are the secrets of the kubeconfig a CoreDNS was given: tokens, passwords, client keys.
func credentials(t testing.TB, options []string) []string {
	var secrets []string
	for _, o := range options {
		f := strings.Fields(o)
		if len(f) < 2 || f[0] != "kubeconfig" {
			continue
		}
		cfg, err := clientcmd.LoadFromFile(f[1])
		if err != nil {
			t.Errorf("reading %s: %v", f[1], err)
			continue
		}
		for _, a := range cfg.AuthInfos {
			for _, s := range []string{a.Token, a.Password, string(a.ClientKeyData)} {
				if len(s) >= 8 {
					secrets = append(secrets, s)
				}
			}
		}
	}
	return secrets
}

// checkNoSecrets fails the test if any credential appears in text (logs or metrics).
func (c *coreDNS) checkNoSecrets(t testing.TB, secrets []string, text string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) || strings.Contains(text, strings.TrimSpace(s)) {
			t.Errorf("a credential from the kubeconfig appears in coredns's logs or metrics")
		}
	}
	if strings.Contains(text, "PRIVATE KEY") {
		t.Errorf("a private key appears in coredns's logs or metrics")
	}
}

// scrape returns the prometheus metrics text, or "" when CoreDNS no longer answers.
func (c *coreDNS) scrape() string {
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func (c *coreDNS) stop() {
	if c.cmd.Process == nil {
		return
	}
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// isReady asks the ready plugin.
func (c *coreDNS) isReady() bool {
	resp, err := http.Get("http://" + c.ready + "/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// query asks one question over net ("udp" or "tcp") and fails the test if no answer comes.
func (c *coreDNS) query(t testing.TB, net, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m, err := c.try(net, name, qtype)
	if err != nil {
		t.Fatalf("%s %s %s: %v", net, name, dns.TypeToString[qtype], err)
	}
	return m
}

func (c *coreDNS) try(network, name string, qtype uint16) (*dns.Msg, error) {
	client := &dns.Client{Net: network, Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := client.Exchange(m, c.addr)
	return r, err
}

// answers returns the rdata of a reply's answer section, sorted, e.g. ["10.96.0.10"].
func answers(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(f[4:], " "))
	}
	sort.Strings(out)
	return out
}

// waitAnswer polls until name answers with exactly want (rcode NOERROR), over UDP and TCP.
func (c *coreDNS) waitAnswer(t testing.TB, name string, qtype uint16, want ...string) {
	t.Helper()
	sort.Strings(want)
	var last *dns.Msg
	eventually(t, fmt.Sprintf("%s %s = %v", name, dns.TypeToString[qtype], want), 30*time.Second, func() bool {
		for _, network := range []string{"udp", "tcp"} {
			m, err := c.try(network, name, qtype)
			if err != nil {
				return false
			}
			last = m
			if m.Rcode != dns.RcodeSuccess || strings.Join(answers(m), ",") != strings.Join(want, ",") {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprint(last) })
}

// waitRcode polls until name answers with rcode.
func (c *coreDNS) waitRcode(t testing.TB, name string, qtype uint16, rcode int) {
	t.Helper()
	var last *dns.Msg
	eventually(t, fmt.Sprintf("%s %s rcode %s", name, dns.TypeToString[qtype], dns.RcodeToString[rcode]), 30*time.Second, func() bool {
		m, err := c.try("udp", name, qtype)
		last = m
		return err == nil && m.Rcode == rcode
	}, func() string { return fmt.Sprint(last) })
}

func eventually(t testing.TB, what string, timeout time.Duration, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			extra := ""
			for _, d := range detail {
				extra += "\n" + d()
			}
			t.Fatalf("timed out after %s waiting for %s%s", timeout, what, extra)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freePorts returns n loopback addresses whose ports are free, for a CoreDNS to bind. They are
// taken below the kernel's ephemeral range (ip_local_port_range), from which it hands out the
// ports of listeners on port 0 and of outgoing connections: a port found free in that range can be
// taken again before CoreDNS binds it, by a connection of CoreDNS's own to the API server or
// another test's listener, and CoreDNS then exits with "address already in use". None is handed
// out twice in a run.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	portsGiven.Lock()
	defer portsGiven.Unlock()
	if portsGiven.next == 0 {
		low := ephemeralLow()
		// A start of its own for each run, so that a run does not wait on the last one's sockets.
		portsGiven.first, portsGiven.last = low-8192, low-1
		portsGiven.next = portsGiven.first + os.Getpid()%4096
	}
	var out []string
	for tried := 0; len(out) < n; tried++ {
		if tried > portsGiven.last-portsGiven.first {
			t.Fatalf("no free port in %d-%d", portsGiven.first, portsGiven.last)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(portsGiven.next))
		if portsGiven.next++; portsGiven.next > portsGiven.last {
			portsGiven.next = portsGiven.first
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		if len(out) == 0 {
			// DNS takes UDP on the first port too: it must be free for both.
			p, err := net.ListenPacket("udp", addr)
			if err != nil {
				continue
			}
			p.Close()
		}
		out = append(out, addr)
	}
	return out
}

// portsGiven is where freePorts goes on from.
var portsGiven struct {
	sync.Mutex
	first, last, next int
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 8192+1024 {
		return 32768
	}
	return low
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// report prints a measured figure in one greppable line and appends it to _out/e2e-report.txt.
func report(t testing.TB, format string, args ...any) {
	line := fmt.Sprintf("e2e_report: %s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log(line)
	fmt.Println(line)
	if f, err := os.OpenFile(env.root+"/_out/e2e-report.txt", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintln(f, time.Now().UTC().Format(time.RFC3339), line)
		f.Close()
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var bg = context.Background()

func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } // loopback readiness probe only
