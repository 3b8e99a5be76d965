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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The pod dimension (-pods): kubetree with `pods verified` and `autopath @kubetree` beside the
// in-tree plugin with `pods verified` and `autopath @kubernetes`, on one API server: memory per pod
// at each size, CPU per pod status change, and queries answered through autopath.

// podClient is the address queries with autopath come from: a pod of namespace podNS(0).
const podClient = "127.0.90.1"

func podNS(i int) string { return fmt.Sprintf("pods-%d", i) }

// podAddr is the n-th pod's address, in 10.64.0.0/10 (clear of the service and endpoint ranges);
// version moves it, as a pod restarted elsewhere would.
func podAddr(n, version int) string {
	v := uint32(10)<<24 | uint32(64)<<16 + uint32(n) + 1 + uint32(version)*(1<<20)
	return fmt.Sprintf("%d.%d.%d.%d", v>>24, v>>16&255, v>>8&255, v&255)
}

// podLabels are a Deployment's pod labels: pods of one of 200 Deployments share them.
func podLabels(n int) map[string]string {
	d := n % 200
	return map[string]string{"app": fmt.Sprintf("app-%d", d), "pod-template-hash": fmt.Sprintf("%08x", d*2654435761), "tier": "backend"}
}

func podCorefile(plugin, addr, ready, metrics, pprof, kubeconfig string) string {
	return fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    ready %s\n    pprof %s\n    autopath @%s\n    %s cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig %s\n        pods verified\n    }\n}\n",
		port(addr), metrics, ready, pprof, plugin, plugin, kubeconfig)
}

// profileCPU takes a CPU profile of a server for d and prints its top functions.
func profileCPU(ctx context.Context, name, pprof, dir string, d time.Duration) {
	path := filepath.Join(dir, "cpu-"+name+".pprof")
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprof, int(d.Seconds()))
	out, err := exec.CommandContext(ctx, "curl", "-sS", "-o", path, url).CombinedOutput()
	if err != nil {
		logf("profile of %s: %v %s", name, err, out)
		return
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=30", path).CombinedOutput()
	if err != nil {
		logf("pprof of %s: %v", name, err)
	}
	logf("CPU profile of %s during the pod changes (%s):\n%s", name, path, top)
}

type podStep struct {
	pods int
	mem  map[string]mem // by server
}

type podResults struct {
	base     map[string]mem
	steps    []podStep
	churn    int
	churnCPU map[string]float64 // CPU seconds for churn status changes, less what the server spends idle
	idleCPU  map[string]float64 // CPU seconds a second, idle
	// churnBytes is what the API server sent for the changes (through each server's counting
	// proxy, TLS records included), less what it sends idle (idleBytes a second).
	churnBytes, idleBytes map[string]float64
	autopath              map[string]runResult
	created               time.Duration
	namespace             int
}

func runPods(ctx context.Context, cfg *config) error {
	coreDNSBinary = filepath.Join(cfg.root, "bin/coredns")
	if _, err := exec.LookPath("dnsperf"); err != nil {
		return fmt.Errorf("dnsperf not found: apt-get update && apt-get install dnsperf")
	}
	return withControlPlane(ctx, cfg, "kubetree-bench-pods-", func(dir string, cp *controlPlane) error {
		return measurePods(ctx, cfg, dir, cp)
	})
}

func measurePods(ctx context.Context, cfg *config, dir string, cp *controlPlane) (err error) {
	began := time.Now()
	res := &podResults{base: map[string]mem{}, churnCPU: map[string]float64{}, idleCPU: map[string]float64{},
		churnBytes: map[string]float64{}, idleBytes: map[string]float64{}, autopath: map[string]runResult{}, namespace: 20}
	for i := range res.namespace {
		if _, err := cp.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNS(i)}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	// A service per namespace for the autopath queries, and the client pod.
	for i := range res.namespace {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: podNS(i), Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}}}
		if _, err := cp.client.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := createPod(ctx, cp, podNS(0), "client", podClient, nil); err != nil {
		return err
	}

	servers := map[string]*server{}
	pprofs := map[string]string{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	logf("== start kubernetes and kubetree with pods verified and autopath")
	for _, p := range []string{"kubernetes", "kubetree"} {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		pprofs[p] = ports[0]
		s, err := startServerCounted(ctx, dir, p, 0, cp.kubeconfig, func(addr, ready, metrics, kc string) string {
			return podCorefile(p, addr, ready, metrics, pprofs[p], kc)
		})
		if err != nil {
			return err
		}
		servers[p] = s
		if _, err := s.waitStartup(ctx, "127-0-90-1."+podNS(0)+".pod.cluster.local.", podClient); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		if res.base[p], err = servers[p].memory(ctx); err != nil {
			return err
		}
	}

	created := 0
	start := time.Now()
	for _, size := range cfg.pods {
		logf("== %d pods", size)
		if err := createPods(ctx, cp, cfg.workers, created, size, res.namespace); err != nil {
			return err
		}
		created = size
		last := size - 1
		name := strings.ReplaceAll(podAddr(last, 0), ".", "-") + "." + podNS(last%res.namespace) + ".pod.cluster.local."
		step := podStep{pods: size, mem: map[string]mem{}}
		for _, p := range []string{"kubernetes", "kubetree"} {
			if err := waitA(ctx, servers[p].addr, name, podAddr(last, 0)); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		if err := sleep(ctx, 5*time.Second); err != nil {
			return err
		}
		for _, p := range []string{"kubernetes", "kubetree"} {
			if step.mem[p], err = servers[p].memory(ctx); err != nil {
				return err
			}
			logf("%s with %d pods: RSS %s, heap %s", p, size, mib(step.mem[p].rss), mib(step.mem[p].heap))
		}
		res.steps = append(res.steps, step)
	}
	res.created = time.Since(start)

	// Status churn: pods move to new addresses; both servers see every change.
	res.churn = min(cfg.podChurn, created)
	logf("== %d pod status changes", res.churn)
	// What each server spends with nothing happening (health checks, timers, the collector) is
	// measured first, and taken off the CPU of the changes.
	const idle = 10 * time.Second
	before, received := map[string]float64{}, map[string]float64{}
	for _, p := range []string{"kubernetes", "kubetree"} {
		if before[p], err = servers[p].cpu(); err != nil {
			return err
		}
		received[p] = servers[p].received()
	}
	if err := sleep(ctx, idle); err != nil {
		return err
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		now, err := servers[p].cpu()
		if err != nil {
			return err
		}
		res.idleCPU[p] = (now - before[p]) / idle.Seconds()
		before[p] = now
		r := servers[p].received()
		res.idleBytes[p] = (r - received[p]) / idle.Seconds()
		received[p] = r
		logf("%s idle: %.1f ms CPU a second", p, res.idleCPU[p]*1000)
	}
	churnStart := time.Now()
	var profiles sync.WaitGroup
	if cfg.profile {
		for _, p := range []string{"kubernetes", "kubetree"} {
			profiles.Go(func() { profileCPU(ctx, p, pprofs[p], cfg.profileDir, 20*time.Second) })
		}
	}
	if err := movePods(ctx, cp, cfg.workers, res.churn, res.namespace); err != nil {
		return err
	}
	profiles.Wait()
	last := res.churn - 1
	name := strings.ReplaceAll(podAddr(last, 1), ".", "-") + "." + podNS(last%res.namespace) + ".pod.cluster.local."
	for _, p := range []string{"kubernetes", "kubetree"} {
		if err := waitA(ctx, servers[p].addr, name, podAddr(last, 1)); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		after, err := servers[p].cpu()
		if err != nil {
			return err
		}
		res.churnCPU[p] = after - before[p] - res.idleCPU[p]*time.Since(churnStart).Seconds()
		res.churnBytes[p] = servers[p].received() - received[p] - res.idleBytes[p]*time.Since(churnStart).Seconds()
		logf("%s: %.2f s CPU for %d status changes, idle taken off (%.0f µs each, %.0f B from the API server)", p, res.churnCPU[p], res.churn,
			res.churnCPU[p]/float64(res.churn)*1e6, res.churnBytes[p]/float64(res.churn))
	}

	// Queries through autopath: web.<other namespace>, as a pod in pods-0 asks it first
	// (web.pods-N.pods-0.svc.cluster.local), answered in one round trip.
	qfile := filepath.Join(dir, "autopath-queries.txt")
	var b strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&b, "web.%s.%s.svc.cluster.local A\n", podNS(1+i%(res.namespace-1)), podNS(0))
	}
	if err := os.WriteFile(qfile, []byte(b.String()), 0o644); err != nil {
		return err
	}
	for round := range cfg.rounds {
		for _, p := range []string{"kubernetes", "kubetree"} {
			r, err := dnsperf(ctx, servers[p], podClient, qfile, dir, cfg.duration, cfg)
			if err != nil {
				return err
			}
			logf("autopath round %d %-10s %6.0f QPS, %.3f s CPU/100k, %s", round+1, p, r.qps, r.cpuPer100k(), rcodeString(r.rcodes))
			if best, ok := res.autopath[p]; !ok || r.qps > best.qps {
				res.autopath[p] = r
			}
		}
	}
	report := res.markdown(cfg, time.Since(began))
	return publish(cfg, report)
}

func createPod(ctx context.Context, cp *controlPlane, ns, name, addr string, labels map[string]string) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	created, err := cp.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: addr, PodIPs: []corev1.PodIP{{IP: addr}}}
	_, err = cp.client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// createPods creates pods from..to-1, running, with their addresses.
func createPods(ctx context.Context, cp *controlPlane, workers, from, to, namespaces int) error {
	return parallel(ctx, workers, from, to, "created pods", func(n int) error {
		return createPod(ctx, cp, podNS(n%namespaces), fmt.Sprintf("pod-%06d", n), podAddr(n, 0), podLabels(n))
	})
}

// movePods gives pods 0..n-1 their next address.
func movePods(ctx context.Context, cp *controlPlane, workers, n, namespaces int) error {
	return parallel(ctx, workers, 0, n, "moved pods", func(i int) error {
		c := cp.client.CoreV1().Pods(podNS(i % namespaces))
		p, err := c.Get(ctx, fmt.Sprintf("pod-%06d", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		addr := podAddr(i, 1)
		p.Status.PodIP, p.Status.PodIPs = addr, []corev1.PodIP{{IP: addr}}
		_, err = c.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// parallel runs f for from..to-1 on workers goroutines, with a progress line every 5 s.
func parallel(ctx context.Context, workers, from, to int, verb string, f func(int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				n := int(next.Add(1) - 1)
				if n >= to || ctx.Err() != nil {
					return
				}
				if err := f(n); err != nil {
					cancel(err)
					return
				}
				done.Add(1)
			}
		})
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				logf("%s %d/%d (%.0f/s)", verb, done.Load(), to-from, float64(done.Load())/time.Since(start).Seconds())
			}
		}
	}()
	wg.Wait()
	close(stop)
	return context.Cause(ctx)
}

// waitA polls name until it answers ip, for up to 10 minutes.
func waitA(ctx context.Context, addr, name, ip string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if r, err := ask(ctx, addr, name, dns.TypeA); err == nil && hasA(r, ip) {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s did not answer %s within 10 minutes", name, ip)
}

func (res *podResults) markdown(cfg *config, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Pods: kubetree beside the in-tree kubernetes plugin, both with `pods verified` and autopath\n\n")
	fmt.Fprintf(&b, "`make bench-pods` (`cd bench && go run . -pods %s`), %s, in %s.\n\n", joinInts(cfg.pods), time.Now().UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	fmt.Fprintf(&b, "Pods are created running, with one address each, in %d namespaces; every 200th pod shares its labels (one Deployment's).\n", res.namespace)
	fmt.Fprintf(&b, "Memory is the growth over the same server with no pods (median of 5 samples).\n\n")
	fmt.Fprintf(&b, "| what | kubernetes | kubetree | kubetree/kubernetes |\n| --- | ---: | ---: | ---: |\n")
	for _, st := range res.steps {
		k8s := st.mem["kubernetes"].rss - res.base["kubernetes"].rss
		kt := st.mem["kubetree"].rss - res.base["kubetree"].rss
		fmt.Fprintf(&b, "| RSS growth at %d pods | %s | %s | %.2f |\n", st.pods, mib(k8s), mib(kt), kt/k8s)
		fmt.Fprintf(&b, "| RSS per pod at %d pods | %.0f B | %.0f B | %.2f |\n", st.pods, k8s/float64(st.pods), kt/float64(st.pods), kt/k8s)
		hk8s := st.mem["kubernetes"].heap - res.base["kubernetes"].heap
		hkt := st.mem["kubetree"].heap - res.base["kubetree"].heap
		fmt.Fprintf(&b, "| Go heap per pod at %d pods | %.0f B | %.0f B | %.2f |\n", st.pods, hk8s/float64(st.pods), hkt/float64(st.pods), hkt/hk8s)
	}
	k8s, kt := res.churnCPU["kubernetes"], res.churnCPU["kubetree"]
	fmt.Fprintf(&b, "| CPU idle | %.1f ms/s | %.1f ms/s | %.2f |\n", res.idleCPU["kubernetes"]*1000, res.idleCPU["kubetree"]*1000,
		res.idleCPU["kubetree"]/res.idleCPU["kubernetes"])
	fmt.Fprintf(&b, "| CPU per pod status change, idle taken off (%d changes) | %.0f µs | %.0f µs | %.2f |\n", res.churn,
		k8s/float64(res.churn)*1e6, kt/float64(res.churn)*1e6, kt/k8s)
	bk8s, bkt := res.churnBytes["kubernetes"], res.churnBytes["kubetree"]
	fmt.Fprintf(&b, "| bytes from the API server per pod status change (TLS records included), idle taken off | %.0f B | %.0f B | %.2f |\n",
		bk8s/float64(res.churn), bkt/float64(res.churn), bkt/bk8s)
	a, t := res.autopath["kubernetes"], res.autopath["kubetree"]
	fmt.Fprintf(&b, "| autopath: QPS (best of %d rounds) | %.0f | %.0f | %.2f |\n", cfg.rounds, a.qps, t.qps, t.qps/a.qps)
	fmt.Fprintf(&b, "| autopath: CPU s per 100k queries | %.3f | %.3f | %.2f |\n", a.cpuPer100k(), t.cpuPer100k(), t.cpuPer100k()/a.cpuPer100k())
	fmt.Fprintf(&b, "\nAutopath queries: `web.pods-N.pods-0.svc.cluster.local A` from the address of a pod in pods-0, which autopath answers with a CNAME to `web.pods-N.svc.cluster.local` and its A record; rcodes kubernetes %s, kubetree %s.\n",
		rcodeString(a.rcodes), rcodeString(t.rcodes))
	return b.String()
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
