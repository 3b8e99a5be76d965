package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// A relist storm (-fleet N): N replicas of one plugin watch one API server holding the synthetic
// cluster, with EndpointSlices changing at -churn a second and changes whose answers are timed
// (a ClusterIP service created, a headless service's endpoint moved) made twice a second; the API
// server is restarted, its new watch cache cannot resume any watch, and every replica lists
// everything again at once. Measured: the new API server's memory and CPU from its start until
// every replica answers a change made after it, each replica's peak memory (each in a memory
// cgroup of its own: kubetree's as deploy/'s container, the in-tree plugin's larger), and the
// time from each change to its answer on every replica, before the restart and through the
// relist. The same restart without any replica first: what the API server costs by itself. The
// plugins' storms run one after another against the same data.

// fleetReplica is one replica's figures in a storm.
type fleetReplica struct {
	ready                 time.Duration // start → ready and answering
	steadyRSS, steadyAnon float64       // before the restart
	hwm, anon, cgroupPeak float64       // peaks from the restart on (VmHWM, sampled RssAnon, the cgroup's)
	limitHits, oomKills   int64
	answered              time.Duration // restart → answers the service created after it; -1: never
	exited                string
}

// probeKinds are the changes whose answers are timed.
var probeKinds = []string{"ClusterIP service created", "headless endpoint moved"}

// phases of a storm in which a change is made.
const (
	phaseSteady = "steady"
	phaseRelist = "relist"
)

// fleetStorm is one restart of the API server with the replicas of one plugin ("" none).
type fleetStorm struct {
	plugin   string
	replicas []*fleetReplica
	// The API server: its RSS over time (seconds since the restart began, bytes) and its CPU
	// seconds (cumulative, of the process then running), sampled every 100 ms.
	apiT, apiRSS, apiCPU []float64
	apiPID               []int
	apiSteadyRSS         float64 // before the restart
	apiPeak              float64 // the new process's VmHWM at the end of the window
	apiCPUTotal          float64 // the new process's CPU from its start to the end of the window
	apiCPUPeak           float64 // the highest 1-second average, cores
	etcdCPU              float64 // etcd's CPU in the same window
	restartTook          time.Duration
	apiStartFailures     int           // starts of the new API server that exited before it was ready
	writable             time.Duration // restart → the first write accepted
	allAnswered          time.Duration // restart → every replica answers the change made at `writable`
	window               time.Duration // restart → the end of the measurement
	// Changes made and their answers, by phase and kind: every replica's time, and how many
	// replica-answers never came within probeLimit.
	latency    map[string]map[string][]time.Duration
	unanswered map[string]map[string]int
	// firstAnswer is, per change, its first replica's answer, by phase and kind.
	firstAnswer map[string]map[string][]time.Duration
	// The churn: slice updates asked for and done, and over how long, before the restart.
	churnDone, churnFailed int64
	churnSteady            time.Duration
	churnSteadyDone        int64
}

type fleetResult struct {
	machine  machine
	version  string
	began    time.Time
	ended    time.Time
	cluster  *cluster
	replicas int
	storms   []*fleetStorm
	limits   map[string]string
	env      map[string]string
	failures []string // storms that did not finish, and why
}

// probeLimit is how long a replica is given to answer a change.
const probeLimit = 2 * time.Minute

func runFleet(ctx context.Context, cfg *config) error {
	began := time.Now()
	coreDNSBinary = filepath.Join(cfg.root, "bin/coredns")
	if _, err := os.Stat(coreDNSBinary); err != nil {
		return fmt.Errorf("%s missing (`make build` in %s): %w", coreDNSBinary, cfg.root, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go guardMemory(ctx, cancel, cfg.memGuard)
	// The API server comes back after reading every object from etcd into its new watch cache:
	// at 1M endpoints that can take longer than cluster.sh's default 90 s.
	os.Setenv("KUBETREE_READY_TIMEOUT", "600")
	if cfg.goMemLimit != "" {
		pluginEnv["kubetree"] = append(os.Environ(), "GOMEMLIMIT="+cfg.goMemLimit)
	}
	return withControlPlane(ctx, cfg, "kubetree-bench-fleet-", func(dir string, cp *controlPlane) error {
		res := &fleetResult{machine: machineInfo(cfg.root), version: cp.version, began: began, replicas: cfg.fleet,
			limits: map[string]string{"kubetree": cfg.memoryLimit, "kubernetes": cfg.fleetLimitInTree},
			env:    map[string]string{"kubetree": "GOMEMLIMIT=" + orDash(cfg.goMemLimit), "kubernetes": "none"}}
		logf("== create the cluster")
		cl, err := populate(ctx, cp, cfg, nil)
		if err != nil {
			return err
		}
		res.cluster = cl
		writer, err := protobufClient(cp.kubeconfig)
		if err != nil {
			return err
		}
		var failed error
		for _, p := range append([]string{""}, cfg.fleetPlugins...) {
			st, err := measureStorm(ctx, cfg, dir, cp, writer, cl, p)
			if err != nil {
				// The storms measured so far are reported all the same.
				logf("storm %q failed: %v", p, err)
				res.failures = append(res.failures, fmt.Sprintf("%s: %v", orDash(p), firstLine(err.Error())))
				failed = errors.Join(failed, err)
				if ctx.Err() != nil {
					break
				}
				continue
			}
			res.storms = append(res.storms, st)
			// The services the probes created stay; the next storm lists them too (a few hundred
			// among 10,000).
		}
		res.ended = time.Now()
		report := res.markdown(cfg)
		fmt.Println(report)
		if cfg.out != "" && len(res.storms) > 0 {
			if err := res.chart(filepath.Join(filepath.Dir(cfg.out), "fleet-apiserver-memory.svg")); err != nil {
				return err
			}
			if err := os.WriteFile(cfg.out, []byte(report), 0o644); err != nil {
				return err
			}
			logf("wrote %s", cfg.out)
		}
		return failed
	})
}

// tail2 is the last n lines of s.
func tail2(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// guardMemory ends the run before the machine runs out of memory: when what is in use (MemTotal
// less MemAvailable) passes limit bytes.
func guardMemory(ctx context.Context, cancel context.CancelCauseFunc, limit float64) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		total, err1 := meminfo("MemTotal")
		avail, err2 := meminfo("MemAvailable")
		if err1 == nil && err2 == nil && total-avail > limit {
			cancel(fmt.Errorf("the machine's memory in use reached %s (-mem-guard %s): stopped", mib(total-avail), mib(limit)))
			return
		}
	}
}

func meminfo(field string) (float64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			var kb float64
			_, err := fmt.Sscan(v, &kb)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/meminfo", field)
}

// protobufClient writes the churn and the probes' changes: protobuf, as the controllers do, and no
// client-side rate limit.
func protobufClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.QPS, rc.Burst = -1, 0
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}

func measureStorm(ctx context.Context, cfg *config, dir string, cp *controlPlane, writer kubernetes.Interface, cl *cluster, plugin string) (st *fleetStorm, err error) {
	st = &fleetStorm{plugin: plugin, latency: map[string]map[string][]time.Duration{}, unanswered: map[string]map[string]int{},
		firstAnswer: map[string]map[string][]time.Duration{}}
	for _, ph := range []string{phaseSteady, phaseRelist} {
		st.latency[ph], st.unanswered[ph], st.firstAnswer[ph] = map[string][]time.Duration{}, map[string]int{}, map[string][]time.Duration{}
	}
	name := plugin
	if name == "" {
		name = "no replicas"
	}
	logf("== storm: %s", name)
	var servers []*server
	var cgroups []*memoryCgroup
	defer func() {
		for _, s := range servers {
			s.stop()
		}
		for _, cg := range cgroups {
			if err := cg.remove(); err != nil {
				logf("removing a memory cgroup: %v", err)
			}
		}
	}()
	if plugin != "" {
		limit, err := resource.ParseQuantity(map[string]string{"kubetree": cfg.memoryLimit, "kubernetes": cfg.fleetLimitInTree}[plugin])
		if err != nil {
			return nil, fmt.Errorf("%s's memory limit: %w", plugin, err)
		}
		probe := cl.probe()
		var wg sync.WaitGroup
		errs := make([]error, cfg.fleet)
		for i := range cfg.fleet {
			cg, err := newMemoryCgroup(fmt.Sprintf("kubetree-fleet-%d-%s-%d", os.Getpid(), plugin, i), limit.Value())
			if err != nil {
				return nil, err
			}
			cgroups = append(cgroups, cg)
			serverCgroup[fmt.Sprintf("%s-%d", plugin, i)] = cg
			s, err := startServer(ctx, dir, plugin, i, cp.kubeconfig)
			if err != nil {
				return nil, err
			}
			servers = append(servers, s)
			r := &fleetReplica{answered: -1}
			st.replicas = append(st.replicas, r)
			wg.Go(func() {
				su, err := s.waitStartupWithin(ctx, probe.name, probe.ip, 15*time.Minute)
				r.ready, errs[i] = su.answer, err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		logf("%d %s replicas ready, the last after %s", cfg.fleet, plugin, slices.MaxFunc(st.replicas, func(a, b *fleetReplica) int { return int(a.ready - b.ready) }).ready.Round(time.Millisecond))
		if err := sleep(ctx, 5*time.Second); err != nil {
			return nil, err
		}
		for i, s := range servers {
			r, pid := st.replicas[i], s.cmd.Process.Pid
			r.steadyRSS, _ = procStatusBytes(pid, "VmRSS")
			r.steadyAnon, _ = procStatusBytes(pid, "RssAnon")
		}
	}

	// Churn and timed changes from now until the end of the window.
	stop := make(chan struct{})
	stopBackground := sync.OnceFunc(func() { close(stop) })
	var bg sync.WaitGroup
	defer func() {
		stopBackground()
		bg.Wait()
	}()
	ch := &churner{}
	churnStart := time.Now()
	bg.Go(func() { ch.run(ctx, writer, cl, cfg, stop) })
	var restartAt atomic.Pointer[time.Time]
	pr := &prober{storm: st, servers: servers, writer: writer, cl: cl, restartAt: &restartAt, controllerShaped: cfg.controllerSlices}
	if plugin != "" {
		bg.Go(func() { pr.run(ctx, stop) })
	}
	if err := sleep(ctx, cfg.fleetSteady); err != nil {
		return nil, err
	}
	st.churnSteady, st.churnSteadyDone = time.Since(churnStart), ch.done.Load()
	logf("steady: %d slice updates in %s (%.0f/s), %d failed", st.churnSteadyDone, st.churnSteady.Round(time.Millisecond),
		float64(st.churnSteadyDone)/st.churnSteady.Seconds(), ch.failed.Load())

	// Peaks from here on.
	for i, s := range servers {
		pid := s.cmd.Process.Pid
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			return nil, fmt.Errorf("resetting %s-%d's peak RSS: %w", plugin, i, err)
		}
		if err := cgroups[i].resetPeak(); err != nil {
			return nil, err
		}
	}
	pidFile := filepath.Join(cp.dir, "kube-apiserver.pid")
	oldPID, err := readPID(pidFile)
	if err != nil {
		return nil, err
	}
	st.apiSteadyRSS, _ = procStatusBytes(oldPID, "VmRSS")
	etcdPID, err := readPID(filepath.Join(cp.dir, "etcd.pid"))
	if err != nil {
		return nil, err
	}
	etcdBefore, _ := procCPU(etcdPID)
	anon := make([]*sampledPeak, len(servers))
	sampling := make(chan struct{})
	var samplers sync.WaitGroup
	for i, s := range servers {
		anon[i] = &sampledPeak{}
		samplers.Go(func() { anon[i].sample(s.cmd.Process.Pid, "RssAnon", sampling) })
	}
	start := time.Now()
	restartAt.Store(&start)
	samplers.Go(func() { st.sampleAPIServer(pidFile, oldPID, start, sampling) })

	logf("== restart the API server (%s)", name)
	// The change whose answer ends the storm: a service created as soon as the API server takes writes.
	after := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: cl.namespaces[0], Name: "after-storm-" + strings.ReplaceAll(name, " ", "-")},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	createdCh := make(chan *corev1.Service, 1)
	stopped := make(chan struct{})
	bg.Go(func() {
		select {
		case <-stopped:
		case <-stop:
			return
		}
		for {
			c, err := writer.CoreV1().Services(after.Namespace).Create(ctx, after, metav1.CreateOptions{})
			if err == nil {
				st.writable = time.Since(start)
				createdCh <- c
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	for _, step := range []string{"stop-apiserver", "start-apiserver"} {
		// On a busy machine the new API server may give up on its own start (a post-start hook's
		// initial check times out while everything lists at once): started again, up to 3 times,
		// and counted.
		for attempt := 1; ; attempt++ {
			out, err := exec.Command(filepath.Join(cfg.root, "hack/cluster.sh"), step, cp.dir).CombinedOutput()
			if err == nil {
				break
			}
			if step == "start-apiserver" && attempt < 3 {
				st.apiStartFailures++
				logf("hack/cluster.sh %s failed (%v): starting it again\n%s", step, err, tail2(string(out), 3))
				continue
			}
			close(sampling)
			samplers.Wait()
			return nil, fmt.Errorf("hack/cluster.sh %s: %v\n%s", step, err, out)
		}
		if step == "stop-apiserver" {
			close(stopped)
		}
	}
	st.restartTook = time.Since(start)
	logf("API server back after %s", st.restartTook.Round(time.Millisecond))
	var created *corev1.Service
	select {
	case created = <-createdCh:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	logf("first write accepted %s after the restart began", st.writable.Round(time.Millisecond))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			if err := waitA(ctx, s.addr, created.Name+"."+created.Namespace+".svc.cluster.local.", created.Spec.ClusterIP); err == nil {
				st.replicas[i].answered = time.Since(start)
			}
		})
	}
	wg.Wait()
	st.allAnswered = st.writable
	for _, r := range st.replicas {
		st.allAnswered = max(st.allAnswered, r.answered)
	}
	logf("every replica answers the change made after the restart %s after it began", st.allAnswered.Round(time.Millisecond))
	// The relist phase's changes go on a while after the last replica caught up.
	if err := sleep(ctx, cfg.fleetAfter); err != nil {
		return nil, err
	}
	st.window = time.Since(start)
	close(sampling)
	samplers.Wait()
	stopBackground()
	bg.Wait()
	pr.wait()
	st.churnDone, st.churnFailed = ch.done.Load(), ch.failed.Load()
	if newPID, err := readPID(pidFile); err == nil {
		st.apiPeak, _ = procStatusBytes(newPID, "VmHWM")
	}
	st.apiCPUTotal, st.apiCPUPeak = st.cpuOfNewProcess(oldPID)
	etcdAfter, _ := procCPU(etcdPID)
	st.etcdCPU = etcdAfter - etcdBefore
	for i, s := range servers {
		r, pid := st.replicas[i], s.cmd.Process.Pid
		r.anon = anon[i].max
		r.hwm, _ = procStatusBytes(pid, "VmHWM")
		r.exited = s.exited()
		cs, err := cgroups[i].stats()
		if err != nil {
			return nil, err
		}
		r.cgroupPeak, r.limitHits, r.oomKills = cs.peak, cs.limitHits, cs.oomKills
	}
	logf("%s: API server peak RSS %s, CPU %.1f s (peak %.2f cores); replicas' peak RssAnon %s", name, mib(st.apiPeak), st.apiCPUTotal, st.apiCPUPeak,
		mib(slices.Max(append([]float64{0}, anon2(st.replicas)...))))
	return st, nil
}

func anon2(rs []*fleetReplica) []float64 {
	var v []float64
	for _, r := range rs {
		v = append(v, r.anon)
	}
	return v
}

// sampleAPIServer records the API server's RSS and CPU every 100 ms until stop, following its
// pid file across the restart.
func (st *fleetStorm) sampleAPIServer(pidFile string, oldPID int, start time.Time, stop chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if pid, err := readPID(pidFile); err == nil {
			rss, err1 := procStatusBytes(pid, "VmRSS")
			cpu, err2 := procCPU(pid)
			if err1 == nil && err2 == nil {
				st.apiT = append(st.apiT, time.Since(start).Seconds())
				st.apiRSS, st.apiCPU, st.apiPID = append(st.apiRSS, rss), append(st.apiCPU, cpu), append(st.apiPID, pid)
			}
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// cpuOfNewProcess is the CPU the API server that came back used until its last sample, and its
// highest average over a second.
func (st *fleetStorm) cpuOfNewProcess(oldPID int) (total, peak float64) {
	first := -1
	for i, pid := range st.apiPID {
		if pid != oldPID {
			if first < 0 {
				first = i
			}
			total = st.apiCPU[i]
			j := i
			for j > first && st.apiT[i]-st.apiT[j] < 1 {
				j--
			}
			if dt := st.apiT[i] - st.apiT[j]; dt >= 0.5 {
				peak = max(peak, (st.apiCPU[i]-st.apiCPU[j])/dt)
			}
		}
	}
	return total, peak
}

// churner updates EndpointSlices at -churn a second: each update moves one endpoint of a service
// the probes do not use to another address and back.
type churner struct{ done, failed atomic.Int64 }

func (c *churner) run(ctx context.Context, writer kubernetes.Interface, cl *cluster, cfg *config, stop chan struct{}) {
	if cfg.churn <= 0 {
		return
	}
	tokens := make(chan int, 64)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for n := range tokens {
				s := cl.services[probeTargets+n%(len(cl.services)-probeTargets)]
				ips := slices.Clone(s.ips)
				if (n/(len(cl.services)-probeTargets))%2 == 0 {
					ips[0] = podIP(2_000_000 + n%(len(cl.services)-probeTargets))
				}
				slice, opts := benchSlice(s, ips, cfg.controllerSlices)
				_, err := writer.DiscoveryV1().EndpointSlices(s.ns).Update(ctx, slice, metav1.UpdateOptions{FieldManager: opts.FieldManager})
				if err != nil {
					c.failed.Add(1)
				} else {
					c.done.Add(1)
				}
			}
		})
	}
	paceTokens(ctx, stop, tokens, cfg.churn, &c.failed)
	wg.Wait()
}

// paceTokens hands tokens 0, 1, 2, ... to the writers at rate a second, every 10 ms what is due,
// until stop or ctx ends, then closes tokens; what the writers cannot take is dropped and counted
// in dropped (the achieved rate is reported).
func paceTokens(ctx context.Context, stop <-chan struct{}, tokens chan<- int, rate int, dropped *atomic.Int64) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	n, began := 0, time.Now()
	defer close(tokens)
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := int(time.Since(began).Seconds() * float64(rate))
		for ; n < due; n++ {
			select {
			case tokens <- n:
			default:
				dropped.Add(1)
			}
		}
	}
}

// probeTargets: the first services are the probes' (their headless ones move an endpoint), the
// rest the churn's.
const probeTargets = 100

// prober makes a timed change twice a second, the two kinds in turn, and times the answer of
// every replica.
type prober struct {
	storm            *fleetStorm
	servers          []*server
	writer           kubernetes.Interface
	cl               *cluster
	restartAt        *atomic.Pointer[time.Time]
	controllerShaped bool
	mu               sync.Mutex
	polls            sync.WaitGroup
}

func (p *prober) run(ctx context.Context, stop chan struct{}) {
	var headless []*svc
	for _, s := range p.cl.services[:min(probeTargets, len(p.cl.services))] {
		if s.headless && s.hostnames[0] != "" {
			headless = append(headless, s)
		}
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		kind := probeKinds[n%2]
		var name, ip string
		var err error
		switch {
		case kind == probeKinds[0]:
			var c *corev1.Service
			c, err = p.writer.CoreV1().Services(p.cl.namespaces[0]).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d-%d", os.Getpid(), rand.Uint32()), Namespace: p.cl.namespaces[0]},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
			}, metav1.CreateOptions{})
			if err == nil {
				name, ip = c.Name+"."+c.Namespace+".svc.cluster.local.", c.Spec.ClusterIP
			}
		case len(headless) > 0:
			s := headless[(n/2)%len(headless)]
			ips := slices.Clone(s.ips)
			ips[0] = podIP(3_000_000 + n)
			slice, opts := benchSlice(s, ips, p.controllerShaped)
			_, err = p.writer.DiscoveryV1().EndpointSlices(s.ns).Update(ctx, slice, metav1.UpdateOptions{FieldManager: opts.FieldManager})
			name, ip = s.endpointName(0)+"."+s.fqdn(), ips[0]
		default:
			continue
		}
		if err != nil {
			continue // the API server is away
		}
		made := time.Now()
		phase := phaseSteady
		if r := p.restartAt.Load(); r != nil && made.After(*r) {
			phase = phaseRelist
		}
		p.polls.Go(func() { p.timeChange(ctx, phase, kind, name, ip, made) })
	}
}

// timeChange times a change's answer on every replica, and the first replica's answer: a change
// every replica answers late was late before it reached any of them (the API server's write or
// its watch's fan-out).
func (p *prober) timeChange(ctx context.Context, phase, kind, name, ip string, made time.Time) {
	var mu sync.Mutex
	first := time.Duration(-1)
	var each sync.WaitGroup
	for _, s := range p.servers {
		each.Go(func() {
			if took, ok := p.time(ctx, s, phase, kind, name, ip, made); ok {
				mu.Lock()
				if first < 0 || took < first {
					first = took
				}
				mu.Unlock()
			}
		})
	}
	each.Wait()
	if first >= 0 {
		p.mu.Lock()
		p.storm.firstAnswer[phase][kind] = append(p.storm.firstAnswer[phase][kind], first)
		p.mu.Unlock()
	}
}

// time polls one replica for a change's answer: every 10 ms for a second, then every 100 ms.
func (p *prober) time(ctx context.Context, s *server, phase, kind, name, ip string, made time.Time) (time.Duration, bool) {
	for {
		r, err := ask(ctx, s.addr, name, 1 /* A */)
		took := time.Since(made)
		if err == nil && hasA(r, ip) {
			p.mu.Lock()
			p.storm.latency[phase][kind] = append(p.storm.latency[phase][kind], took)
			p.mu.Unlock()
			return took, true
		}
		if took > probeLimit || ctx.Err() != nil {
			p.mu.Lock()
			p.storm.unanswered[phase][kind]++
			p.mu.Unlock()
			return took, false
		}
		wait := 10 * time.Millisecond
		if took > time.Second {
			wait = 100 * time.Millisecond
		}
		time.Sleep(wait)
	}
}

func (p *prober) wait() { p.polls.Wait() }
