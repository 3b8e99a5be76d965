package apicost

import (
	"context"
	"slices"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// Window is what one window moved.
type Window struct {
	Round              int
	Secs               float64
	Down, up           float64 // bytes from / to the API server, through the proxy
	APICPU             float64 // kube-apiserver's utime+stime
	SteadyCPU          float64 // the same outside its busiest seconds (trimmedCPU)
	GCCPU              float64 // of which its collector's (go_cpu_classes_gc_total_cpu_seconds_total)
	Alloc              float64 // its heap allocations (go_gc_heap_allocs_bytes_total), one scrape's included
	EtcdCPU, ServerCPU float64
	Updates, failed    int64   // the churn's
	Answer             float64 // seconds from exec to the first right answer, the last replica's (no server: 0)
	Initial            float64 // bytes the API server sent before the window (the initial lists)
	Replicas           int     // of the server, watching at once (no server: 0)
}

// PerReplica is v, a figure of the window's replicas together, for one of them.
func (w Window) PerReplica(v float64) float64 { return v / float64(max(w.Replicas, 1)) }

// Charged is the API server's CPU in w outside its busiest seconds (where its collections fall),
// with the collector charged back by w's allocations at gcPerByte.
func (w Window) Charged(gcPerByte float64) float64 {
	return w.SteadyCPU + w.Alloc*gcPerByte
}

// Trim is the share of a window's seconds, the busiest, that trimmedCPU leaves out.
const Trim = 0.05

// trimmedCPU is the CPU of a window whose every second used perSecond, had its busiest seconds
// (Trim of them) used the mean of the others: a collection of the API server's heap lasts a
// second or more and comes once or twice a window, or not at all, and it is charged by allocation
// instead.
func trimmedCPU(perSecond []float64) float64 {
	if len(perSecond) == 0 {
		return 0
	}
	s := slices.Clone(perSecond)
	slices.Sort(s)
	keep := s[:len(s)-int(float64(len(s))*Trim)]
	var sum float64
	for _, v := range keep {
		sum += v
	}
	return sum / float64(len(keep)) * float64(len(s))
}

// MeasureWindow measures one window of d into w: the API server's and etcd's CPU, its collector
// and allocations, the churn's updates, and what watchers reports (their CPU and the bytes their
// proxies carried, so far).
func MeasureWindow(ctx context.Context, d time.Duration, cp *measure.ControlPlane, pids map[string]int, ch *Churn, w *Window,
	watchers func() (cpu, down, up float64, err error), label string) error {
	type reading struct {
		at                time.Time
		api, etcd, server float64
		metrics           measure.APICounters
		down, up          float64
		updates, failed   int64
	}
	read := func() (reading, error) {
		var r reading
		var err error
		r.at = time.Now()
		if r.api, err = measure.ProcCPU(pids["kube-apiserver"]); err != nil {
			return r, err
		}
		if r.etcd, err = measure.ProcCPU(pids["etcd"]); err != nil {
			return r, err
		}
		if r.server, r.down, r.up, err = watchers(); err != nil {
			return r, err
		}
		r.updates, r.failed = ch.Done.Load(), ch.Failed.Load()
		r.metrics, err = cp.APIMetrics(ctx)
		return r, err
	}
	r0, err := read()
	if err != nil {
		return err
	}
	w.Initial = r0.down
	var perSecond []float64
	tick := time.NewTicker(time.Second)
	prev := r0.api
	for end := r0.at.Add(d); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			tick.Stop()
			return context.Cause(ctx)
		case <-tick.C:
		}
		c, err := measure.ProcCPU(pids["kube-apiserver"])
		if err != nil {
			tick.Stop()
			return err
		}
		perSecond, prev = append(perSecond, c-prev), c
	}
	tick.Stop()
	r1, err := read()
	if err != nil {
		return err
	}
	w.Secs = r1.at.Sub(r0.at).Seconds()
	w.Down, w.up = r1.down-r0.down, r1.up-r0.up
	w.APICPU, w.EtcdCPU, w.ServerCPU = r1.api-r0.api, r1.etcd-r0.etcd, r1.server-r0.server
	// The seconds sampled, and what the window's end added after the last of them.
	w.SteadyCPU = trimmedCPU(perSecond) + (r1.api - prev)
	w.GCCPU, w.Alloc = r1.metrics.GCCPU-r0.metrics.GCCPU, r1.metrics.Alloc-r0.metrics.Alloc
	w.Updates, w.failed = r1.updates-r0.updates, r1.failed-r0.failed
	measure.Logf("%s: %.2f updates/s; the API server sent %s/s, used %.3f CPU s/s (%.3f outside its busiest seconds; its collector %.3f by its own count), allocated %s/s",
		label, float64(w.Updates)/w.Secs, measure.Human(w.Down/w.Secs), w.APICPU/w.Secs, w.SteadyCPU/w.Secs, w.GCCPU/w.Secs, measure.Human(w.Alloc/w.Secs))
	return nil
}
