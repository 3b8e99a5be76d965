// Package audit measures what kubetree's audit costs the API server (-audit, AUDIT.md). On one
// synthetic cluster (EndpointSlices as the EndpointSlice controller writes them,
// -controller-slices), one server at a time talks to the API server through a counting TCP proxy
// of its own:
//
//  1. the in-tree kubernetes plugin: the bytes of its initial list, then -audit-idle of its watches
//     alone, which is all it asks for after that list;
//  2. with -audit-before, kubetree built before the metadata-only audit; then bin/coredns's. Each
//     runs with audit_interval -audit-interval; the first audit is not counted, the next -audits are;
//  3. the audit's metadata lists asked for directly: one list per resource uncompressed, and
//     gzip-compressed (as kubetree asks), and in pages of 500, with the resources unchanged for
//     minutes and just changed: what compression and paging would trade.
//
// Per audit: the bytes the API server sent through the proxy (TLS records included), the bytes of
// its LIST responses and their number (its own metrics, apiserver_response_sizes and
// apiserver_request_total), and CPU. The CPU of kube-apiserver, etcd and kubetree (utime+stime,
// sampled every 50 ms) is taken in the audit's window, from 0.5 s before it starts (its log line
// gives its end and duration) to 2 s after it ends, less what each used per second between
// audits; the median of the audits. That leaves out most of the API server's garbage collection,
// which runs when its heap has grown by as much as is live (~1 GB here: the watch cache), so rarely
// within a window and then for a second or more. Its share is charged by what the audit allocates:
// the API server's heap allocations per audit (go_gc_heap_allocs_bytes_total, less the rate at
// rest) times the collector's CPU per allocated byte over the whole run
// (go_cpu_classes_gc_total_cpu_seconds_total). Per replica-hour: an audit's bytes and CPU times the
// audits an hour at a given interval.
package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// auditCandidates are the intervals the report computes hourly figures at.
var auditCandidates = []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute}

// auditResult is the whole run.
type auditResult struct {
	measure.RunInfo
	inTree inTreeRun
	runs   []*apicost.AuditRun // before (with -audit-before), after
	// The audit's metadata lists asked for directly, by page size and compression, after no object
	// changed for quietFor.
	passes   []listPass
	quietFor time.Duration
	gc       apicost.Collector // the API server's collector over the whole measurement
}

// inTreeRun is the in-tree plugin: its initial list and its watches idling.
type inTreeRun struct {
	initial      float64       // bytes the API server sent from start until 5 s after ready
	idleBytes    float64       // bytes sent during the idle period
	idleFor      time.Duration // its length
	apiCPU       float64       // kube-apiserver CPU seconds per second meanwhile
	apicost.Rest               // its heap allocations meanwhile
}

// Run creates the synthetic cluster on a control plane of its own, measures the in-tree plugin's
// watches, each kubetree's audits and the audit's lists asked for directly, and writes the report.
func Run(ctx context.Context, cfg Options) error {
	began := time.Now()
	measure.CoreDNSBinary = filepath.Join(cfg.Root, "bin/coredns")
	for _, b := range append([]string{measure.CoreDNSBinary}, cfg.Before) {
		if b == "" {
			continue
		}
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s missing (`make build` in %s; -audit-before: see README.md): %w", b, cfg.Root, err)
		}
	}
	res := &auditResult{RunInfo: measure.RunInfo{Began: began}}
	return cfg.OnCluster(ctx, "kubetree-bench-audit-", &res.RunInfo, func(dir string, cp *measure.ControlPlane) error {
		return measureAudits(ctx, cfg, dir, cp, res)
	}, func() string { return res.markdown(cfg) })
}

// measureAudits measures, one server at a time, the in-tree plugin, each kubetree's audits and the
// audit's lists asked for directly.
func measureAudits(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, res *auditResult) error {
	target, pids, err := cp.Processes()
	if err != nil {
		return err
	}
	probe := res.Cluster.Probe()
	first, err := cp.APIMetrics(ctx)
	if err != nil {
		return err
	}

	if res.inTree, err = measureInTree(ctx, cfg, dir, cp, target, pids, probe); err != nil {
		return err
	}

	var servers [][2]string
	if cfg.Before != "" {
		servers = append(servers, [2]string{"kubetree-before", cfg.Before})
	}
	servers = append(servers, [2]string{"kubetree", measure.CoreDNSBinary})
	for _, sv := range servers {
		run, err := apicost.MeasureAudits(ctx, cfg.AuditPlan, dir, cp, target, pids, probe, sv[0], sv[1], res.inTree.Rest)
		if err != nil {
			return fmt.Errorf("%s: %w", sv[0], err)
		}
		res.runs = append(res.runs, run)
	}
	res.quietFor = time.Since(res.Cluster.Done)
	measure.Logf("== the audit's metadata lists, asked for directly (no object changed for %s)", res.quietFor.Round(time.Second))
	for _, v := range []listPass{{}, {gzip: true}, {page: 500}, {page: 500, changed: true}} {
		if v.changed {
			// One change to each resource: its watch cache keeps a snapshot at that revision, from
			// which it can serve the pages after the first.
			if err := touch(ctx, cp, res.Cluster); err != nil {
				return err
			}
		}
		pass, err := measureListPasses(ctx, dir, cp, target, pids["kube-apiserver"], res.inTree.Rest, v, cfg.Audits)
		if err != nil {
			return err
		}
		res.passes = append(res.passes, pass)
	}
	last, err := cp.APIMetrics(ctx)
	if err != nil {
		return err
	}
	res.gc = apicost.CollectorBetween(first, last)
	return nil
}

// measureInTree measures the in-tree plugin: its initial list, then its watches alone.
func measureInTree(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, target string, pids map[string]int,
	probe measure.Probe) (it inTreeRun, err error) {
	measure.Logf("== the in-tree kubernetes plugin: initial list, then %s of watches", cfg.Idle)
	proxy, kubeconfig, err := measure.Proxied(dir, "kubernetes", cp.Kubeconfig, target)
	if err != nil {
		return it, err
	}
	defer proxy.Close()
	s, err := measure.StartServer(ctx, dir, "kubernetes", 0, kubeconfig)
	if err != nil {
		return it, err
	}
	defer s.Stop()
	if _, err := s.WaitStartup(ctx, probe.Name, probe.IP); err != nil {
		return it, err
	}
	if err := measure.Sleep(ctx, 5*time.Second); err != nil {
		return it, err
	}
	it.initial = float64(proxy.Down.Load())
	api0, err := measure.ProcCPU(pids["kube-apiserver"])
	if err != nil {
		return it, err
	}
	m0, scrape, err := cp.ScrapeCost(ctx)
	if err != nil {
		return it, err
	}
	it.ScrapeAlloc = scrape
	start, down0 := time.Now(), proxy.Down.Load()
	if err := measure.Sleep(ctx, cfg.Idle); err != nil {
		return it, err
	}
	it.idleFor = time.Since(start)
	it.idleBytes = float64(proxy.Down.Load() - down0)
	api1, err := measure.ProcCPU(pids["kube-apiserver"])
	if err != nil {
		return it, err
	}
	m1, err := cp.APIMetrics(ctx)
	if err != nil {
		return it, err
	}
	it.apiCPU = (api1 - api0) / it.idleFor.Seconds()
	// Since the second reading (m0's allocations and one scrape's), less the scrape of m1.
	it.APIAlloc = (m1.Alloc - (m0.Alloc + scrape) - scrape) / it.idleFor.Seconds()
	measure.Logf("kubernetes: initial list %s, then %.0f bytes in %s", measure.MiB(it.initial), it.idleBytes, it.idleFor.Round(time.Second))
	return it, nil
}
