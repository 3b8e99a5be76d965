// Package pods measures the pod dimension (-pods, PODS.md): kubetree with `pods verified` and `autopath @kubetree` beside the
// in-tree plugin with `pods verified` and `autopath @kubernetes`, on one API server: memory per pod
// at each size, CPU per pod status change, and queries answered through autopath.
package pods

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// podClient is the address queries with autopath come from: a pod of namespace podNS(0).
const podClient = "127.0.90.1"

// podNS is the i-th namespace of the pods.
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

// podCorefile is a server's Corefile: pprof, autopath and the plugin with pods verified.
func podCorefile(plugin, addr, ready, metrics, pprof, kubeconfig string) string {
	return fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    ready %s\n    pprof %s\n    autopath @%s\n    %s cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig %s\n        pods verified\n    }\n}\n",
		measure.Port(addr), metrics, ready, pprof, plugin, plugin, kubeconfig)
}

// podStep is both servers' memory at one pod count.
type podStep struct {
	pods int
	mem  map[string]measure.Mem // by server
}

// podResults is the whole run.
type podResults struct {
	machine  measure.Machine // where it ran, and the build
	base     map[string]measure.Mem
	steps    []podStep
	churn    int
	churnCPU map[string]float64 // CPU seconds for churn status changes, less what the server spends idle
	idleCPU  map[string]float64 // CPU seconds a second, idle
	// churnBytes is what the API server sent for the changes (through each server's counting
	// proxy, TLS records included), less what it sends idle (idleBytes a second).
	churnBytes, idleBytes map[string]float64
	autopath              map[string]measure.RunResult
	created               time.Duration
	namespace             int
}

// Run creates the pods on a control plane of its own, step by step, measures both plugins at each
// step, through pod status changes and under autopath queries, and writes the report.
func Run(ctx context.Context, cfg Options) error {
	measure.CoreDNSBinary = filepath.Join(cfg.Root, "bin/coredns")
	if _, err := exec.LookPath("dnsperf"); err != nil {
		return fmt.Errorf("dnsperf not found: apt-get update && apt-get install dnsperf")
	}
	return cfg.WithControlPlane(ctx, "kubetree-bench-pods-", func(dir string, cp *measure.ControlPlane) error {
		return measurePods(ctx, cfg, dir, cp)
	})
}

// measurePods creates the namespaces, a service in each and the client pod, starts both servers,
// and measures them at each pod count, through the status changes and under autopath queries.
func measurePods(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane) (err error) {
	began := time.Now()
	res := &podResults{machine: measure.MachineInfo(cfg.Root), base: map[string]measure.Mem{}, churnCPU: map[string]float64{}, idleCPU: map[string]float64{},
		churnBytes: map[string]float64{}, idleBytes: map[string]float64{}, autopath: map[string]measure.RunResult{}, namespace: 20}
	if err := res.createNamespaces(ctx, cp); err != nil {
		return err
	}
	servers := map[string]*measure.Server{}
	pprofs := map[string]string{}
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	if err := res.startServers(ctx, dir, cp, servers, pprofs); err != nil {
		return err
	}
	created, err := res.grow(ctx, cfg, cp, servers)
	if err != nil {
		return err
	}
	if err := res.statusChurn(ctx, cfg, cp, servers, pprofs, created); err != nil {
		return err
	}
	if err := res.autopathLoad(ctx, cfg, dir, servers); err != nil {
		return err
	}
	report := res.markdown(cfg, time.Since(began))
	return cfg.Publish(report)
}

// createNamespaces creates the pods' namespaces, a service in each for the autopath queries, and
// the client pod.
func (res *podResults) createNamespaces(ctx context.Context, cp *measure.ControlPlane) error {
	for i := range res.namespace {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNS(i)}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	// A service per namespace for the autopath queries, and the client pod.
	for i := range res.namespace {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: podNS(i), Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}}}
		if _, err := cp.Client.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return createPod(ctx, cp, podNS(0), "client", podClient, nil)
}

// startServers starts kubernetes and kubetree, each counted by a proxy of its own and with a pprof
// endpoint, waits until both answer for the client pod, and takes their memory 3 s later.
func (res *podResults) startServers(ctx context.Context, dir string, cp *measure.ControlPlane, servers map[string]*measure.Server, pprofs map[string]string) (err error) {
	measure.Logf("== start kubernetes and kubetree with pods verified and autopath")
	for _, p := range []string{"kubernetes", "kubetree"} {
		ports, err := measure.FreePorts(1)
		if err != nil {
			return err
		}
		pprofs[p] = ports[0]
		s, err := measure.StartServerCounted(ctx, dir, p, 0, cp.Kubeconfig, func(addr, ready, metrics, kc string) string {
			return podCorefile(p, addr, ready, metrics, pprofs[p], kc)
		})
		if err != nil {
			return err
		}
		servers[p] = s
		if _, err := s.WaitStartup(ctx, "127-0-90-1."+podNS(0)+".pod.cluster.local.", podClient); err != nil {
			return err
		}
	}
	if err := measure.Sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		if res.base[p], err = servers[p].Memory(ctx); err != nil {
			return err
		}
	}
	return nil
}

// grow creates the pods up to each of -pods in turn, and takes both servers' memory 5 s after
// both answer for the last pod created; it returns the pods created.
func (res *podResults) grow(ctx context.Context, cfg Options, cp *measure.ControlPlane, servers map[string]*measure.Server) (created int, err error) {
	start := time.Now()
	for _, size := range cfg.Pods {
		measure.Logf("== %d pods", size)
		if err := createPods(ctx, cp, cfg.Workers, created, size, res.namespace); err != nil {
			return created, err
		}
		created = size
		last := size - 1
		name := strings.ReplaceAll(podAddr(last, 0), ".", "-") + "." + podNS(last%res.namespace) + ".pod.cluster.local."
		step := podStep{pods: size, mem: map[string]measure.Mem{}}
		for _, p := range []string{"kubernetes", "kubetree"} {
			if err := measure.WaitA(ctx, servers[p].Addr, name, podAddr(last, 0)); err != nil {
				return created, fmt.Errorf("%s: %w", p, err)
			}
		}
		if err := measure.Sleep(ctx, 5*time.Second); err != nil {
			return created, err
		}
		for _, p := range []string{"kubernetes", "kubetree"} {
			if step.mem[p], err = servers[p].Memory(ctx); err != nil {
				return created, err
			}
			measure.Logf("%s with %d pods: RSS %s, heap %s", p, size, measure.MiB(step.mem[p].RSS), measure.MiB(step.mem[p].Heap))
		}
		res.steps = append(res.steps, step)
	}
	res.created = time.Since(start)
	return created, nil
}

// statusChurn moves pods to new addresses, -pod-churn of them, and measures what both servers
// spend on it, their idle CPU taken off.
func (res *podResults) statusChurn(ctx context.Context, cfg Options, cp *measure.ControlPlane, servers map[string]*measure.Server, pprofs map[string]string, created int) (err error) {
	// Status churn: pods move to new addresses; both servers see every change.
	res.churn = min(cfg.Churn, created)
	measure.Logf("== %d pod status changes", res.churn)
	// What each server spends with nothing happening (health checks, timers, the collector) is
	// measured first, and taken off the CPU of the changes.
	const idle = 10 * time.Second
	before, received := map[string]float64{}, map[string]float64{}
	for _, p := range []string{"kubernetes", "kubetree"} {
		if before[p], err = servers[p].CPU(); err != nil {
			return err
		}
		received[p] = servers[p].Received()
	}
	if err := measure.Sleep(ctx, idle); err != nil {
		return err
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		now, err := servers[p].CPU()
		if err != nil {
			return err
		}
		res.idleCPU[p] = (now - before[p]) / idle.Seconds()
		before[p] = now
		r := servers[p].Received()
		res.idleBytes[p] = (r - received[p]) / idle.Seconds()
		received[p] = r
		measure.Logf("%s idle: %.1f ms CPU a second", p, res.idleCPU[p]*1000)
	}
	churnStart := time.Now()
	var profiles sync.WaitGroup
	if cfg.Profile {
		for _, p := range []string{"kubernetes", "kubetree"} {
			profiles.Go(func() { measure.ProfileCPU(ctx, p, pprofs[p], cfg.ProfileDir, 20*time.Second) })
		}
	}
	if err := movePods(ctx, cp, cfg.Workers, res.churn, res.namespace); err != nil {
		return err
	}
	profiles.Wait()
	last := res.churn - 1
	name := strings.ReplaceAll(podAddr(last, 1), ".", "-") + "." + podNS(last%res.namespace) + ".pod.cluster.local."
	for _, p := range []string{"kubernetes", "kubetree"} {
		if err := measure.WaitA(ctx, servers[p].Addr, name, podAddr(last, 1)); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		after, err := servers[p].CPU()
		if err != nil {
			return err
		}
		res.churnCPU[p] = after - before[p] - res.idleCPU[p]*time.Since(churnStart).Seconds()
		res.churnBytes[p] = servers[p].Received() - received[p] - res.idleBytes[p]*time.Since(churnStart).Seconds()
		measure.Logf("%s: %.2f s CPU for %d status changes, idle taken off (%.0f µs each, %.0f B from the API server)", p, res.churnCPU[p], res.churn,
			res.churnCPU[p]/float64(res.churn)*1e6, res.churnBytes[p]/float64(res.churn))
	}
	return nil
}

// autopathLoad runs dnsperf against both servers with queries that autopath answers, -rounds
// times, and keeps each server's best round.
func (res *podResults) autopathLoad(ctx context.Context, cfg Options, dir string, servers map[string]*measure.Server) error {
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
	for round := range cfg.Rounds {
		for _, p := range []string{"kubernetes", "kubetree"} {
			r, err := measure.Dnsperf(ctx, servers[p], podClient, qfile, dir, cfg.Duration, cfg.DnsperfFlags)
			if err != nil {
				return err
			}
			measure.Logf("autopath round %d %-10s %6.0f QPS, %.3f s CPU/100k, %s", round+1, p, r.QPS, r.CPUPer100k(), measure.RcodeString(r.Rcodes))
			if best, ok := res.autopath[p]; !ok || r.QPS > best.QPS {
				res.autopath[p] = r
			}
		}
	}
	return nil
}
