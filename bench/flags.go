package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
	"github.com/kubetree/kubetree/bench/internal/sidebyside"
	"github.com/kubetree/kubetree/bench/internal/steady"
)

// config is what the flags set; each experiment is given its share (main.go).
type config struct {
	measure.Common
	measure.DnsperfFlags
	apicost.AuditPlan
	sizes       []int
	preset      string
	rounds      int
	duration    time.Duration
	warmup      time.Duration
	queries     int
	sample      int
	propagation int
	startTrials int
	seed        uint64
	mix         string
	timeout     time.Duration
	pods        []int // -pods: the pod dimension instead of the service run
	podChurn    int
	sliceChurn  int // -slice-updates: EndpointSlice updates timed in the main run
	profile     bool
	profileDir  string
	relist      bool
	modelHeap   bool
	goMemLimit  string
	memoryLimit string // -memory-limit: kubetree in a memory cgroup with this limit, e.g. 170Mi
	// -audit: what kubetree's audit costs the API server
	audit       bool
	auditBefore string        // a bin/coredns built before the metadata-only audit, measured beside
	auditIdle   time.Duration // the in-tree plugin idling, for its watch traffic and the API server's idle CPU
	// -fleet: a relist storm of N replicas of each plugin
	fleet            int
	fleetPlugins     []string
	churn            int           // EndpointSlice updates a second throughout
	fleetSteady      time.Duration // before the restart
	fleetAfter       time.Duration // after every replica caught up
	fleetLimitInTree string        // the in-tree plugin's memory cgroup limit
	memGuard         float64       // stop when the machine's memory in use passes this
	cpuHogs          int           // -relist: busy loops beside the servers, for CPU contention
	// -steady: what a replica costs the API server under steady churn
	steady         bool
	steadyRate     int             // EndpointSlice updates a second
	steadyWindow   time.Duration   // one server's window
	steadySettle   time.Duration   // from a server's first right answer to its window
	steadyRounds   int             // rounds of every server and none
	steadyKubetree []steady.Server // further kubetree builds, -steady-kubetree
	steadyReplicas int             // replicas of a server in its window
	// -watch-cost: what one plain EndpointSlice watch costs the API server per event
	watchCost int // watches in a window
}

// rawFlags are the flags that parseFlags reads into config once they are parsed.
type rawFlags struct{ sizes, pods, plugins, memGuard, steadyKubetree *string }

// parseFlags reads the flags, applies each experiment's defaults to those not given, and checks them.
func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	raw := c.define(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := c.modes(set, raw); err != nil {
		return nil, err
	}
	if err := c.cluster(set, raw); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return nil, err
	}
	c.Root = root
	return c, nil
}

// define defines the flags on fs, into c and the rawFlags it returns.
func (c *config) define(fs *flag.FlagSet) (raw rawFlags) {
	fs.IntVar(&c.Services, "services", 5000, "services in the synthetic cluster")
	raw.sizes = fs.String("sizes", "", `service counts, below -services, at which both plugins' memory is also measured while the cluster is created (default: 10%, 20%, 40%, 70% of -services; "none": only the full size)`)
	fs.Float64Var(&c.Headless, "headless", 0.2, "share of the services that are headless (0..1)")
	fs.IntVar(&c.Endpoints, "endpoints", 10, "ready endpoints per service (one EndpointSlice each)")
	fs.IntVar(&c.Namespaces, "namespaces", 20, "namespaces the services are spread over")
	fs.StringVar(&c.preset, "preset", "", `"large": 20000 services with 10 endpoints each (explicit flags still win)`)
	fs.IntVar(&c.rounds, "rounds", 5, "dnsperf rounds; each round runs every server once, in rotating order")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of one dnsperf run")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unrecorded dnsperf run per server before the rounds (0: none)")
	fs.IntVar(&c.Clients, "c", 4, "dnsperf -c: clients (sockets)")
	fs.IntVar(&c.Outstanding, "q", 100, "dnsperf -q: queries outstanding at once")
	fs.IntVar(&c.queries, "queries", 0, "lines in the dnsperf query file (0: max(100000, 20 per service))")
	fs.IntVar(&c.sample, "sample", 2000, "names of the query file checked for equal answers before the load")
	fs.IntVar(&c.propagation, "propagation", 50, "services created and deleted one at a time to time propagation")
	fs.IntVar(&c.startTrials, "start-trials", 5, "start-up measurements per plugin (the last process stays for the load)")
	fs.IntVar(&c.Workers, "workers", 8, "concurrent API clients creating the cluster")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the query file and the correctness sample")
	fs.StringVar(&c.mix, "mix", "service", `the query file's kinds: "service" (services and endpoints asked in full) or "cluster" (as pods ask through the search path: mostly misses, PTR and pod names too; both plugins with pods insecure)`)
	fs.StringVar(&c.Root, "root", "..", "the kubetree repository (bin/coredns, bin/etcd, ..., hack/cluster.sh)")
	fs.StringVar(&c.Out, "out", "RESULTS.md", `where to write the results (markdown); "" for stdout only`)
	fs.DurationVar(&c.timeout, "timeout", 60*time.Minute, "give up (and clean up) after this long")
	fs.BoolVar(&c.Keep, "keep", false, "keep the temporary directory (control plane state, Corefiles, logs)")
	raw.pods = fs.String("pods", "", `the pod dimension instead: pod counts to measure at, e.g. "10000,100000" (writes -out, default PODS.md)`)
	fs.IntVar(&c.podChurn, "pod-churn", 10000, "with -pods: pod status changes (new addresses) to time")
	fs.IntVar(&c.sliceChurn, "slice-updates", 5000, "EndpointSlice updates (one endpoint moved, stamped with its trigger time) to time CPU per update and the DNS programming latency of both plugins (0: skip)")
	fs.BoolVar(&c.relist, "relist", false, `a full relist instead: peak RSS through start-up and through a restart of the API server, beside kubernetes (writes -out, default RELIST.md)`)
	fs.BoolVar(&c.modelHeap, "model-heap", true, "also measure the model's heap at 100k services and 1M endpoints (BenchmarkScale), beside the figure before external names, zonal and multicluster")
	fs.StringVar(&c.memoryLimit, "memory-limit", "", `with -relist: run kubetree in a memory cgroup with this limit, as deploy/'s container (e.g. 170Mi; needs root), and report the kernel's counts`)
	fs.BoolVar(&c.audit, "audit", false, `what kubetree's audit costs the API server instead: bytes sent and CPU per audit, beside the in-tree plugin's watch traffic (writes -out, default AUDIT.md)`)
	fs.StringVar(&c.auditBefore, "audit-before", "", "with -audit: a CoreDNS binary with an earlier kubetree, whose audit is measured beside bin/coredns's")
	fs.IntVar(&c.Audits, "audits", 10, "with -audit: audits measured per server (and passes of each kind of direct list)")
	fs.DurationVar(&c.Interval, "audit-interval", 20*time.Second, "with -audit: the servers' audit_interval")
	fs.DurationVar(&c.auditIdle, "audit-idle", time.Minute, "with -audit: how long the in-tree plugin's traffic and the API server's idle CPU are measured")
	fs.BoolVar(&c.ControllerSlices, "controller-slices", false, "EndpointSlices as the EndpointSlice controller writes them (serving and terminating conditions, node, zone, pod reference, owner, trigger time); default with -audit")
	fs.IntVar(&c.fleet, "fleet", 0, `a relist storm instead: this many replicas of each plugin against one API server, which is restarted (writes -out, default FLEET.md)`)
	raw.plugins = fs.String("fleet-plugins", "kubetree,kubernetes", "with -fleet: the plugins whose storms are measured, in order")
	fs.IntVar(&c.churn, "churn", 300, "with -fleet: EndpointSlice updates a second throughout")
	fs.DurationVar(&c.fleetSteady, "fleet-steady", 30*time.Second, "with -fleet: how long the replicas run under the churn before the restart")
	fs.DurationVar(&c.fleetAfter, "fleet-after", 10*time.Second, "with -fleet: how long the storm goes on after every replica answers the change made after the restart")
	fs.StringVar(&c.fleetLimitInTree, "fleet-limit-in-tree", "2560Mi", "with -fleet: the memory cgroup limit of each in-tree replica")
	raw.memGuard = fs.String("mem-guard", "18Gi", "with -fleet: stop when the machine's memory in use (MemTotal - MemAvailable) passes this")
	fs.IntVar(&c.cpuHogs, "cpu-hogs", 0, "with -relist: this many busy loops run beside the servers throughout (CPU contention, as a busy neighbour's)")
	fs.BoolVar(&c.steady, "steady", false, `what a replica costs the API server under steady EndpointSlice churn instead: the in-tree plugin, kubetree and -steady-kubetree one at a time, and no server, in rounds; then kubetree's audit (writes -out, default STEADY.md)`)
	fs.IntVar(&c.steadyRate, "steady-rate", 10, "with -steady: EndpointSlice updates a second throughout")
	fs.DurationVar(&c.steadyWindow, "steady-window", 3*time.Minute, "with -steady: how long each server (and no server) is measured per round")
	fs.DurationVar(&c.steadySettle, "steady-settle", 15*time.Second, "with -steady: from a server's first right answer to its window")
	fs.IntVar(&c.steadyRounds, "steady-rounds", 3, "with -steady: rounds; each measures every server and no server once")
	fs.IntVar(&c.steadyReplicas, "steady-replicas", 1, "with -steady: replicas of each server that watch at once in its window (figures are per replica): more of them lift a replica's cost above the API server's own variation")
	fs.IntVar(&c.watchCost, "watch-cost", 0, "what one plain EndpointSlice watch costs the API server per event instead: this many watches of the bench's own, then none, in rounds under -steady-rate's churn (-steady-window, -steady-rounds, -steady-settle; writes -out, default WATCHCOST.md)")
	raw.steadyKubetree = fs.String("steady-kubetree", "", "with -steady: further kubetree builds measured beside bin/coredns's, name=path,...")
	fs.StringVar(&c.goMemLimit, "gomemlimit", "", `GOMEMLIMIT for the servers, e.g. 150MiB (deploy/'s Deployment)`)
	fs.BoolVar(&c.profile, "profile", false, "a CPU profile of each server during its first load round, and during the pod changes (-pods) or the EndpointSlice updates (needs curl)")
	fs.StringVar(&c.profileDir, "profile-dir", os.TempDir(), "where -profile writes the profiles")
	return raw
}

// modes applies each experiment's defaults to the flags not given (set has those given), and
// checks its flags.
func (c *config) modes(set map[string]bool, raw rawFlags) error {
	if c.relist && !set["out"] {
		c.Out = "RELIST.md"
	}
	if c.audit && !set["out"] {
		c.Out = "AUDIT.md"
	}
	if c.audit && !set["controller-slices"] {
		c.ControllerSlices = true
	}
	if c.steady {
		if err := c.steadyDefaults(set, *raw.steadyKubetree); err != nil {
			return err
		}
	}
	if c.watchCost > 0 {
		if err := c.watchCostDefaults(set); err != nil {
			return err
		}
	}
	if c.fleet > 0 {
		if err := c.fleetDefaults(set, *raw.plugins, *raw.memGuard); err != nil {
			return err
		}
	}
	if c.Audits < 1 || c.Interval < 10*time.Second || c.auditIdle < 10*time.Second {
		return errors.New("-audits must be at least 1, -audit-interval (kubetree's shortest) and -audit-idle at least 10s")
	}
	if *raw.pods != "" {
		for _, f := range strings.Split(*raw.pods, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || (len(c.pods) > 0 && n <= c.pods[len(c.pods)-1]) {
				return fmt.Errorf("-pods: growing pod counts such as 10000,100000, got %q", *raw.pods)
			}
			c.pods = append(c.pods, n)
		}
		if !set["out"] {
			c.Out = "PODS.md"
		}
	}
	return nil
}

// steadyDefaults are -steady's.
func (c *config) steadyDefaults(set map[string]bool, kubetree string) error {
	if !set["out"] {
		c.Out = "STEADY.md"
	}
	if !set["controller-slices"] {
		c.ControllerSlices = true
	}
	if !set["audits"] {
		c.Audits = 6
	}
	var err error
	if c.steadyKubetree, err = steady.ParseKubetree(kubetree); err != nil {
		return err
	}
	if c.steadyRate < 1 || c.steadyRounds < 1 || c.steadyReplicas < 1 || c.steadyWindow < 10*time.Second {
		return errors.New("-steady-rate, -steady-rounds and -steady-replicas must be at least 1, -steady-window at least 10s")
	}
	if !c.ControllerSlices {
		return errors.New("-steady: the churn writes EndpointSlices as the controller does; -controller-slices=false is not supported")
	}
	return nil
}

// watchCostDefaults are -watch-cost's.
func (c *config) watchCostDefaults(set map[string]bool) error {
	if !set["out"] {
		c.Out = "WATCHCOST.md"
	}
	if !set["audits"] {
		c.Audits = 6
	}
	if !set["controller-slices"] {
		c.ControllerSlices = true
	}
	if c.steadyRate < 1 || c.steadyRounds < 1 || c.steadyWindow < 10*time.Second || !c.ControllerSlices {
		return errors.New("-watch-cost: -steady-rate and -steady-rounds at least 1, -steady-window at least 10s, EndpointSlices as the controller writes them")
	}
	return nil
}

// fleetDefaults are -fleet's.
func (c *config) fleetDefaults(set map[string]bool, plugins, memGuard string) error {
	if !set["out"] {
		c.Out = "FLEET.md"
	}
	if !set["controller-slices"] {
		c.ControllerSlices = true
	}
	if !set["memory-limit"] {
		c.memoryLimit = "170Mi"
	}
	if !set["gomemlimit"] {
		c.goMemLimit = "150MiB"
	}
	c.fleetPlugins = strings.Split(plugins, ",")
	for _, p := range c.fleetPlugins {
		if p != "kubernetes" && p != "kubetree" {
			return fmt.Errorf("-fleet-plugins: kubernetes and kubetree, got %q", plugins)
		}
	}
	g, err := resource.ParseQuantity(memGuard)
	if err != nil {
		return fmt.Errorf("-mem-guard: %w", err)
	}
	c.memGuard = float64(g.Value())
	return nil
}

// cluster applies -preset and the defaults that depend on the cluster's size, and checks them.
func (c *config) cluster(set map[string]bool, raw rawFlags) error {
	switch c.preset {
	case "":
	case "large":
		if !set["services"] {
			c.Services = 20000
		}
		if !set["endpoints"] {
			c.Endpoints = 10
		}
	default:
		return fmt.Errorf("unknown -preset %q (known: large)", c.preset)
	}
	if set["sizes"] {
		var err error
		if c.sizes, err = sidebyside.ParseSizes(*raw.sizes, c.Services); err != nil {
			return err
		}
	} else {
		c.sizes = sidebyside.DefaultSizes(c.Services)
	}
	if c.queries == 0 {
		c.queries = max(100000, 20*c.Services)
	}
	switch {
	case c.Services < 1 || c.Namespaces < 1 || c.Endpoints < 1:
		return errors.New("-services, -namespaces and -endpoints must be at least 1")
	case c.Headless < 0 || c.Headless > 1:
		return errors.New("-headless must be within 0..1")
	case c.Endpoints > 1000:
		return errors.New("-endpoints: at most 1000 (one EndpointSlice per service)")
	case c.Services > 60000:
		return errors.New("-services: at most 60000 (the service CIDR is a /16)")
	case c.rounds < 1 || c.duration < time.Second || c.startTrials < 1 || c.Workers < 1:
		return errors.New("-rounds, -start-trials and -workers must be at least 1, -duration at least 1s")
	case c.Clients < 1 || c.Outstanding < 1:
		return errors.New("-c and -q must be at least 1")
	}
	return nil
}
