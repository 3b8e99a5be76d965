package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The memory of a full relist (-relist): kubernetes and kubetree, each with the Deployment's
// GOMEMLIMIT (-gomemlimit), start on the synthetic cluster; their peak RSS (VmHWM) through start-up
// is read, the peak is reset, and the API server is restarted: its new watch cache cannot resume
// the watches, so every informer lists everything again while the old state is still held. The
// peak through that relist is read once a service created after the restart answers on both, and
// every query sent meanwhile for a name that exists is checked.

type relistResult struct {
	startup    map[string]startup
	startPeak  map[string]float64 // VmHWM through start-up and sync
	relistPeak map[string]float64 // VmHWM from the restart until the relist is served
	// VmHWM counts the binary's pages too (RssFile): clean pages of a file, which the kernel takes
	// back under a cgroup's limit before it kills anything, and which depend on what else on the
	// host has the binary in the page cache (here the other server runs the same one). RssAnon is
	// the memory that cannot be taken back; it has no peak counter, so it is sampled.
	anonPeak   map[string]float64 // the highest RssAnon sampled through the relist
	startAnon  map[string]float64 // the highest RssAnon sampled through start-up and sync
	fileRSS    map[string]float64 // RssFile at the end of the relist
	steady     map[string]mem     // before the restart
	relistTook map[string]time.Duration
	// CPU seconds and bytes from the API server (through each server's counting proxy, TLS records
	// included): from exec until 5 s after ready; from the restart until 5 s after the relist is served.
	startCPU, relistCPU, startBytes, relistBytes map[string]float64
	probes                                       map[string]*relistProbe
	cluster                                      *cluster
	goMemLimit                                   string
	restartTook                                  time.Duration
	// With -memory-limit: kubetree's cgroup, what the kernel counted in it, and whether kubetree
	// was still running at the end.
	memoryLimit string
	cgroup      *cgroupStats
	survived    bool
}

// hogSink keeps the busy loops of -cpu-hogs from being optimized away.
var hogSink atomic.Int64

type relistProbe struct{ answered, wrong, failed atomic.Int64 }

func runRelist(ctx context.Context, cfg *config) (err error) {
	began := time.Now()
	coreDNSBinary = filepath.Join(cfg.root, "bin/coredns")
	if cfg.goMemLimit != "" {
		serverEnv = append(os.Environ(), "GOMEMLIMIT="+cfg.goMemLimit)
	}
	if cfg.cpuHogs > 0 {
		hogCtx, stopHogs := context.WithCancel(ctx)
		defer stopHogs()
		for range cfg.cpuHogs {
			go func() {
				for hogCtx.Err() == nil {
					local := 0
					for i := 0; i < 1_000_000; i++ {
						local += i
					}
					hogSink.Add(int64(local))
				}
			}()
		}
	}
	return withControlPlane(ctx, cfg, "kubetree-bench-relist-", func(dir string, cp *controlPlane) error {
		return measureRelist(ctx, cfg, dir, cp, began)
	})
}

func measureRelist(ctx context.Context, cfg *config, dir string, cp *controlPlane, began time.Time) (err error) {
	logf("== create the cluster")
	cl, err := populate(ctx, cp, cfg, nil)
	if err != nil {
		return err
	}
	res := &relistResult{startup: map[string]startup{}, startPeak: map[string]float64{}, relistPeak: map[string]float64{},
		steady: map[string]mem{}, relistTook: map[string]time.Duration{}, probes: map[string]*relistProbe{},
		anonPeak: map[string]float64{}, fileRSS: map[string]float64{}, startAnon: map[string]float64{},
		cluster: cl, goMemLimit: cfg.goMemLimit,
		startCPU: map[string]float64{}, relistCPU: map[string]float64{}, startBytes: map[string]float64{}, relistBytes: map[string]float64{}}

	servers := map[string]*server{}
	var cg *memoryCgroup
	defer func() {
		for _, s := range servers {
			s.stop()
		}
		if cg != nil {
			if err := cg.remove(); err != nil {
				logf("removing kubetree's memory cgroup: %v", err)
			}
		}
	}()
	if cfg.memoryLimit != "" {
		limit, err := resource.ParseQuantity(cfg.memoryLimit)
		if err != nil {
			return fmt.Errorf("-memory-limit: %w", err)
		}
		if cg, err = newMemoryCgroup(fmt.Sprintf("kubetree-bench-%d", os.Getpid()), limit.Value()); err != nil {
			return err
		}
		serverCgroup["kubetree"] = cg
		res.memoryLimit = cfg.memoryLimit
	}
	probe := cl.probe()
	for _, p := range []string{"kubernetes", "kubetree"} {
		logf("== start %s", p)
		s, err := startServerCounted(ctx, dir, p, 0, cp.kubeconfig, func(addr, ready, metrics, kc string) string {
			return corefile(p, addr, ready, metrics, kc)
		})
		if err != nil {
			return err
		}
		servers[p] = s
		startSampled, stopStartSampling := &sampledPeak{}, make(chan struct{})
		sampled := make(chan struct{})
		go func() { defer close(sampled); startSampled.sample(s.cmd.Process.Pid, "RssAnon", stopStartSampling) }()
		res.startup[p], err = s.waitStartup(ctx, probe.name, probe.ip)
		if err == nil {
			err = sleep(ctx, 5*time.Second) // what the first tree left for the collector
		}
		close(stopStartSampling)
		<-sampled
		res.startAnon[p] = startSampled.max
		if err != nil {
			return err
		}
		if res.startCPU[p], err = s.cpu(); err != nil {
			return err
		}
		res.startBytes[p] = s.received()
		logf("%s ready after %s; %.2f s CPU, %s from the API server", p, ms(res.startup[p].ready), res.startCPU[p], mib(res.startBytes[p]))
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		pid := servers[p].cmd.Process.Pid
		if res.startPeak[p], err = procStatusBytes(pid, "VmHWM"); err != nil {
			return err
		}
		if res.steady[p], err = servers[p].memory(ctx); err != nil {
			return err
		}
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			return fmt.Errorf("resetting %s's peak RSS: %w", p, err)
		}
		logf("%s: peak RSS through start-up %s; steady RSS %s, heap %s", p, mib(res.startPeak[p]), mib(res.steady[p].rss), mib(res.steady[p].heap))
	}

	// Queries for names that exist keep going through the relist; every answer is checked.
	names := cl.services[:min(200, len(cl.services))]
	stopProbes := make(chan struct{})
	var probes sync.WaitGroup
	for _, p := range []string{"kubernetes", "kubetree"} {
		pr := &relistProbe{}
		res.probes[p] = pr
		probes.Go(func() { probeNames(ctx, servers[p].addr, names, pr, stopProbes) })
	}

	anon := map[string]*sampledPeak{}
	for _, p := range []string{"kubernetes", "kubetree"} {
		anon[p] = &sampledPeak{}
		probes.Go(func() { anon[p].sample(servers[p].cmd.Process.Pid, "RssAnon", stopProbes) })
	}

	logf("== restart the API server (its watch cache is new: every watch relists)")
	for _, p := range []string{"kubernetes", "kubetree"} {
		if res.relistCPU[p], err = servers[p].cpu(); err != nil {
			return err
		}
		res.relistBytes[p] = servers[p].received()
	}
	start := time.Now()
	for _, step := range []string{"stop-apiserver", "start-apiserver"} {
		if out, err := exec.Command(filepath.Join(cfg.root, "hack/cluster.sh"), step, cp.dir).CombinedOutput(); err != nil {
			close(stopProbes)
			probes.Wait()
			return fmt.Errorf("hack/cluster.sh %s: %v\n%s", step, err, out)
		}
	}
	res.restartTook = time.Since(start)
	after := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: cl.namespaces[0], Name: "after-relist"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	var created *corev1.Service
	for created == nil {
		if created, err = cp.client.CoreV1().Services(after.Namespace).Create(ctx, after, metav1.CreateOptions{}); err != nil {
			created = nil
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		if err := waitA(ctx, servers[p].addr, "after-relist."+after.Namespace+".svc.cluster.local.", created.Spec.ClusterIP); err != nil {
			if p == "kubetree" && cg != nil {
				st, serr := cg.stats()
				if serr != nil {
					return fmt.Errorf("%s: %w (and its cgroup: %v)", p, err, serr)
				}
				return fmt.Errorf("%s (in its %s memory cgroup: peak usage %s, limit reached %d times, OOM kills %d; exit: %q): %w",
					p, cfg.memoryLimit, mib(st.peak), st.limitHits, st.oomKills, servers[p].exited(), err)
			}
			return fmt.Errorf("%s: %w", p, err)
		}
		res.relistTook[p] = time.Since(start)
	}
	if err := sleep(ctx, 5*time.Second); err != nil { // what the relist left for the collector
		return err
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		c, err := servers[p].cpu()
		if err != nil {
			return err
		}
		res.relistCPU[p] = c - res.relistCPU[p]
		res.relistBytes[p] = servers[p].received() - res.relistBytes[p]
		logf("%s: %.2f s CPU through the relist, %s from the API server", p, res.relistCPU[p], mib(res.relistBytes[p]))
	}
	close(stopProbes)
	probes.Wait()
	if cg != nil {
		st, err := cg.stats()
		if err != nil {
			return err
		}
		res.cgroup, res.survived = &st, servers["kubetree"].exited() == ""
		logf("kubetree in a %s memory cgroup: peak usage %s, limit reached %d times, OOM kills %d, still running: %v",
			cfg.memoryLimit, mib(st.peak), st.limitHits, st.oomKills, res.survived)
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		if res.relistPeak[p], err = procStatusBytes(servers[p].cmd.Process.Pid, "VmHWM"); err != nil {
			return err
		}
		if res.fileRSS[p], err = procStatusBytes(servers[p].cmd.Process.Pid, "RssFile"); err != nil {
			return err
		}
		res.anonPeak[p] = anon[p].max
		pr := res.probes[p]
		logf("%s: peak RSS through the relist %s; served after %s; queries meanwhile: %d right, %d wrong, %d unanswered",
			p, mib(res.relistPeak[p]), res.relistTook[p].Round(time.Millisecond), pr.answered.Load(), pr.wrong.Load(), pr.failed.Load())
	}
	report := res.markdown(cfg, time.Since(began))
	return publish(cfg, report)
}

// probeNames asks for the A record of each service in turn until stop, and counts answers that are
// right (the service's cluster IP or its endpoints), wrong, or missing.
func probeNames(ctx context.Context, addr string, names []*svc, pr *relistProbe, stop chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		s := names[i%len(names)]
		r, err := ask(ctx, addr, s.fqdn(), dns.TypeA)
		switch {
		case err != nil:
			pr.failed.Add(1)
		case r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0:
			pr.wrong.Add(1)
		case s.headless && hasA(r, s.ips[0]), !s.headless && hasA(r, s.clusterIP):
			pr.answered.Add(1)
		default:
			pr.wrong.Add(1)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sampledPeak is the highest value of a /proc/PID/status field read every 20 ms until stop.
type sampledPeak struct{ max float64 }

func (s *sampledPeak) sample(pid int, field string, stop chan struct{}) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if v, err := procStatusBytes(pid, field); err == nil && v > s.max {
			s.max = v
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// procStatusBytes reads a kB field of /proc/PID/status, in bytes.
func procStatusBytes(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseFloat(f[0], 64)
				return n * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func (res *relistResult) markdown(cfg *config, took time.Duration) string {
	var b strings.Builder
	endpoints := len(res.cluster.services) * cfg.endpoints
	fmt.Fprintf(&b, "# A full relist: kubetree beside the in-tree kubernetes plugin\n\n")
	limit := ""
	if res.memoryLimit != "" {
		limit = " -memory-limit " + res.memoryLimit
	}
	if cfg.cpuHogs > 0 {
		limit += fmt.Sprintf(" -cpu-hogs %d", cfg.cpuHogs)
	}
	fmt.Fprintf(&b, "`cd bench && go run . -relist -services %d -endpoints %d -headless %.2f -gomemlimit %s%s`, %s, in %s.\n\n",
		cfg.services, cfg.endpoints, cfg.headless, orDash(res.goMemLimit), limit, time.Now().UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	fmt.Fprintf(&b, "%d services (%d headless), %d endpoints; both servers run with GOMEMLIMIT=%s. The API server is restarted; its new watch cache cannot resume the watches, so both list everything again while holding the old state.\n\n",
		len(res.cluster.services), res.cluster.headless, endpoints, orDash(res.goMemLimit))
	fmt.Fprintf(&b, "| what | kubernetes | kubetree | kubetree/kubernetes |\n| --- | ---: | ---: | ---: |\n")
	row := func(what string, k8s, kt float64, f func(float64) string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f |\n", what, f(k8s), f(kt), kt/k8s)
	}
	row("start → ready", res.startup["kubernetes"].ready.Seconds(), res.startup["kubetree"].ready.Seconds(), func(v float64) string { return fmt.Sprintf("%.2f s", v) })
	row("peak RSS (VmHWM) through start-up", res.startPeak["kubernetes"], res.startPeak["kubetree"], mib)
	row("peak anonymous RSS through start-up and 5 s after (RssAnon, sampled every 20 ms)", res.startAnon["kubernetes"], res.startAnon["kubetree"], mib)
	row("RSS, steady", res.steady["kubernetes"].rss, res.steady["kubetree"].rss, mib)
	row("Go heap, steady", res.steady["kubernetes"].heap, res.steady["kubetree"].heap, mib)
	row("peak RSS (VmHWM) through the relist", res.relistPeak["kubernetes"], res.relistPeak["kubetree"], mib)
	row("peak anonymous RSS through the relist (RssAnon, sampled every 20 ms)", res.anonPeak["kubernetes"], res.anonPeak["kubetree"], mib)
	row("file-backed RSS after the relist (RssFile: the binary's pages)", res.fileRSS["kubernetes"], res.fileRSS["kubetree"], mib)
	fs := func(v float64) string { return fmt.Sprintf("%.2f s", v) }
	row("CPU from exec to 5 s after ready", res.startCPU["kubernetes"], res.startCPU["kubetree"], fs)
	row("bytes from the API server, exec to 5 s after ready (TLS records included)", res.startBytes["kubernetes"], res.startBytes["kubetree"], mib)
	row("CPU from the restart to 5 s after the new service answered", res.relistCPU["kubernetes"], res.relistCPU["kubetree"], fs)
	row("bytes from the API server through the relist", res.relistBytes["kubernetes"], res.relistBytes["kubetree"], mib)
	row("restart → a new service answered", res.relistTook["kubernetes"].Seconds(), res.relistTook["kubetree"].Seconds(), func(v float64) string { return fmt.Sprintf("%.1f s", v) })
	for _, p := range []string{"kubernetes", "kubetree"} {
		pr := res.probes[p]
		fmt.Fprintf(&b, "\n%s: queries for existing names during the relist: %d right, %d wrong, %d unanswered.", p, pr.answered.Load(), pr.wrong.Load(), pr.failed.Load())
	}
	if c := res.cgroup; c != nil {
		fmt.Fprintf(&b, "\n\nkubetree ran in a memory cgroup limited to %s, as deploy/'s container (the in-tree plugin did not: it needs several times that): "+
			"the cgroup's peak usage %s, the limit reached %d times (each time the kernel reclaimed page cache), %d OOM kills; kubetree still running at the end: %v.",
			res.memoryLimit, mib(c.peak), c.limitHits, c.oomKills, res.survived)
	}
	fmt.Fprintf(&b, "\n\nLoad average at the end: %s (2 CPUs; %d busy loops of bench itself beside the servers, -cpu-hogs).", loadavg(), cfg.cpuHogs)
	fmt.Fprintf(&b, "\n\nThe API server took %s to restart. Peak RSS is VmHWM, reset (clear_refs 5) after start-up. VmHWM counts the binary's file-backed pages, which both servers share through the page cache and the kernel reclaims under a cgroup's limit; RssAnon is what it cannot.\n", res.restartTook.Round(time.Millisecond))
	return b.String()
}
