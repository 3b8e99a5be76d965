// Package sidebyside is the bench's default run (RESULTS.md): CoreDNS's in-tree kubernetes plugin
// beside kubetree, and both beside whoami as the ceiling, on one synthetic cluster. It measures
// start-up, memory (also at smaller sizes, on the way), whether the two plugins answer alike, query
// throughput, latency and CPU under dnsperf, how fast a created or deleted service shows in DNS,
// what an EndpointSlice update costs each plugin, and the model's heap at 1M endpoints, and draws
// the charts beside the report.
package sidebyside

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// phases records how long each part of the run took.
type phases struct {
	names []string
	durs  []time.Duration
	cur   string
	at    time.Time
}

func (p *phases) start(name string) {
	p.end()
	p.cur, p.at = name, time.Now()
	measure.Logf("== %s", name)
}

func (p *phases) end() {
	if p.cur != "" {
		p.names = append(p.names, p.cur)
		p.durs = append(p.durs, time.Since(p.at))
		p.cur = ""
	}
}

// Run is the side-by-side run: it starts a control plane, creates the synthetic cluster, measures
// the three servers on it, and writes the report and its charts.
func Run(ctx context.Context, cfg Options) (err error) {
	r := newResults(cfg)
	ph := r.phases
	for _, b := range []string{"bin/coredns", "bin/etcd", "bin/kube-apiserver", "bin/kubectl", "hack/cluster.sh"} {
		if _, err := os.Stat(filepath.Join(cfg.Root, b)); err != nil {
			return fmt.Errorf("%s missing (run `make build control-plane` in %s): %w", b, cfg.Root, err)
		}
	}
	if _, err := exec.LookPath("dnsperf"); err != nil {
		return errors.New("dnsperf not found: apt-get update && apt-get install dnsperf")
	}
	measure.CoreDNSBinary = filepath.Join(cfg.Root, "bin/coredns")
	if cfg.Mix == "cluster" { // its pod names are answered with pods insecure, kubeadm's Corefile's
		measure.PluginOptions = []string{"pods insecure"}
	}
	r.machine = measure.MachineInfo(cfg.Root)
	measure.Logf("kubetree bench: %d services (%.0f%% headless), %d endpoints each, %d namespaces; %d rounds of %s",
		cfg.Services, cfg.Headless*100, cfg.Endpoints, cfg.Namespaces, cfg.Rounds, cfg.Duration)

	dir, err := os.MkdirTemp("", "kubetree-bench-")
	if err != nil {
		return err
	}
	defer func() {
		if cfg.Keep || (err != nil && ctx.Err() == nil) {
			measure.Logf("kept %s (control plane state, Corefiles, CoreDNS logs)", dir)
			return
		}
		os.RemoveAll(dir)
	}()

	// The control plane: stopped on every way out, also when start fails half way.
	ph.start("control plane start")
	cp := &measure.ControlPlane{Root: cfg.Root, Dir: filepath.Join(dir, "cluster")}
	defer func() {
		measure.Logf("stopping the control plane")
		if err := cp.Stop(); err != nil {
			measure.Logf("stopping the control plane: %v", err)
		}
	}()
	if err := cp.Start(ctx); err != nil {
		return err
	}
	r.k8sVersion = cp.Version
	if err := r.runPhases(ctx, dir, cp); err != nil {
		return err
	}
	ph.end()
	r.ended = time.Now()
	return r.write()
}

// runPhases creates the cluster and measures the servers on it, phase by phase; every server it
// starts is stopped before it returns.
func (r *results) runPhases(ctx context.Context, dir string, cp *measure.ControlPlane) (err error) {
	cfg, ph := r.cfg, r.phases
	ph.start("create the cluster (memory of both plugins at each of -sizes on the way)")
	cl, qfile, err := r.createCluster(ctx, dir, cp)
	if err != nil {
		return err
	}

	// The servers. Every process started is stopped on the way out.
	var procs []*measure.Server
	defer func() {
		for _, s := range procs {
			s.Stop()
		}
	}()
	ph.start("start-up (whoami, then kubernetes and kubetree alternating)")
	servers, err := r.startUp(ctx, dir, cp, &procs)
	if err != nil {
		return err
	}

	ph.start("memory after sync")
	if err := r.memory(ctx, servers, 5*time.Second, "after sync", r.memSync); err != nil {
		return err
	}

	ph.start("correctness (answers of kubernetes vs kubetree)")
	r.diff, err = compareAnswers(ctx, servers["kubernetes"].Addr, servers["kubetree"].Addr, r.queryMix, cl, cfg)
	if err != nil {
		return err
	}
	r.diff.print(os.Stderr)

	ph.start("query load (dnsperf)")
	r.runs, err = runLoad(ctx, servers, qfile, dir, cfg)
	if err != nil {
		return err
	}

	ph.start("memory after load")
	if err := r.memory(ctx, servers, 2*time.Second, "after load", r.memLoad); err != nil {
		return err
	}

	if cfg.Propagation > 0 {
		ph.start("propagation (create / delete, one service at a time)")
		r.prop, err = propagation(ctx, cp, cl, servers, cfg.Propagation)
		if err != nil {
			return err
		}
	}
	if cfg.SliceUpdates > 0 {
		ph.start("EndpointSlice updates (CPU per update, DNS programming latency)")
		r.slices, err = sliceUpdates(ctx, cp, cl, servers, cfg.SliceUpdates, cfg.Workers, cfg.Profile, measure.ServerPprof, cfg.ProfileDir)
		if err != nil {
			return err
		}
	}
	for _, s := range servers {
		if e := s.Exited(); e != "" {
			return fmt.Errorf("%s exited during the run: %s", s.Name, e)
		}
	}
	if cfg.ModelHeap {
		ph.start("model heap at 100k services and 1M endpoints (BenchmarkScale), every option off, then topology on")
		if r.heap, err = measureModelHeap(ctx, cfg.Root); err != nil {
			return err
		}
		r.heap.log()
	}
	return nil
}

// createCluster creates the synthetic cluster, measuring both plugins' memory at each of -sizes
// on the way, and writes the query file for it.
func (r *results) createCluster(ctx context.Context, dir string, cp *measure.ControlPlane) (cl *measure.Cluster, qfile string, err error) {
	cl, err = measure.Populate(ctx, cp, r.cfg.Spec, r.cfg.Sizes, func(cl *measure.Cluster) error {
		pt, err := measureSize(ctx, dir, cp.Kubeconfig, cl, len(r.sizes))
		r.sizes = append(r.sizes, pt)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	r.cluster = cl
	qfile = filepath.Join(dir, "queries.txt")
	if r.queryMix, err = writeQueryFile(qfile, cl, r.cfg); err != nil {
		return nil, "", err
	}
	return cl, qfile, nil
}

// startUp starts whoami, then kubernetes and kubetree -start-trials times each, alternately, one
// at a time, and times each start; the last of each plugin stays, counted by a proxy of its own,
// and so does whoami. Every process started is added to procs.
func (r *results) startUp(ctx context.Context, dir string, cp *measure.ControlPlane, procs *[]*measure.Server) (map[string]*measure.Server, error) {
	cfg := r.cfg
	if cfg.Profile {
		ports, err := measure.FreePorts(3)
		if err != nil {
			return nil, err
		}
		measure.ServerPprof["kubernetes"], measure.ServerPprof["kubetree"], measure.ServerPprof["whoami"] = ports[0], ports[1], ports[2]
	}
	whoami, err := measure.StartServer(ctx, dir, "whoami", 0, cp.Kubeconfig)
	if err != nil {
		return nil, err
	}
	*procs = append(*procs, whoami)
	st, err := whoami.WaitStartup(ctx, "", "")
	if err != nil {
		return nil, err
	}
	r.startups["whoami"] = append(r.startups["whoami"], st)
	probe := r.cluster.Probe()
	servers := map[string]*measure.Server{}
	for trial := range cfg.StartTrials {
		order := []string{"kubernetes", "kubetree"}
		if trial%2 == 1 {
			order = []string{"kubetree", "kubernetes"}
		}
		for _, p := range order {
			start := measure.StartServer
			if trial == cfg.StartTrials-1 { // the servers that stay: what the API server sends them is counted
				start = func(ctx context.Context, dir, plugin string, trial int, kubeconfig string) (*measure.Server, error) {
					return measure.StartServerCounted(ctx, dir, plugin, trial, kubeconfig, func(addr, ready, metrics, kc string) string {
						return measure.Corefile(plugin, addr, ready, metrics, kc)
					})
				}
			}
			s, err := start(ctx, dir, p, trial, cp.Kubeconfig)
			if err != nil {
				return nil, err
			}
			*procs = append(*procs, s)
			st, err := s.WaitStartup(ctx, probe.Name, probe.IP)
			if err != nil {
				return nil, err
			}
			measure.Logf("%s trial %d: ready after %s, first correct answer after %s (first reply of any kind %s, %s)",
				p, trial+1, measure.Millis(st.Ready), measure.Millis(st.Answer), measure.Millis(st.FirstReply), st.FirstRcode)
			r.startups[p] = append(r.startups[p], st)
			if trial < cfg.StartTrials-1 {
				s.Stop()
			} else {
				servers[p] = s
			}
		}
	}
	servers["whoami"] = whoami
	return servers, nil
}

// memory takes every server's memory into into, after waiting for wait.
func (r *results) memory(ctx context.Context, servers map[string]*measure.Server, wait time.Duration, when string, into map[string]measure.Mem) error {
	if err := measure.Sleep(ctx, wait); err != nil {
		return err
	}
	for _, name := range serverNames {
		m, err := servers[name].Memory(ctx)
		if err != nil {
			return err
		}
		into[name] = m
		measure.Logf("%s %s: RSS %s, heap %s", name, when, measure.MiB(m.RSS), measure.MiB(m.Heap))
	}
	return nil
}

// write draws the charts next to -out, prints the table, and writes the report to -out.
func (r *results) write() error {
	cfg := r.cfg
	if cfg.Out != "" {
		var err error
		if r.charts, err = r.writeCharts(filepath.Dir(cfg.Out)); err != nil {
			return err
		}
	}
	report := r.markdown()
	fmt.Println()
	fmt.Println(r.table())
	fmt.Println(r.notes())
	if cfg.Out != "" {
		if err := os.WriteFile(cfg.Out, []byte(report), 0o644); err != nil {
			return err
		}
		measure.Logf("wrote %s", cfg.Out)
	}
	measure.Logf("done in %s", time.Since(r.began).Round(time.Second))
	return nil
}

// serverNames is the column order everywhere.
var serverNames = []string{"kubernetes", "kubetree", "whoami"}
