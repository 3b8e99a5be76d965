// Package watchcost measures what one plain EndpointSlice watch costs the API server per event it
// carries, and what kubetree's audit costs it, in one run (-watch-cost, WATCHCOST.md).
//
// -steady measures a replica of each plugin against the API server's own variation, and one
// replica's watch did not come out above it (STEADY.md, STEADY-FANOUT.md). Here the watchers are
// the bench's own: -watch-cost raw watches of every EndpointSlice, each on a TLS connection of its
// own (as each replica has), protobuf, from the current version (as a reflector watches after its
// list: plain, the API server compresses only a streamed list's watch), the bytes read and dropped.
// The API server does for each what it does for a replica's EndpointSlice watch (which carries
// every slice update; its other watches carry none of them), and its cost per event multiplies by
// -watch-cost: in rounds, a window with the watches over HTTP/2 (the in-tree plugin's), one over
// HTTP/1.1 (kubetree's while busy) and one without, under the same churn (-steady-rate), CPU as
// -steady counts it. A watch costs its window's CPU per update less the no-watch window's, over
// the watches. Then kubetree's audit under the same churn, as -steady measures it, and the two
// per replica-hour at each audit interval.
package watchcost

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// watchCostResult is the whole run.
type watchCostResult struct {
	measure.RunInfo
	watchers    int
	windows     map[string][]apicost.Window // by watchVariants' name, "" for none; one per round
	audit       *apicost.AuditRun           // kubetree's (bin/coredns), under the same churn
	scrapeAlloc float64                     // what one scrape of the API server's metrics allocates
	gc          apicost.Collector           // the API server's collector over the run
}

// watchVariants are the watches measured: HTTP/2, as the in-tree plugin's (and kubetree's while
// quiet), and HTTP/1.1, as kubetree's while busy (watchstream.go: 50 events within 5 s).
var watchVariants = []watchVariant{{"HTTP/2", false}, {"HTTP/1.1", true}}

// watchVariant is one kind of watch measured; "" is none.
type watchVariant struct {
	name  string
	http1 bool
}

// Run creates the synthetic cluster on a control plane of its own, measures the watches and
// kubetree's audit under the churn, and writes the report.
func Run(ctx context.Context, cfg Options) error {
	began := time.Now()
	res := &watchCostResult{RunInfo: measure.RunInfo{Began: began}, watchers: cfg.Watches, windows: map[string][]apicost.Window{}}
	return cfg.OnCluster(ctx, "kubetree-bench-watchcost-", &res.RunInfo, func(dir string, cp *measure.ControlPlane) error {
		return measureWatchCost(ctx, cfg, dir, cp, res)
	}, func() string { return res.markdown(cfg) })
}

// measureWatchCost starts the churn, then measures the watches over each protocol and none,
// -steady-rounds times, and then kubetree's audit.
func measureWatchCost(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, res *watchCostResult) error {
	ch, stopChurn, err := apicost.StartChurning(ctx, cp, res.Cluster, cfg.Rate, cfg.Settle)
	if err != nil {
		return err
	}
	defer stopChurn()
	target, pids := ch.Target, ch.PIDs
	res.scrapeAlloc = ch.ScrapeAlloc
	for round := range cfg.Rounds {
		for _, v := range watchVariants {
			w, err := watchersWindow(ctx, cfg, dir, cp, target, pids, ch.Churn, cfg.Watches, v.http1, round)
			if err != nil {
				return fmt.Errorf("round %d, %d watchers over %s: %w", round+1, cfg.Watches, v.name, err)
			}
			res.windows[v.name] = append(res.windows[v.name], w)
		}
		w, err := watchersWindow(ctx, cfg, dir, cp, target, pids, ch.Churn, 0, false, round)
		if err != nil {
			return fmt.Errorf("round %d, no watchers: %w", round+1, err)
		}
		res.windows[""] = append(res.windows[""], w)
	}
	if cfg.Audits > 0 {
		// kubetree's audit under the same churn, as -steady measures it. Between audits the
		// API server allocates at the churn's rate: the lowest of the windows without watches
		// (a window may also hold the API server's own periodic work, which allocates as
		// much again; taking it off the audit would understate what the audit allocates).
		measure.CoreDNSBinary = filepath.Join(cfg.Root, "bin/coredns")
		rest := apicost.Rest{ScrapeAlloc: res.scrapeAlloc, APIAlloc: res.churnAlloc()}
		if res.audit, err = apicost.MeasureAudits(ctx, cfg.AuditPlan, dir, cp, target, pids, res.Cluster.Probe(), "kubetree", measure.CoreDNSBinary, rest); err != nil {
			return fmt.Errorf("kubetree's audit: %w", err)
		}
	}
	last, err := cp.APIMetrics(ctx)
	if err != nil {
		return err
	}
	res.gc = apicost.CollectorBetween(ch.First, last)
	return nil
}
