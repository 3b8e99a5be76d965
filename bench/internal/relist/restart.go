package relist

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// relist restarts the API server while queries for names that exist go on and each server's
// RssAnon is sampled, and measures each server until 5 s after it serves a service created after
// the restart.
func (res *relistResult) relist(ctx context.Context, cfg Options, cp *measure.ControlPlane, servers map[string]*measure.Server, cg *measure.MemoryCgroup) (err error) {
	// Queries for names that exist keep going through the relist; every answer is checked.
	names := res.cluster.Services[:min(200, len(res.cluster.Services))]
	stopProbes := make(chan struct{})
	var probes sync.WaitGroup
	for _, p := range []string{"kubernetes", "kubetree"} {
		pr := &relistProbe{}
		res.probes[p] = pr
		probes.Go(func() { probeNames(ctx, servers[p].Addr, names, pr, stopProbes) })
	}

	anon := map[string]*measure.SampledPeak{}
	for _, p := range []string{"kubernetes", "kubetree"} {
		anon[p] = &measure.SampledPeak{}
		probes.Go(func() { anon[p].Sample(servers[p].PID(), "RssAnon", stopProbes) })
	}

	measure.Logf("== restart the API server (its watch cache is new: every watch relists)")
	for _, p := range []string{"kubernetes", "kubetree"} {
		if res.relistCPU[p], err = servers[p].CPU(); err != nil {
			return err
		}
		res.relistBytes[p] = servers[p].Received()
	}
	if err := res.restart(ctx, cfg, cp, servers, cg); err != nil {
		close(stopProbes)
		probes.Wait()
		return err
	}
	if err := measure.Sleep(ctx, 5*time.Second); err != nil { // what the relist left for the collector
		return err
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		c, err := servers[p].CPU()
		if err != nil {
			return err
		}
		res.relistCPU[p] = c - res.relistCPU[p]
		res.relistBytes[p] = servers[p].Received() - res.relistBytes[p]
		measure.Logf("%s: %.2f s CPU through the relist, %s from the API server", p, res.relistCPU[p], measure.MiB(res.relistBytes[p]))
	}
	close(stopProbes)
	probes.Wait()
	if cg != nil {
		st, err := cg.Stats()
		if err != nil {
			return err
		}
		res.cgroup, res.survived = &st, servers["kubetree"].Exited() == ""
		measure.Logf("kubetree in a %s memory cgroup: peak usage %s, limit reached %d times, OOM kills %d, still running: %v",
			cfg.MemoryLimit, measure.MiB(st.Peak), st.LimitHits, st.OOMKills, res.survived)
	}
	return res.peaks(servers, anon)
}

// restart restarts the API server, creates a service as soon as it takes writes, and waits until
// both servers answer it.
func (res *relistResult) restart(ctx context.Context, cfg Options, cp *measure.ControlPlane, servers map[string]*measure.Server, cg *measure.MemoryCgroup) error {
	start := time.Now()
	for _, step := range []string{"stop-apiserver", "start-apiserver"} {
		if out, err := exec.Command(filepath.Join(cfg.Root, "hack/cluster.sh"), step, cp.Dir).CombinedOutput(); err != nil {
			return fmt.Errorf("hack/cluster.sh %s: %v\n%s", step, err, out)
		}
	}
	res.restartTook = time.Since(start)
	after := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: res.cluster.Namespaces[0], Name: "after-relist"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	var created *corev1.Service
	var err error
	for created == nil {
		if created, err = cp.Client.CoreV1().Services(after.Namespace).Create(ctx, after, metav1.CreateOptions{}); err != nil {
			created = nil
			if err := measure.Sleep(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		if err := measure.WaitA(ctx, servers[p].Addr, "after-relist."+after.Namespace+".svc.cluster.local.", created.Spec.ClusterIP); err != nil {
			if p == "kubetree" && cg != nil {
				st, serr := cg.Stats()
				if serr != nil {
					return fmt.Errorf("%s: %w (and its cgroup: %v)", p, err, serr)
				}
				return fmt.Errorf("%s (in its %s memory cgroup: peak usage %s, limit reached %d times, OOM kills %d; exit: %q): %w",
					p, cfg.MemoryLimit, measure.MiB(st.Peak), st.LimitHits, st.OOMKills, servers[p].Exited(), err)
			}
			return fmt.Errorf("%s: %w", p, err)
		}
		res.relistTook[p] = time.Since(start)
	}
	return nil
}

// peaks takes each server's peak RSS through the relist and its RSS of the binary's pages.
func (res *relistResult) peaks(servers map[string]*measure.Server, anon map[string]*measure.SampledPeak) (err error) {
	for _, p := range []string{"kubernetes", "kubetree"} {
		if res.relistPeak[p], err = measure.ProcStatusBytes(servers[p].PID(), "VmHWM"); err != nil {
			return err
		}
		if res.fileRSS[p], err = measure.ProcStatusBytes(servers[p].PID(), "RssFile"); err != nil {
			return err
		}
		res.anonPeak[p] = anon[p].Max
		pr := res.probes[p]
		measure.Logf("%s: peak RSS through the relist %s; served after %s; queries meanwhile: %d right, %d wrong, %d unanswered",
			p, measure.MiB(res.relistPeak[p]), res.relistTook[p].Round(time.Millisecond), pr.answered.Load(), pr.wrong.Load(), pr.failed.Load())
	}
	return nil
}

// probeNames asks for the A record of each service in turn until stop, and counts answers that are
// right (the service's cluster IP or its endpoints), wrong, or missing.
func probeNames(ctx context.Context, addr string, names []*measure.Service, pr *relistProbe, stop chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		s := names[i%len(names)]
		r, err := measure.Ask(ctx, addr, s.FQDN(), dns.TypeA)
		switch {
		case err != nil:
			pr.failed.Add(1)
		case r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0:
			pr.wrong.Add(1)
		case s.Headless && measure.HasA(r, s.IPs[0]), !s.Headless && measure.HasA(r, s.ClusterIP):
			pr.answered.Add(1)
		default:
			pr.wrong.Add(1)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
