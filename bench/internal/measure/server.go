package measure

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// Server is one bin/coredns process.
type Server struct {
	Name    string // kubernetes, kubetree or whoami
	Addr    string // DNS, 127.0.0.1:PORT (UDP and TCP)
	ready   string // ready plugin, host:port
	metrics string // prometheus plugin, host:port
	Log     string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	mu      sync.Mutex
	exit    string
	// proxy, when the server reaches the API server through one (StartServerCounted), counts the
	// bytes it is sent.
	proxy *CountingProxy
}

// Corefile is the same for all three but for the plugin line: no cache, no log.
func Corefile(plugin, addr, ready, metrics, kubeconfig string) string {
	var line string
	switch plugin {
	case "whoami":
		line = "whoami"
	default:
		line = fmt.Sprintf("%s cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig %s\n", plugin, kubeconfig)
		for _, o := range PluginOptions {
			line += "        " + o + "\n"
		}
		line += "    }"
	}
	if pp := ServerPprof[plugin]; pp != "" {
		line = "pprof " + pp + "\n    " + line
	}
	return fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    ready %s\n    %s\n}\n", Port(addr), metrics, ready, line)
}

// Port is addr's port.
func Port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// FreePorts picks n distinct loopback ports that are free for TCP, and the first also for UDP.
func FreePorts(n int) ([]string, error) {
	var ls []io.Closer
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []string
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		a := l.Addr().String()
		if len(out) == 0 {
			pc, err := net.ListenPacket("udp", a)
			if err != nil {
				continue // taken for UDP: try another
			}
			ls = append(ls, pc)
		}
		out = append(out, a)
	}
	return out, nil
}

// StartServer starts a server of plugin (kubernetes, kubetree or whoami), its Corefile as Corefile
// writes it.
func StartServer(ctx context.Context, dir, plugin string, trial int, kubeconfig string) (*Server, error) {
	return StartServerConf(ctx, dir, plugin, trial, func(addr, ready, metrics string) string {
		return Corefile(plugin, addr, ready, metrics, kubeconfig)
	})
}

// StartServerCounted is StartServerConf with the server's kubeconfig (the argument conf is given)
// pointing at a counting proxy of its own in front of the API server.
func StartServerCounted(ctx context.Context, dir, plugin string, trial int, kubeconfig string, conf func(addr, ready, metrics, kubeconfig string) string) (*Server, error) {
	target, err := apiServerAddr(kubeconfig)
	if err != nil {
		return nil, err
	}
	proxy, kc, err := Proxied(dir, fmt.Sprintf("%s-%d", plugin, trial), kubeconfig, target)
	if err != nil {
		return nil, err
	}
	s, err := StartServerConf(ctx, dir, plugin, trial, func(addr, ready, metrics string) string {
		return conf(addr, ready, metrics, kc)
	})
	if err != nil {
		proxy.Close()
		return nil, err
	}
	s.proxy = proxy
	return s, nil
}

// Received is what the API server has sent the server so far (TLS records included), through its
// counting proxy; NaN without one.
func (s *Server) Received() float64 {
	if s.proxy == nil {
		return math.NaN()
	}
	return float64(s.proxy.Down.Load())
}

// StartServerConf starts a server named plugin with the Corefile conf writes for its addresses.
func StartServerConf(ctx context.Context, dir, plugin string, trial int, conf func(addr, ready, metrics string) string) (*Server, error) {
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	s := &Server{Name: plugin, Addr: ports[0], ready: ports[1], metrics: ports[2], done: make(chan struct{})}
	base := filepath.Join(dir, fmt.Sprintf("%s-%d", plugin, trial))
	cf := base + ".Corefile"
	if err := os.WriteFile(cf, []byte(conf(s.Addr, s.ready, s.metrics)), 0o644); err != nil {
		return nil, err
	}
	s.Log = base + ".log"
	logFile, err := os.Create(s.Log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	binary := CoreDNSBinary
	if b := ServerBinary[plugin]; b != "" {
		binary = b
	}
	s.cmd = exec.Command(binary, "-conf", cf)
	cg := ServerCgroup[fmt.Sprintf("%s-%d", plugin, trial)] // -fleet: a cgroup per replica
	if cg == nil {
		cg = ServerCgroup[plugin]
	}
	if cg != nil {
		// The shell joins the cgroup and then becomes CoreDNS, so that every page the server
		// touches, its own copy of the binary's included, is charged to the cgroup, as in a
		// container.
		s.cmd = exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, cg.procs(), cg.binary, "-conf", cf)
	}
	s.cmd.Env = ServerEnv // nil: this process's environment
	if env, ok := PluginEnv[plugin]; ok {
		s.cmd.Env = env
	}
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Own process group (a terminal's ^C reaches us, and we stop it in order), and killed with us.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		err := s.cmd.Wait()
		s.mu.Lock()
		s.exit = fmt.Sprint(err)
		s.mu.Unlock()
		close(s.done)
	}()
	return s, nil
}

// ServerEnv is the servers' environment (-gomemlimit adds GOMEMLIMIT); nil: ours.
var ServerEnv []string

// PluginEnv is, by plugin, an environment of its own (-fleet: deploy/'s GOMEMLIMIT for kubetree
// only; the in-tree plugin runs as CoreDNS ships, without one).
var PluginEnv = map[string][]string{}

// CoreDNSBinary is <root>/bin/coredns, set once the flags are known.
var CoreDNSBinary string

// ServerBinary holds, by server name, a binary other than CoreDNSBinary to run (-audit-before).
var ServerBinary = map[string]string{}

// PluginOptions are lines both plugins' stanzas add, the same for both (-mix cluster: pods insecure).
var PluginOptions []string

// ServerPprof holds, by plugin, the address of its pprof endpoint (-profile); none: no pprof.
var ServerPprof = map[string]string{}

// ServerCgroup holds, by plugin, the memory cgroup a server runs in (-memory-limit), or by
// "plugin-trial" one replica's (-fleet); none: ours.
var ServerCgroup = map[string]*MemoryCgroup{}

// Exited says how the process ended, "" while it runs.
func (s *Server) Exited() string {
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.exit + "; log tail:\n" + tail(s.Log, 20)
	default:
		return ""
	}
}

// Stop sends SIGTERM, then SIGKILL after 10 s; it returns once the process is gone.
func (s *Server) Stop() {
	if s.proxy != nil {
		defer s.proxy.Close()
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Startup is how long one process took, from exec to each milestone; -1 when not seen.
type Startup struct {
	Ready      time.Duration // /ready answers 200
	Answer     time.Duration // the probe name answers with the right address
	FirstReply time.Duration // the first DNS reply of any kind to the probe
	FirstRcode string
}

// WaitStartup polls /ready and, unless name is "", the probe name over UDP, both in tight loops, until
// both succeed (at most 120 s).
func (s *Server) WaitStartup(ctx context.Context, name, ip string) (Startup, error) {
	return s.WaitStartupWithin(ctx, name, ip, 120*time.Second)
}

// WaitStartupWithin is WaitStartup with another limit (-fleet: many replicas list at once).
func (s *Server) WaitStartupWithin(ctx context.Context, name, ip string, limit time.Duration) (Startup, error) {
	st := Startup{Ready: -1, Answer: -1, FirstReply: -1}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		hc := &http.Client{Timeout: 200 * time.Millisecond}
		for ctx.Err() == nil && s.Exited() == "" {
			resp, err := hc.Get("http://" + s.ready + "/ready")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					st.Ready = time.Since(s.started)
					return
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	if name != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: "udp", Timeout: 100 * time.Millisecond}
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			for ctx.Err() == nil && s.Exited() == "" {
				r, _, err := c.Exchange(m, s.Addr)
				if err == nil {
					if st.FirstReply < 0 {
						st.FirstReply = time.Since(s.started)
						st.FirstRcode = dns.RcodeToString[r.Rcode]
					}
					if HasA(r, ip) {
						st.Answer = time.Since(s.started)
						return
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if e := s.Exited(); e != "" {
		return st, fmt.Errorf("%s exited while starting: %s", s.Name, e)
	}
	if st.Ready < 0 || (name != "" && st.Answer < 0) {
		if err := context.Cause(ctx); err != nil && ctx.Err() != context.DeadlineExceeded {
			return st, err
		}
		return st, fmt.Errorf("%s: not ready/answering %s after %s; log tail:\n%s", s.Name, name, limit, tail(s.Log, 20))
	}
	return st, nil
}

// Memory is the median of 5 samples, 200 ms apart (the heap moves with every GC cycle).
func (s *Server) Memory(ctx context.Context) (Mem, error) {
	var rss, heap []float64
	for i := range 5 {
		if i > 0 {
			if err := Sleep(ctx, 200*time.Millisecond); err != nil {
				return Mem{}, err
			}
		}
		r, err := ProcStatusBytes(s.PID(), "VmRSS")
		if err != nil {
			return Mem{}, fmt.Errorf("%s: %w", s.Name, err)
		}
		h, err := s.metric("go_memstats_heap_alloc_bytes")
		if err != nil {
			return Mem{}, fmt.Errorf("%s: %w", s.Name, err)
		}
		rss, heap = append(rss, r), append(heap, h)
	}
	return Mem{Median(rss), Median(heap)}, nil
}

// CPU is the server's user + system CPU time so far, in seconds.
func (s *Server) CPU() (float64, error) { return ProcCPU(s.PID()) }

// PID is the server's process ID.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// ProfileCPU takes a CPU profile of a server for d and prints its top functions.
func ProfileCPU(ctx context.Context, name, pprof, dir string, d time.Duration) {
	path := filepath.Join(dir, "cpu-"+name+".pprof")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		Logf("profile of %s: %v", name, err)
		return
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprof, int(d.Seconds()))
	out, err := exec.CommandContext(ctx, "curl", "-sS", "-o", path, url).CombinedOutput()
	if err != nil {
		Logf("profile of %s: %v %s", name, err, out)
		return
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=30", path).CombinedOutput()
	if err != nil {
		Logf("pprof of %s: %v", name, err)
	}
	Logf("CPU profile of %s (%s):\n%s", name, path, top)
}
