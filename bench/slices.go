package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
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
	cpu     map[string]float64 // CPU seconds for the n updates, idle taken off
	idle    map[string]float64 // CPU seconds a second with nothing happening
	latency map[string]buckets // programming latency observed during the updates
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

// movedIP is endpoint n's address after its pod moved: 10.192.0.0/10, clear of podIP's first 4M.
func movedIP(n int) string { return podIP(n + 1<<22) }

// sliceUpdates moves one endpoint of n services' EndpointSlices (service i%len, endpoint i/len),
// with workers clients at once, then one more change that both servers are waited for.
func sliceUpdates(ctx context.Context, cp *controlPlane, cl *cluster, servers map[string]*server, n, workers int, profile bool, pprofs map[string]string, profileDir string) (*sliceResult, error) {
	plugins := []string{"kubernetes", "kubetree"}
	res := &sliceResult{n: n, cpu: map[string]float64{}, idle: map[string]float64{}, latency: map[string]buckets{}, switches: map[string]float64{},
		bytes: map[string]float64{}, bytesIdle: map[string]float64{}}
	const idle = 10 * time.Second
	before, received := map[string]float64{}, map[string]float64{}
	for _, p := range plugins {
		c, err := servers[p].cpu()
		if err != nil {
			return nil, err
		}
		before[p], received[p] = c, servers[p].received()
	}
	if err := sleep(ctx, idle); err != nil {
		return nil, err
	}
	hist := map[string]buckets{}
	switches := map[string]float64{}
	for _, p := range plugins {
		switches[p] = contextSwitches(servers[p].cmd.Process.Pid)
		now, err := servers[p].cpu()
		if err != nil {
			return nil, err
		}
		res.idle[p] = (now - before[p]) / idle.Seconds()
		before[p] = now
		r := servers[p].received()
		res.bytesIdle[p] = (r - received[p]) / idle.Seconds()
		received[p] = r
		if hist[p], err = servers[p].histogram(programmingMetric[p]); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex // the services' addresses, as the updates leave them
	move := func(i int) (*svc, int, error) {
		s := cl.services[i%len(cl.services)]
		j := (i / len(cl.services)) % cl.endpoints
		n := (i%len(cl.services))*cl.endpoints + j
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c := cp.client.DiscoveryV1().EndpointSlices(s.ns)
			slice, err := c.Get(ctx, s.name+"-bench", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ip := movedIP(n)
			if slice.Endpoints[j].Addresses[0] == ip {
				ip = podIP(n)
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
			s.ips[j] = ip
			mu.Unlock()
			return nil
		})
		return s, j, err
	}
	var profiles sync.WaitGroup
	if profile {
		for _, p := range plugins {
			profiles.Go(func() { profileCPU(ctx, p+"-slices", pprofs[p], profileDir, sliceProfile) })
		}
	}
	start := time.Now()
	if err := parallel(ctx, workers, 0, n, "updated EndpointSlices", func(i int) error { _, _, err := move(i); return err }); err != nil {
		return nil, err
	}
	s, j, err := move(n)
	if err != nil {
		return nil, err
	}
	name := s.endpointName(j) + "." + s.fqdn()
	for _, p := range plugins {
		if err := waitA(ctx, servers[p].addr, name, s.ips[j]); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	res.took = time.Since(start)
	profiles.Wait()
	for _, p := range plugins {
		after, err := servers[p].cpu()
		if err != nil {
			return nil, err
		}
		res.cpu[p] = after - before[p] - res.idle[p]*time.Since(start).Seconds()
		res.bytes[p] = servers[p].received() - received[p] - res.bytesIdle[p]*time.Since(start).Seconds()
		h, err := servers[p].histogram(programmingMetric[p])
		if err != nil {
			return nil, err
		}
		res.latency[p] = h.minus(hist[p])
		res.switches[p] = contextSwitches(servers[p].cmd.Process.Pid) - switches[p]
		logf("%s: %.2f s CPU for %d slice updates, idle taken off (%.0f µs each, %.1f context switches, %.0f B from the API server, %.0f B/s idle); programming latency p50 %s, p99 %s (%d observed)", p,
			res.cpu[p], n+1, res.cpu[p]/float64(n+1)*1e6, res.switches[p]/float64(n+1), res.bytes[p]/float64(n+1), res.bytesIdle[p], ms(res.latency[p].quantile(0.5)), ms(res.latency[p].quantile(0.99)), res.latency[p].count())
	}
	return res, nil
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

// buckets is a Prometheus histogram, every series of it summed: observations at most le, by le.
type buckets map[float64]float64

// histogram reads a histogram from the prometheus plugin, its series summed.
func (s *server) histogram(name string) (buckets, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b := buckets{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), name+"_bucket{")
		if !ok {
			continue
		}
		_, rest, ok := strings.Cut(line, `le="`)
		if !ok {
			continue
		}
		le, value, ok := strings.Cut(rest, `"}`)
		if !ok {
			continue
		}
		bound, err1 := strconv.ParseFloat(le, 64)
		v, err2 := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad bucket %q", name, sc.Text())
		}
		b[bound] += v
	}
	return b, sc.Err()
}

// minus is what was observed since before.
func (b buckets) minus(before buckets) buckets {
	out := buckets{}
	for le, v := range b {
		out[le] = v - before[le]
	}
	return out
}

func (b buckets) count() int { return int(b[math.Inf(1)]) }

// quantile is the q-quantile as Prometheus's histogram_quantile estimates it: linear within the
// bucket it falls in; -1 when nothing was observed.
func (b buckets) quantile(q float64) time.Duration {
	bounds := make([]float64, 0, len(b))
	for le := range b {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	total := b[math.Inf(1)]
	if total == 0 || len(bounds) < 2 {
		return -1
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		if b[le] >= rank {
			if math.IsInf(le, 1) {
				return time.Duration(lower * float64(time.Second))
			}
			in := b[le] - below
			at := lower + (le-lower)*(rank-below)/in
			return time.Duration(at * float64(time.Second))
		}
		lower, below = le, b[le]
	}
	return -1
}
