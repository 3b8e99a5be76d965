package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// server is one bin/coredns process.
type server struct {
	name    string // kubernetes, kubetree or whoami
	addr    string // DNS, 127.0.0.1:PORT (UDP and TCP)
	ready   string // ready plugin, host:port
	metrics string // prometheus plugin, host:port
	log     string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	mu      sync.Mutex
	exit    string
	// proxy, when the server reaches the API server through one (startServerCounted), counts the
	// bytes it is sent.
	proxy *countingProxy
}

// corefile is the same for all three but for the plugin line: no cache, no log.
func corefile(plugin, addr, ready, metrics, kubeconfig string) string {
	var line string
	switch plugin {
	case "whoami":
		line = "whoami"
	default:
		line = fmt.Sprintf("%s cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig %s\n    }", plugin, kubeconfig)
	}
	if pp := serverPprof[plugin]; pp != "" {
		line = "pprof " + pp + "\n    " + line
	}
	return fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    ready %s\n    %s\n}\n", port(addr), metrics, ready, line)
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// freePorts picks n distinct loopback ports that are free for TCP, and the first also for UDP.
func freePorts(n int) ([]string, error) {
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

func startServer(ctx context.Context, dir, plugin string, trial int, kubeconfig string) (*server, error) {
	return startServerConf(ctx, dir, plugin, trial, func(addr, ready, metrics string) string {
		return corefile(plugin, addr, ready, metrics, kubeconfig)
	})
}

// startServerCounted is startServerConf with the server's kubeconfig (the argument conf is given)
// pointing at a counting proxy of its own in front of the API server.
func startServerCounted(ctx context.Context, dir, plugin string, trial int, kubeconfig string, conf func(addr, ready, metrics, kubeconfig string) string) (*server, error) {
	target, err := apiServerAddr(kubeconfig)
	if err != nil {
		return nil, err
	}
	proxy, kc, err := proxied(dir, fmt.Sprintf("%s-%d", plugin, trial), kubeconfig, target)
	if err != nil {
		return nil, err
	}
	s, err := startServerConf(ctx, dir, plugin, trial, func(addr, ready, metrics string) string {
		return conf(addr, ready, metrics, kc)
	})
	if err != nil {
		proxy.close()
		return nil, err
	}
	s.proxy = proxy
	return s, nil
}

// received is what the API server has sent the server so far (TLS records included), through its
// counting proxy; NaN without one.
func (s *server) received() float64 {
	if s.proxy == nil {
		return math.NaN()
	}
	return float64(s.proxy.down.Load())
}

// startServerConf starts a server named plugin with the Corefile conf writes for its addresses.
func startServerConf(ctx context.Context, dir, plugin string, trial int, conf func(addr, ready, metrics string) string) (*server, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s := &server{name: plugin, addr: ports[0], ready: ports[1], metrics: ports[2], done: make(chan struct{})}
	base := filepath.Join(dir, fmt.Sprintf("%s-%d", plugin, trial))
	cf := base + ".Corefile"
	if err := os.WriteFile(cf, []byte(conf(s.addr, s.ready, s.metrics)), 0o644); err != nil {
		return nil, err
	}
	s.log = base + ".log"
	logFile, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	binary := coreDNSBinary
	if b := serverBinary[plugin]; b != "" {
		binary = b
	}
	s.cmd = exec.Command(binary, "-conf", cf)
	cg := serverCgroup[fmt.Sprintf("%s-%d", plugin, trial)] // -fleet: a cgroup per replica
	if cg == nil {
		cg = serverCgroup[plugin]
	}
	if cg != nil {
		// The shell joins the cgroup and then becomes CoreDNS, so that every page the server
		// touches, its own copy of the binary's included, is charged to the cgroup, as in a
		// container.
		s.cmd = exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, cg.procs(), cg.binary, "-conf", cf)
	}
	s.cmd.Env = serverEnv // nil: this process's environment
	if env, ok := pluginEnv[plugin]; ok {
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

// serverEnv is the servers' environment (-gomemlimit adds GOMEMLIMIT); nil: ours.
var serverEnv []string

// pluginEnv is, by plugin, an environment of its own (-fleet: deploy/'s GOMEMLIMIT for kubetree
// only; the in-tree plugin runs as CoreDNS ships, without one).
var pluginEnv = map[string][]string{}

// coreDNSBinary is <root>/bin/coredns, set once the flags are known.
var coreDNSBinary string

// serverBinary holds, by server name, a binary other than coreDNSBinary to run (-audit-before).
var serverBinary = map[string]string{}

// serverPprof holds, by plugin, the address of its pprof endpoint (-profile); none: no pprof.
var serverPprof = map[string]string{}

// serverCgroup holds, by plugin, the memory cgroup a server runs in (-memory-limit), or by
// "plugin-trial" one replica's (-fleet); none: ours.
var serverCgroup = map[string]*memoryCgroup{}

// exited says how the process ended, "" while it runs.
func (s *server) exited() string {
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.exit + "; log tail:\n" + tail(s.log, 20)
	default:
		return ""
	}
}

// stop sends SIGTERM, then SIGKILL after 10 s; it returns once the process is gone.
func (s *server) stop() {
	if s.proxy != nil {
		defer s.proxy.close()
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

// startup is how long one process took, from exec to each milestone; -1 when not seen.
type startup struct {
	ready      time.Duration // /ready answers 200
	answer     time.Duration // the probe name answers with the right address
	firstReply time.Duration // the first DNS reply of any kind to the probe
	firstRcode string
}

// waitStartup polls /ready and, unless name is "", the probe name over UDP, both in tight loops, until
// both succeed (at most 120 s).
func (s *server) waitStartup(ctx context.Context, name, ip string) (startup, error) {
	return s.waitStartupWithin(ctx, name, ip, 120*time.Second)
}

// waitStartupWithin is waitStartup with another limit (-fleet: many replicas list at once).
func (s *server) waitStartupWithin(ctx context.Context, name, ip string, limit time.Duration) (startup, error) {
	st := startup{ready: -1, answer: -1, firstReply: -1}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		hc := &http.Client{Timeout: 200 * time.Millisecond}
		for ctx.Err() == nil && s.exited() == "" {
			resp, err := hc.Get("http://" + s.ready + "/ready")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					st.ready = time.Since(s.started)
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
			for ctx.Err() == nil && s.exited() == "" {
				r, _, err := c.Exchange(m, s.addr)
				if err == nil {
					if st.firstReply < 0 {
						st.firstReply = time.Since(s.started)
						st.firstRcode = dns.RcodeToString[r.Rcode]
					}
					if hasA(r, ip) {
						st.answer = time.Since(s.started)
						return
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if e := s.exited(); e != "" {
		return st, fmt.Errorf("%s exited while starting: %s", s.name, e)
	}
	if st.ready < 0 || (name != "" && st.answer < 0) {
		if err := context.Cause(ctx); err != nil && ctx.Err() != context.DeadlineExceeded {
			return st, err
		}
		return st, fmt.Errorf("%s: not ready/answering %s after %s; log tail:\n%s", s.name, name, limit, tail(s.log, 20))
	}
	return st, nil
}

func hasA(r *dns.Msg, ip string) bool {
	if r.Rcode != dns.RcodeSuccess {
		return false
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
			return true
		}
	}
	return false
}

// mem is a process's memory: VmRSS and the Go heap (go_memstats_heap_alloc_bytes), in bytes.
type mem struct{ rss, heap float64 }

// memory is the median of 5 samples, 200 ms apart (the heap moves with every GC cycle).
func (s *server) memory(ctx context.Context) (mem, error) {
	var rss, heap []float64
	for i := range 5 {
		if i > 0 {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return mem{}, err
			}
		}
		r, err := procRSS(s.cmd.Process.Pid)
		if err != nil {
			return mem{}, fmt.Errorf("%s: %w", s.name, err)
		}
		h, err := s.metric("go_memstats_heap_alloc_bytes")
		if err != nil {
			return mem{}, fmt.Errorf("%s: %w", s.name, err)
		}
		rss, heap = append(rss, r), append(heap, h)
	}
	return mem{median(rss), median(heap)}, nil
}

func procRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseFloat(f[0], 64)
				return n * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on Linux).
const clockTicks = 100

// procCPU is the process's user + system CPU time so far, in seconds.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command may hold spaces and parentheses: the fields start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return (u + s) / clockTicks, nil
}

func (s *server) cpu() (float64, error) { return procCPU(s.cmd.Process.Pid) }

// metric is the value of an unlabelled metric from the prometheus plugin.
func (s *server) metric(name string) (float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
