// Package steady measures what a replica costs the API server under steady churn (-steady,
// STEADY.md). On one synthetic cluster (EndpointSlices as the EndpointSlice controller writes
// them), EndpointSlices change at -steady-rate a second throughout the run, each update as the
// controller writes it when a pod loses or regains its readiness or is replaced. One server at a
// time, in -steady-replicas replicas, talks to the API server, each replica through a counting TCP
// proxy of its own: the in-tree kubernetes plugin, kubetree (bin/coredns) with its audit off, any
// further kubetree builds (-steady-kubetree), and then no server at all, in that order,
// -steady-rounds times, so that the shared machine's drift falls on all alike. Each window lasts
// -steady-window, from -steady-settle after every replica answered (the initial lists are not
// counted). A window's figures are its replicas' together; per replica, divided by their number.
//
// Per window: the bytes the API server sent through the proxy, and its CPU (utime+stime from
// /proc). A window lasts minutes, and the API server collects garbage about once a GB allocated at
// 1M endpoints, for a second or more: whether a window holds one or two collections would decide
// its CPU. So, as for the audit (-audit), the collector's CPU (its runtime's own count) is taken
// out of each window and charged back by what the window allocated, at the collector's CPU per
// allocated byte over the whole run. A replica's CPU is its window's less the no-server window's of
// the same round; the median of the rounds.
//
// Then kubetree's audit, measured in the same run under the same churn: each kubetree build with
// audit_interval -audit-interval, -audits audits after the first (apicost.MeasureAudits, as -audit
// does). Per replica-hour: the watches' bytes and CPU, plus an audit's times the audits an hour at
// each interval of apicost.Intervals, against the in-tree replica's.
package steady

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// Server is one column of the report: a server name, its plugin and the binary it runs.
type Server struct {
	name   string // kubernetes, kubetree, or a -steady-kubetree name; "" is no server
	plugin string // kubernetes or kubetree
	binary string
}

// ParseKubetree reads -steady-kubetree: name=path,... of further kubetree builds.
func ParseKubetree(v string) ([]Server, error) {
	var out []Server
	if v == "" {
		return nil, nil
	}
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	seen := map[string]bool{"kubernetes": true, "kubetree": true}
	for _, f := range strings.Split(v, ",") {
		name, path, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok || !valid.MatchString(name) || path == "" {
			return nil, fmt.Errorf("-steady-kubetree: name=path,... with names of lower-case letters, digits, '.' and '-', got %q", f)
		}
		if seen[name] {
			return nil, fmt.Errorf("-steady-kubetree: the name %q is taken", name)
		}
		seen[name] = true
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		out = append(out, Server{name: name, plugin: "kubetree", binary: abs})
	}
	return out, nil
}

// steadyResult is the whole run.
type steadyResult struct {
	measure.RunInfo
	servers     []Server
	sources     map[string]string            // by server name: what its binary was built from
	windows     map[string][]apicost.Window  // by server name, "" for no server; one per round
	audits      map[string]*apicost.AuditRun // by kubetree server name
	scrapeAlloc float64                      // what one scrape of the API server's metrics allocates
	// The API server's collector over the whole measurement.
	gc                     apicost.Collector
	churnDone, churnFailed int64
	churnFor               time.Duration
}

// Run creates the synthetic cluster on a control plane of its own, measures every server's
// windows and each kubetree build's audits under the churn, and writes the report.
func Run(ctx context.Context, cfg Options) error {
	began := time.Now()
	measure.CoreDNSBinary = filepath.Join(cfg.Root, "bin/coredns")
	servers := append([]Server{
		{name: "kubernetes", plugin: "kubernetes", binary: measure.CoreDNSBinary},
		{name: "kubetree", plugin: "kubetree", binary: measure.CoreDNSBinary},
	}, cfg.Kubetree...)
	for _, sv := range servers {
		if _, err := os.Stat(sv.binary); err != nil {
			return fmt.Errorf("%s missing (`make build` in %s): %w", sv.binary, cfg.Root, err)
		}
	}
	res := &steadyResult{RunInfo: measure.RunInfo{Began: began}, servers: servers,
		sources: map[string]string{}, windows: map[string][]apicost.Window{}, audits: map[string]*apicost.AuditRun{}}
	for _, sv := range servers {
		res.sources[sv.name] = binarySource(sv.binary)
	}
	return cfg.OnCluster(ctx, "kubetree-bench-steady-", &res.RunInfo, func(dir string, cp *measure.ControlPlane) error {
		return measureSteady(ctx, cfg, dir, cp, res)
	}, func() string { return res.markdown(cfg) })
}

// binarySource is the commit a Go binary was built from (its VCS stamp), or its path.
func binarySource(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return path
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", with uncommitted changes"
			}
		}
	}
	if rev == "" {
		return path + " (no VCS stamp)"
	}
	return fmt.Sprintf("commit %.7s%s", rev, modified)
}

// measureSteady starts the churn, then measures every server and no server, -steady-rounds times,
// and then each kubetree build's audits.
func measureSteady(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, res *steadyResult) error {
	probe := res.Cluster.Probe()
	ch, stopChurn, err := apicost.StartChurning(ctx, cp, res.Cluster, cfg.Rate, cfg.Settle)
	if err != nil {
		return err
	}
	defer stopChurn()
	target, pids := ch.Target, ch.PIDs
	res.scrapeAlloc = ch.ScrapeAlloc

	order := append(slices.Clone(res.servers), Server{})
	for round := range cfg.Rounds {
		for _, sv := range order {
			w, err := steadyWindowOf(ctx, cfg, dir, cp, target, pids, probe, ch.Churn, sv, round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, serverLabel(sv.name), err)
			}
			res.windows[sv.name] = append(res.windows[sv.name], w)
		}
	}

	// The audit of each kubetree build, under the same churn. Between audits the API server
	// allocates at the rate of that build's windows (the churn and its watches).
	for _, sv := range res.servers {
		if sv.plugin != "kubetree" {
			continue
		}
		var allocRates []float64
		for _, w := range res.windows[sv.name] {
			allocRates = append(allocRates, (w.Alloc-res.scrapeAlloc)/w.Secs)
		}
		rest := apicost.Rest{ScrapeAlloc: res.scrapeAlloc, APIAlloc: measure.Median(allocRates)}
		run, err := apicost.MeasureAudits(ctx, cfg.AuditPlan, dir, cp, target, pids, probe, sv.name+"-audit", sv.binary, rest)
		if err != nil {
			return fmt.Errorf("%s's audit: %w", sv.name, err)
		}
		res.audits[sv.name] = run
	}
	last, err := cp.APIMetrics(ctx)
	if err != nil {
		return err
	}
	res.gc = apicost.CollectorBetween(ch.First, last)
	stopChurn()
	res.churnFor, res.churnDone, res.churnFailed = time.Since(ch.Began), ch.Done.Load(), ch.Failed.Load()
	measure.Logf("churn: %d EndpointSlice updates in %s (%.2f/s), %d failed or dropped", res.churnDone, res.churnFor.Round(time.Second),
		float64(res.churnDone)/res.churnFor.Seconds(), res.churnFailed)
	return nil
}
