// Package relist measures the memory of a full relist (-relist, RELIST.md): kubernetes and kubetree, each with the Deployment's
// GOMEMLIMIT (-gomemlimit), start on the synthetic cluster; their peak RSS (VmHWM) through start-up
// is read, the peak is reset, and the API server is restarted: its new watch cache cannot resume
// the watches, so every informer lists everything again while the old state is still held. The
// peak through that relist is read once a service created after the restart answers on both, and
// every query sent meanwhile for a name that exists is checked.
package relist

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// relistResult is the whole run.
type relistResult struct {
	machine    measure.Machine // where it ran, and the build
	startup    map[string]measure.Startup
	startPeak  map[string]float64 // VmHWM through start-up and sync
	relistPeak map[string]float64 // VmHWM from the restart until the relist is served
	// VmHWM counts the binary's pages too (RssFile): clean pages of a file, which the kernel takes
	// back under a cgroup's limit before it kills anything, and which depend on what else on the
	// host has the binary in the page cache (here the other server runs the same one). RssAnon is
	// the memory that cannot be taken back; it has no peak counter, so it is sampled.
	anonPeak   map[string]float64     // the highest RssAnon sampled through the relist
	startAnon  map[string]float64     // the highest RssAnon sampled through start-up and sync
	fileRSS    map[string]float64     // RssFile at the end of the relist
	steady     map[string]measure.Mem // before the restart
	relistTook map[string]time.Duration
	// CPU seconds and bytes from the API server (through each server's counting proxy, TLS records
	// included): from exec until 5 s after ready; from the restart until 5 s after the relist is served.
	startCPU, relistCPU, startBytes, relistBytes map[string]float64
	probes                                       map[string]*relistProbe
	cluster                                      *measure.Cluster
	goMemLimit                                   string
	restartTook                                  time.Duration
	// With -memory-limit: kubetree's cgroup, what the kernel counted in it, and whether kubetree
	// was still running at the end.
	memoryLimit string
	cgroup      *measure.CgroupStats
	survived    bool
}

// hogSink keeps the busy loops of -cpu-hogs from being optimized away.
var hogSink atomic.Int64

// relistProbe counts a server's answers to the queries asked through the relist.
type relistProbe struct{ answered, wrong, failed atomic.Int64 }

// Run creates the synthetic cluster on a control plane of its own, starts both plugins on it,
// restarts the API server, and writes the report.
func Run(ctx context.Context, cfg Options) (err error) {
	began := time.Now()
	measure.CoreDNSBinary = filepath.Join(cfg.Root, "bin/coredns")
	if cfg.GoMemLimit != "" {
		measure.ServerEnv = append(os.Environ(), "GOMEMLIMIT="+cfg.GoMemLimit)
	}
	if cfg.CPUHogs > 0 {
		hogCtx, stopHogs := context.WithCancel(ctx)
		defer stopHogs()
		for range cfg.CPUHogs {
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
	return cfg.WithControlPlane(ctx, "kubetree-bench-relist-", func(dir string, cp *measure.ControlPlane) error {
		return measureRelist(ctx, cfg, dir, cp, began)
	})
}

// measureRelist creates the cluster, starts both servers (kubetree in a memory cgroup with
// -memory-limit), measures them through start-up and through a relist, and writes the report.
func measureRelist(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, began time.Time) (err error) {
	measure.Logf("== create the cluster")
	cl, err := measure.Populate(ctx, cp, cfg.Spec, nil, nil)
	if err != nil {
		return err
	}
	res := &relistResult{machine: measure.MachineInfo(cfg.Root), startup: map[string]measure.Startup{}, startPeak: map[string]float64{}, relistPeak: map[string]float64{},
		steady: map[string]measure.Mem{}, relistTook: map[string]time.Duration{}, probes: map[string]*relistProbe{},
		anonPeak: map[string]float64{}, fileRSS: map[string]float64{}, startAnon: map[string]float64{},
		cluster: cl, goMemLimit: cfg.GoMemLimit,
		startCPU: map[string]float64{}, relistCPU: map[string]float64{}, startBytes: map[string]float64{}, relistBytes: map[string]float64{}}

	servers := map[string]*measure.Server{}
	var cg *measure.MemoryCgroup
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
		if cg != nil {
			if err := cg.Remove(); err != nil {
				measure.Logf("removing kubetree's memory cgroup: %v", err)
			}
		}
	}()
	if cfg.MemoryLimit != "" {
		limit, err := resource.ParseQuantity(cfg.MemoryLimit)
		if err != nil {
			return fmt.Errorf("-memory-limit: %w", err)
		}
		if cg, err = measure.NewMemoryCgroup(fmt.Sprintf("kubetree-bench-%d", os.Getpid()), limit.Value()); err != nil {
			return err
		}
		measure.ServerCgroup["kubetree"] = cg
		res.memoryLimit = cfg.MemoryLimit
	}
	if err := res.startServers(ctx, dir, cp, servers); err != nil {
		return err
	}
	if err := res.beforeRestart(ctx, servers); err != nil {
		return err
	}
	if err := res.relist(ctx, cfg, cp, servers, cg); err != nil {
		return err
	}
	report := res.markdown(cfg, time.Since(began))
	return cfg.Publish(report)
}

// startServers starts kubernetes and kubetree, one after the other, each counted by a proxy of its
// own, and measures each until 5 s after it answers: its start-up, its CPU and bytes, and its
// RssAnon sampled meanwhile.
func (res *relistResult) startServers(ctx context.Context, dir string, cp *measure.ControlPlane, servers map[string]*measure.Server) (err error) {
	probe := res.cluster.Probe()
	for _, p := range []string{"kubernetes", "kubetree"} {
		measure.Logf("== start %s", p)
		s, err := measure.StartServerCounted(ctx, dir, p, 0, cp.Kubeconfig, func(addr, ready, metrics, kc string) string {
			return measure.Corefile(p, addr, ready, metrics, kc)
		})
		if err != nil {
			return err
		}
		servers[p] = s
		startSampled, stopStartSampling := &measure.SampledPeak{}, make(chan struct{})
		sampled := make(chan struct{})
		go func() { defer close(sampled); startSampled.Sample(s.PID(), "RssAnon", stopStartSampling) }()
		res.startup[p], err = s.WaitStartup(ctx, probe.Name, probe.IP)
		if err == nil {
			err = measure.Sleep(ctx, 5*time.Second) // what the first tree left for the collector
		}
		close(stopStartSampling)
		<-sampled
		res.startAnon[p] = startSampled.Max
		if err != nil {
			return err
		}
		if res.startCPU[p], err = s.CPU(); err != nil {
			return err
		}
		res.startBytes[p] = s.Received()
		measure.Logf("%s ready after %s; %.2f s CPU, %s from the API server", p, measure.Millis(res.startup[p].Ready), res.startCPU[p], measure.MiB(res.startBytes[p]))
	}
	return nil
}

// beforeRestart takes each server's peak RSS through start-up and its memory, and starts its peak
// over.
func (res *relistResult) beforeRestart(ctx context.Context, servers map[string]*measure.Server) (err error) {
	if err := measure.Sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	for _, p := range []string{"kubernetes", "kubetree"} {
		pid := servers[p].PID()
		if res.startPeak[p], err = measure.ProcStatusBytes(pid, "VmHWM"); err != nil {
			return err
		}
		if res.steady[p], err = servers[p].Memory(ctx); err != nil {
			return err
		}
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			return fmt.Errorf("resetting %s's peak RSS: %w", p, err)
		}
		measure.Logf("%s: peak RSS through start-up %s; steady RSS %s, heap %s", p, measure.MiB(res.startPeak[p]), measure.MiB(res.steady[p].RSS), measure.MiB(res.steady[p].Heap))
	}
	return nil
}
