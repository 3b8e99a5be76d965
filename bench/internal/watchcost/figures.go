package watchcost

import (
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// churnAlloc is what the API server allocates a second under the churn alone: the lowest rate of
// the windows without watches.
func (res *watchCostResult) churnAlloc() float64 {
	low := 0.0
	for i, w := range res.windows[""] {
		if r := (w.Alloc - res.scrapeAlloc) / w.Secs; i == 0 || r < low {
			low = r
		}
	}
	return low
}

// perEvent is the API server's CPU per event and watch of variant in each round: the window's
// CPU per update less the no-watcher window's, over the watches; charged says with the collector
// charged by allocation (and the busiest seconds out), else as measured.
func (res *watchCostResult) perEvent(variant string, charged bool) []float64 {
	gcb := res.gc.PerByte()
	none := res.windows[""]
	var out []float64
	for i, w := range res.windows[variant] {
		if i >= len(none) || w.Updates == 0 || none[i].Updates == 0 {
			continue
		}
		n := none[i]
		a, b := w.APICPU, n.APICPU
		if charged {
			a, b = w.Charged(gcb), n.Charged(gcb)
		}
		out = append(out, (a/float64(w.Updates)-b/float64(n.Updates))/float64(w.Replicas))
	}
	return out
}

// bytesPerEvent is what the API server sent per event and watch of variant (the median of rounds).
func (res *watchCostResult) bytesPerEvent(variant string) float64 {
	var v []float64
	for _, w := range res.windows[variant] {
		if w.Updates > 0 {
			v = append(v, w.Down/float64(w.Updates)/float64(w.Replicas))
		}
	}
	return measure.Median(v)
}

// hourly is a replica's API server bytes and CPU (charged) an hour at rate updates a second: the
// in-tree plugin's EndpointSlice watch over HTTP/2, or kubetree's (the dearer of its two
// protocols) with an audit every iv (0: none).
func (res *watchCostResult) hourly(kubetree bool, rate float64, iv time.Duration) (bytes, cpu float64) {
	events := rate * 3600
	bytes, cpu = res.bytesPerEvent("HTTP/2")*events, measure.Median(res.perEvent("HTTP/2", true))*events
	if !kubetree {
		return bytes, cpu
	}
	for _, v := range watchVariants {
		bytes = max(bytes, res.bytesPerEvent(v.name)*events)
		cpu = max(cpu, measure.Median(res.perEvent(v.name, true))*events)
	}
	if a := res.audit; a != nil && iv > 0 {
		k := 3600 / iv.Seconds()
		bytes += a.Median(func(w apicost.AuditWindow) float64 { return w.Down }) * k
		cpu += a.APICPU(res.gc.PerByte()) * k
	}
	return bytes, cpu
}
