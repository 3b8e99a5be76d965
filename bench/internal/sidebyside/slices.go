package sidebyside

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// The write path (-slice-updates): EndpointSlice updates as the EndpointSlice controller makes them
// when a pod moves (one endpoint's address changes, the slice stamped with its trigger time),
// streamed at the API server while kubernetes and kubetree watch it side by side: the CPU each
// server spends per update, its idle CPU taken off, and the DNS programming latency each reports
// (its dns_programming_duration_seconds histogram, from the trigger time to the change served).

// sliceResult is what the updates cost each plugin.
type sliceResult struct {
	n       int
	took    time.Duration
	cpu     map[string]float64         // CPU seconds for the n updates, idle taken off
	idle    map[string]float64         // CPU seconds a second with nothing happening
	latency map[string]measure.Buckets // programming latency observed during the updates
	// bytes is what the API server sent each server for the n updates (through its counting proxy,
	// TLS records included), less what it sends with nothing happening (bytesIdle a second).
	bytes, bytesIdle map[string]float64
	// switches are the context switches of every thread of each server during the updates: how
	// often a thread went to sleep or was woken, per update the wake-ups an event costs.
	switches map[string]float64
}

// programmingMetric is each plugin's DNS programming latency histogram.
var programmingMetric = map[string]string{
	"kubernetes": "coredns_kubernetes_dns_programming_duration_seconds",
	"kubetree":   "coredns_kubetree_dns_programming_duration_seconds",
}

// sliceProfile is how long -profile profiles each server during the updates.
var sliceProfile = 40 * time.Second

// movedIP is endpoint n's address after its pod moved: 10.192.0.0/10, clear of measure.PodIP's first 4M.
func movedIP(n int) string { return measure.PodIP(n + 1<<22) }

// sliceUpdates moves one endpoint of n services' EndpointSlices (service i%len, endpoint i/len),
// with workers clients at once, then one more change that both servers are waited for.
func sliceUpdates(ctx context.Context, cp *measure.ControlPlane, cl *measure.Cluster, servers map[string]*measure.Server, n, workers int, profile bool, pprofs map[string]string, profileDir string) (*sliceResult, error) {
	res := &sliceResult{n: n, cpu: map[string]float64{}, idle: map[string]float64{}, latency: map[string]measure.Buckets{}, switches: map[string]float64{},
		bytes: map[string]float64{}, bytesIdle: map[string]float64{}}
	from, err := res.measureIdle(ctx, servers)
	if err != nil {
		return nil, err
	}
	move := mover(ctx, cp, cl)
	var profiles sync.WaitGroup
	if profile {
		for _, p := range slicePlugins {
			profiles.Go(func() { measure.ProfileCPU(ctx, p+"-slices", pprofs[p], profileDir, sliceProfile) })
		}
	}
	start := time.Now()
	if err := measure.Parallel(ctx, workers, 0, n, "updated EndpointSlices", func(i int) error { _, _, err := move(i); return err }); err != nil {
		return nil, err
	}
	s, j, err := move(n)
	if err != nil {
		return nil, err
	}
	name := s.EndpointName(j) + "." + s.FQDN()
	for _, p := range slicePlugins {
		if err := measure.WaitA(ctx, servers[p].Addr, name, s.IPs[j]); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	res.took = time.Since(start)
	profiles.Wait()
	if err := res.account(servers, from, start); err != nil {
		return nil, err
	}
	return res, nil
}

// slicePlugins are the servers the updates are measured on.
var slicePlugins = []string{"kubernetes", "kubetree"}

// sliceCounters are each server's counters when the updates start: its CPU seconds, the bytes the
// API server sent it, its threads' context switches, and its programming latency histogram.
type sliceCounters struct {
	cpu, received, switches map[string]float64
	hist                    map[string]measure.Buckets
}

// measureIdle measures what each server spends with nothing happening, for 10 s, and returns its
// counters at the end.
func (res *sliceResult) measureIdle(ctx context.Context, servers map[string]*measure.Server) (sliceCounters, error) {
	const idle = 10 * time.Second
	before, received := map[string]float64{}, map[string]float64{}
	from := sliceCounters{cpu: before, received: received, switches: map[string]float64{}, hist: map[string]measure.Buckets{}}
	for _, p := range slicePlugins {
		c, err := servers[p].CPU()
		if err != nil {
			return from, err
		}
		before[p], received[p] = c, servers[p].Received()
	}
	if err := measure.Sleep(ctx, idle); err != nil {
		return from, err
	}
	for _, p := range slicePlugins {
		from.switches[p] = contextSwitches(servers[p].PID())
		now, err := servers[p].CPU()
		if err != nil {
			return from, err
		}
		res.idle[p] = (now - before[p]) / idle.Seconds()
		before[p] = now
		r := servers[p].Received()
		res.bytesIdle[p] = (r - received[p]) / idle.Seconds()
		received[p] = r
		if from.hist[p], err = servers[p].Histogram(programmingMetric[p]); err != nil {
			return from, err
		}
	}
	return from, nil
}

// mover is the updates: move(i) moves one endpoint of one service's slice (service i%len,
// endpoint i/len) to another address, and back the next time.
func mover(ctx context.Context, cp *measure.ControlPlane, cl *measure.Cluster) (move func(i int) (*measure.Service, int, error)) {
	var mu sync.Mutex // the services' addresses, as the updates leave them
	return func(i int) (*measure.Service, int, error) {
		s := cl.Services[i%len(cl.Services)]
		j := (i / len(cl.Services)) % cl.Endpoints
		n := (i%len(cl.Services))*cl.Endpoints + j
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c := cp.Client.DiscoveryV1().EndpointSlices(s.NS)
			slice, err := c.Get(ctx, s.Name+"-bench", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ip := movedIP(n)
			if slice.Endpoints[j].Addresses[0] == ip {
				ip = measure.PodIP(n)
			}
			slice.Endpoints[j].Addresses = []string{ip}
			if slice.Annotations == nil {
				slice.Annotations = map[string]string{}
			}
			slice.Annotations[corev1.EndpointsLastChangeTriggerTime] = time.Now().UTC().Format(time.RFC3339Nano)
			if _, err := c.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
				return err
			}
			mu.Lock()
			s.IPs[j] = ip
			mu.Unlock()
			return nil
		})
		return s, j, err
	}
}

// account takes what each server spent on the updates since start, from its counters then, its
// idle CPU and bytes taken off.
func (res *sliceResult) account(servers map[string]*measure.Server, from sliceCounters, start time.Time) error {
	n := res.n
	for _, p := range slicePlugins {
		after, err := servers[p].CPU()
		if err != nil {
			return err
		}
		res.cpu[p] = after - from.cpu[p] - res.idle[p]*time.Since(start).Seconds()
		res.bytes[p] = servers[p].Received() - from.received[p] - res.bytesIdle[p]*time.Since(start).Seconds()
		h, err := servers[p].Histogram(programmingMetric[p])
		if err != nil {
			return err
		}
		res.latency[p] = h.Minus(from.hist[p])
		res.switches[p] = contextSwitches(servers[p].PID()) - from.switches[p]
		measure.Logf("%s: %.2f s CPU for %d slice updates, idle taken off (%.0f µs each, %.1f context switches, %.0f B from the API server, %.0f B/s idle); programming latency p50 %s, p99 %s (%d observed)", p,
			res.cpu[p], n+1, res.cpu[p]/float64(n+1)*1e6, res.switches[p]/float64(n+1), res.bytes[p]/float64(n+1), res.bytesIdle[p], measure.Millis(res.latency[p].Quantile(0.5)), measure.Millis(res.latency[p].Quantile(0.99)), res.latency[p].Count())
	}
	return nil
}

// rows are the results table's rows of the EndpointSlice updates.
func (sl *sliceResult) rows() []row {
	nan := math.NaN()
	fUs := func(v float64) string { return fmt.Sprintf("%.0f µs", v*1e6) }
	q := func(p string, q float64) float64 {
		if d := sl.latency[p].Quantile(q); d >= 0 {
			return d.Seconds()
		}
		return nan
	}
	return []row{
		{metric: fmt.Sprintf("CPU per EndpointSlice update, idle taken off (%d updates)", sl.n+1),
			v: [3]float64{sl.perUpdate("kubernetes"), sl.perUpdate("kubetree"), nan}, format: fUs},
		{metric: "bytes from the API server per EndpointSlice update (TLS records included), idle taken off",
			v: [3]float64{sl.bytes["kubernetes"] / float64(sl.n+1), sl.bytes["kubetree"] / float64(sl.n+1), nan}, format: func(v float64) string { return fmt.Sprintf("%.0f B", v) }},
		{metric: "context switches per EndpointSlice update (every thread)",
			v: [3]float64{sl.switches["kubernetes"] / float64(sl.n+1), sl.switches["kubetree"] / float64(sl.n+1), nan}, format: func(v float64) string { return fmt.Sprintf("%.1f", v) }},
		{metric: "DNS programming latency during the updates, p50", v: [3]float64{q("kubernetes", 0.5), q("kubetree", 0.5), nan}, format: fMsShort},
		{metric: "DNS programming latency during the updates, p99", v: [3]float64{q("kubernetes", 0.99), q("kubetree", 0.99), nan}, format: fMsShort},
	}
}

// contextSwitches sums the voluntary and involuntary context switches of every thread of pid
// (threads that ended are not counted: the Go runtime rarely ends one).
func contextSwitches(pid int) float64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n float64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				n += f
			} else if v, ok := strings.CutPrefix(l, "nonvoluntary_ctxt_switches:"); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				n += f
			}
		}
	}
	return n
}

// perUpdate is a plugin's CPU per update, in seconds.
func (r *sliceResult) perUpdate(p string) float64 { return r.cpu[p] / float64(r.n+1) }
