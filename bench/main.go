// Command bench compares CoreDNS's in-tree kubernetes plugin with kubetree, and both with CoreDNS's
// whoami plugin as the ceiling, on a synthetic cluster served by a local control plane
// (hack/cluster.sh). It measures start-up, memory, query throughput and latency under dnsperf, CPU per
// query, agreement of the answers, and how fast a created or deleted service shows in DNS, and writes
// RESULTS.md. `make bench` runs it; see README.md.
//
// Other flags run another experiment instead (-audit, -steady, -watch-cost, -fleet, -pods,
// -relist): each is a package of internal/, built on the measuring code of internal/measure. This
// command only reads the flags and runs the one they name.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubetree/kubetree/bench/internal/audit"
	"github.com/kubetree/kubetree/bench/internal/fleet"
	"github.com/kubetree/kubetree/bench/internal/pods"
	"github.com/kubetree/kubetree/bench/internal/relist"
	"github.com/kubetree/kubetree/bench/internal/sidebyside"
	"github.com/kubetree/kubetree/bench/internal/steady"
	"github.com/kubetree/kubetree/bench/internal/watchcost"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	switch {
	case len(cfg.pods) > 0:
		err = pods.Run(ctx, cfg.podsOptions())
	case cfg.relist:
		err = relist.Run(ctx, cfg.relistOptions())
	case cfg.audit:
		err = audit.Run(ctx, cfg.auditOptions())
	case cfg.fleet > 0:
		err = fleet.Run(ctx, cfg.fleetOptions())
	case cfg.steady:
		err = steady.Run(ctx, cfg.steadyOptions())
	case cfg.watchCost > 0:
		err = watchcost.Run(ctx, cfg.watchCostOptions())
	default:
		err = sidebyside.Run(ctx, cfg.sideBySideOptions())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAILED:", err)
		os.Exit(1)
	}
}

// sideBySideOptions, auditOptions, ... are each experiment's share of the flags.
func (c *config) sideBySideOptions() sidebyside.Options {
	return sidebyside.Options{Common: c.Common, DnsperfFlags: c.DnsperfFlags, Sizes: c.sizes, Rounds: c.rounds,
		Duration: c.duration, Warmup: c.warmup, Queries: c.queries, Sample: c.sample, Propagation: c.propagation,
		StartTrials: c.startTrials, Seed: c.seed, Mix: c.mix, SliceUpdates: c.sliceChurn, Profile: c.profile, ProfileDir: c.profileDir,
		ModelHeap: c.modelHeap}
}

func (c *config) auditOptions() audit.Options {
	return audit.Options{Common: c.Common, AuditPlan: c.AuditPlan, Before: c.auditBefore, Idle: c.auditIdle}
}

func (c *config) steadyOptions() steady.Options {
	return steady.Options{Common: c.Common, AuditPlan: c.AuditPlan, Rate: c.steadyRate, Window: c.steadyWindow,
		Settle: c.steadySettle, Rounds: c.steadyRounds, Kubetree: c.steadyKubetree, Replicas: c.steadyReplicas}
}

func (c *config) watchCostOptions() watchcost.Options {
	return watchcost.Options{Common: c.Common, AuditPlan: c.AuditPlan, Watches: c.watchCost, Rate: c.steadyRate,
		Window: c.steadyWindow, Settle: c.steadySettle, Rounds: c.steadyRounds}
}

func (c *config) fleetOptions() fleet.Options {
	return fleet.Options{Common: c.Common, Replicas: c.fleet, Plugins: c.fleetPlugins, Churn: c.churn, Steady: c.fleetSteady,
		After: c.fleetAfter, LimitInTree: c.fleetLimitInTree, MemGuard: c.memGuard, MemoryLimit: c.memoryLimit,
		GoMemLimit: c.goMemLimit}
}

func (c *config) relistOptions() relist.Options {
	return relist.Options{Common: c.Common, GoMemLimit: c.goMemLimit, MemoryLimit: c.memoryLimit, CPUHogs: c.cpuHogs}
}

func (c *config) podsOptions() pods.Options {
	return pods.Options{Common: c.Common, DnsperfFlags: c.DnsperfFlags, Pods: c.pods, Churn: c.podChurn, Profile: c.profile,
		ProfileDir: c.profileDir, Rounds: c.rounds, Duration: c.duration}
}
