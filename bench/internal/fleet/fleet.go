// Package fleet measures a relist storm (-fleet N, FLEET.md): N replicas of one plugin watch one API server holding the synthetic
// cluster, with EndpointSlices changing at -churn a second and changes whose answers are timed
// (a ClusterIP service created, a headless service's endpoint moved) made twice a second; the API
// server is restarted, its new watch cache cannot resume any watch, and every replica lists
// everything again at once. Measured: the new API server's memory and CPU from its start until
// every replica answers a change made after it, each replica's peak memory (each in a memory
// cgroup of its own: kubetree's as deploy/'s container, the in-tree plugin's larger), and the
// time from each change to its answer on every replica, before the restart and through the
// relist. The same restart without any replica first: what the API server costs by itself. The
// plugins' storms run one after another against the same data.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

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

// fleetResult is the whole run.
type fleetResult struct {
	machine  measure.Machine
	version  string
	began    time.Time
	ended    time.Time
	cluster  *measure.Cluster
	replicas int
	storms   []*fleetStorm
	limits   map[string]string
	env      map[string]string
	failures []string // storms that did not finish, and why
}

// probeLimit is how long a replica is given to answer a change.
const probeLimit = 2 * time.Minute

// Run creates the synthetic cluster on a control plane of its own, measures a storm without
// replicas and one of each of -fleet-plugins, and writes the report and its chart. A storm that
// fails is reported as such; the storms measured so far are reported all the same.
func Run(ctx context.Context, cfg Options) error {
	began := time.Now()
	measure.CoreDNSBinary = filepath.Join(cfg.Root, "bin/coredns")
	if _, err := os.Stat(measure.CoreDNSBinary); err != nil {
		return fmt.Errorf("%s missing (`make build` in %s): %w", measure.CoreDNSBinary, cfg.Root, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go guardMemory(ctx, cancel, cfg.MemGuard)
	// The API server comes back after reading every object from etcd into its new watch cache:
	// at 1M endpoints that can take longer than cluster.sh's default 90 s.
	os.Setenv("KUBETREE_READY_TIMEOUT", "600")
	if cfg.GoMemLimit != "" {
		measure.PluginEnv["kubetree"] = append(os.Environ(), "GOMEMLIMIT="+cfg.GoMemLimit)
	}
	return cfg.WithControlPlane(ctx, "kubetree-bench-fleet-", func(dir string, cp *measure.ControlPlane) error {
		res := &fleetResult{machine: measure.MachineInfo(cfg.Root), version: cp.Version, began: began, replicas: cfg.Replicas,
			limits: map[string]string{"kubetree": cfg.MemoryLimit, "kubernetes": cfg.LimitInTree},
			env:    map[string]string{"kubetree": "GOMEMLIMIT=" + measure.OrDash(cfg.GoMemLimit), "kubernetes": "none"}}
		measure.Logf("== create the cluster")
		cl, err := measure.Populate(ctx, cp, cfg.Spec, nil, nil)
		if err != nil {
			return err
		}
		res.cluster = cl
		writer, err := measure.ProtobufClient(cp.Kubeconfig)
		if err != nil {
			return err
		}
		failed := res.measureStorms(ctx, cfg, dir, cp, writer)
		res.ended = time.Now()
		if err := res.write(cfg); err != nil {
			return err
		}
		return failed
	})
}

// measureStorms measures a storm without replicas, then one of each plugin in turn, and returns
// what failed.
func (res *fleetResult) measureStorms(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, writer kubernetes.Interface) (failed error) {
	for _, p := range append([]string{""}, cfg.Plugins...) {
		st, err := measureStorm(ctx, cfg, dir, cp, writer, res.cluster, p)
		if err != nil {
			measure.Logf("storm %q failed: %v", p, err)
			res.failures = append(res.failures, fmt.Sprintf("%s: %v", measure.OrDash(p), firstLine(err.Error())))
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
	return failed
}

// write prints the report, and writes it and its chart when -out is given and a storm finished.
func (res *fleetResult) write(cfg Options) error {
	report := res.markdown(cfg)
	fmt.Println(report)
	if cfg.Out != "" && len(res.storms) > 0 {
		if err := res.chart(filepath.Join(filepath.Dir(cfg.Out), "fleet-apiserver-memory.svg")); err != nil {
			return err
		}
		if err := os.WriteFile(cfg.Out, []byte(report), 0o644); err != nil {
			return err
		}
		measure.Logf("wrote %s", cfg.Out)
	}
	return nil
}

// tail2 is the last n lines of s.
func tail2(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// firstLine is s up to its first line break.
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
			cancel(fmt.Errorf("the machine's memory in use reached %s (-mem-guard %s): stopped", measure.MiB(total-avail), measure.MiB(limit)))
			return
		}
	}
}

// meminfo is a field of /proc/meminfo, in bytes.
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
