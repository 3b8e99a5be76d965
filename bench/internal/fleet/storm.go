package fleet

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// measureStorm measures one storm: plugin's replicas ("" none) start, run under the churn and the
// timed changes for -fleet-steady, and the API server is restarted; the storm ends -fleet-after
// after every replica answers a service created after the restart.
func measureStorm(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, writer kubernetes.Interface, cl *measure.Cluster, plugin string) (st *fleetStorm, err error) {
	st = &fleetStorm{plugin: plugin, latency: map[string]map[string][]time.Duration{}, unanswered: map[string]map[string]int{},
		firstAnswer: map[string]map[string][]time.Duration{}}
	for _, ph := range []string{phaseSteady, phaseRelist} {
		st.latency[ph], st.unanswered[ph], st.firstAnswer[ph] = map[string][]time.Duration{}, map[string]int{}, map[string][]time.Duration{}
	}
	name := st.label()
	measure.Logf("== storm: %s", name)
	var rs replicaSet
	defer rs.close()
	if plugin != "" {
		if err := rs.start(ctx, cfg, dir, cp, cl, st); err != nil {
			return nil, err
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
	pr := &prober{storm: st, servers: rs.servers, writer: writer, cl: cl, restartAt: &restartAt, controllerShaped: cfg.ControllerSlices}
	if plugin != "" {
		bg.Go(func() { pr.run(ctx, stop) })
	}
	if err := measure.Sleep(ctx, cfg.Steady); err != nil {
		return nil, err
	}
	st.churnSteady, st.churnSteadyDone = time.Since(churnStart), ch.done.Load()
	measure.Logf("steady: %d slice updates in %s (%.0f/s), %d failed", st.churnSteadyDone, st.churnSteady.Round(time.Millisecond),
		float64(st.churnSteadyDone)/st.churnSteady.Seconds(), ch.failed.Load())

	// Peaks from here on.
	if err := rs.resetPeaks(plugin); err != nil {
		return nil, err
	}
	cps, err := readControlPlane(cp, st)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	restartAt.Store(&start)
	smp := startSamplers(st, rs.servers, cps, start)

	measure.Logf("== restart the API server (%s)", name)
	created, err := st.restart(ctx, cfg.Root, cp.Dir, writer, cl.Namespaces[0], name, start, stop, &bg)
	if err != nil {
		smp.end()
		return nil, err
	}
	st.timeAnswers(ctx, rs.servers, created, start)
	// The relist phase's changes go on a while after the last replica caught up.
	if err := measure.Sleep(ctx, cfg.After); err != nil {
		return nil, err
	}
	st.window = time.Since(start)
	smp.end()
	stopBackground()
	bg.Wait()
	pr.wait()
	st.churnDone, st.churnFailed = ch.done.Load(), ch.failed.Load()
	if err := st.collect(rs, smp, cps); err != nil {
		return nil, err
	}
	measure.Logf("%s: API server peak RSS %s, CPU %.1f s (peak %.2f cores); replicas' peak RssAnon %s", name, measure.MiB(st.apiPeak), st.apiCPUTotal, st.apiCPUPeak,
		measure.MiB(slices.Max(append([]float64{0}, anon2(st.replicas)...))))
	return st, nil
}

// replicaSet is a storm's replicas and their memory cgroups.
type replicaSet struct {
	servers []*measure.Server
	cgroups []*measure.MemoryCgroup
}

// start starts -fleet replicas of st's plugin, every one in a memory cgroup of its own, waits
// until every one answers, and takes their RSS 5 s later.
func (rs *replicaSet) start(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, cl *measure.Cluster, st *fleetStorm) error {
	plugin := st.plugin
	limit, err := resource.ParseQuantity(map[string]string{"kubetree": cfg.MemoryLimit, "kubernetes": cfg.LimitInTree}[plugin])
	if err != nil {
		return fmt.Errorf("%s's memory limit: %w", plugin, err)
	}
	probe := cl.Probe()
	var wg sync.WaitGroup
	errs := make([]error, cfg.Replicas)
	for i := range cfg.Replicas {
		cg, err := measure.NewMemoryCgroup(fmt.Sprintf("kubetree-fleet-%d-%s-%d", os.Getpid(), plugin, i), limit.Value())
		if err != nil {
			return err
		}
		rs.cgroups = append(rs.cgroups, cg)
		measure.ServerCgroup[fmt.Sprintf("%s-%d", plugin, i)] = cg
		s, err := measure.StartServer(ctx, dir, plugin, i, cp.Kubeconfig)
		if err != nil {
			return err
		}
		rs.servers = append(rs.servers, s)
		r := &fleetReplica{answered: -1}
		st.replicas = append(st.replicas, r)
		wg.Go(func() {
			su, err := s.WaitStartupWithin(ctx, probe.Name, probe.IP, 15*time.Minute)
			r.ready, errs[i] = su.Answer, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	measure.Logf("%d %s replicas ready, the last after %s", cfg.Replicas, plugin, slices.MaxFunc(st.replicas, func(a, b *fleetReplica) int { return int(a.ready - b.ready) }).ready.Round(time.Millisecond))
	if err := measure.Sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	for i, s := range rs.servers {
		r, pid := st.replicas[i], s.PID()
		r.steadyRSS, _ = measure.ProcStatusBytes(pid, "VmRSS")
		r.steadyAnon, _ = measure.ProcStatusBytes(pid, "RssAnon")
	}
	return nil
}

// resetPeaks starts every replica's peak RSS and its cgroup's peak usage over.
func (rs *replicaSet) resetPeaks(plugin string) error {
	for i, s := range rs.servers {
		pid := s.PID()
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			return fmt.Errorf("resetting %s-%d's peak RSS: %w", plugin, i, err)
		}
		if err := rs.cgroups[i].ResetPeak(); err != nil {
			return err
		}
	}
	return nil
}

// close stops the replicas and removes their cgroups.
func (rs *replicaSet) close() {
	for _, s := range rs.servers {
		s.Stop()
	}
	for _, cg := range rs.cgroups {
		if err := cg.Remove(); err != nil {
			measure.Logf("removing a memory cgroup: %v", err)
		}
	}
}

// restart restarts the API server (hack/cluster.sh stop-apiserver, start-apiserver) and returns
// the change whose answer ends the storm: a service created in namespace as soon as the API server
// takes writes, by a goroutine of bg that stop ends.
func (st *fleetStorm) restart(ctx context.Context, root, dir string, writer kubernetes.Interface, namespace, name string, start time.Time,
	stop chan struct{}, bg *sync.WaitGroup) (*corev1.Service, error) {
	after := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "after-storm-" + strings.ReplaceAll(name, " ", "-")},
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
			out, err := exec.Command(filepath.Join(root, "hack/cluster.sh"), step, dir).CombinedOutput()
			if err == nil {
				break
			}
			if step == "start-apiserver" && attempt < 3 {
				st.apiStartFailures++
				measure.Logf("hack/cluster.sh %s failed (%v): starting it again\n%s", step, err, tail2(string(out), 3))
				continue
			}
			return nil, fmt.Errorf("hack/cluster.sh %s: %v\n%s", step, err, out)
		}
		if step == "stop-apiserver" {
			close(stopped)
		}
	}
	st.restartTook = time.Since(start)
	measure.Logf("API server back after %s", st.restartTook.Round(time.Millisecond))
	var created *corev1.Service
	select {
	case created = <-createdCh:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	measure.Logf("first write accepted %s after the restart began", st.writable.Round(time.Millisecond))
	return created, nil
}

// timeAnswers waits until every replica answers created, and records when each did.
func (st *fleetStorm) timeAnswers(ctx context.Context, servers []*measure.Server, created *corev1.Service, start time.Time) {
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			if err := measure.WaitA(ctx, s.Addr, created.Name+"."+created.Namespace+".svc.cluster.local.", created.Spec.ClusterIP); err == nil {
				st.replicas[i].answered = time.Since(start)
			}
		})
	}
	wg.Wait()
	st.allAnswered = st.writable
	for _, r := range st.replicas {
		st.allAnswered = max(st.allAnswered, r.answered)
	}
	measure.Logf("every replica answers the change made after the restart %s after it began", st.allAnswered.Round(time.Millisecond))
}

// collect takes the storm's figures at its end: the new API server's peak and CPU, etcd's CPU,
// and every replica's peaks and its cgroup's counts.
func (st *fleetStorm) collect(rs replicaSet, smp *samplers, cps controlPlaneProcs) error {
	if newPID, err := measure.ReadPID(cps.pidFile); err == nil {
		st.apiPeak, _ = measure.ProcStatusBytes(newPID, "VmHWM")
	}
	st.apiCPUTotal, st.apiCPUPeak = st.cpuOfNewProcess(cps.oldPID)
	etcdAfter, _ := measure.ProcCPU(cps.etcdPID)
	st.etcdCPU = etcdAfter - cps.etcdBefore
	for i, s := range rs.servers {
		r, pid := st.replicas[i], s.PID()
		r.anon = smp.anon[i].Max
		r.hwm, _ = measure.ProcStatusBytes(pid, "VmHWM")
		r.exited = s.Exited()
		cs, err := rs.cgroups[i].Stats()
		if err != nil {
			return err
		}
		r.cgroupPeak, r.limitHits, r.oomKills = cs.Peak, cs.LimitHits, cs.OOMKills
	}
	return nil
}

// anon2 is the replicas' peak RssAnon.
func anon2(rs []*fleetReplica) []float64 {
	var v []float64
	for _, r := range rs {
		v = append(v, r.anon)
	}
	return v
}
