package steady

import (
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// steadyFigures are one server's medians, per second.
type steadyFigures struct {
	down      float64 // bytes the API server sent
	cpu       float64 // API server CPU attributable to the replica (less the no-server window's), collector charged by allocation
	rawCPU    float64 // the same from the windows' CPU as measured, collector included as it fell
	perRound  []float64
	serverCPU float64
	// cpuPerUpdate is the API server CPU per EndpointSlice update attributable to the replica: the
	// window's CPU per update less the no-server window's, per replica. Where the churn's rate
	// differs between windows (the machine behind), it holds where the per-second figure does not.
	cpuPerUpdate float64
}

// figures are sv's medians over the rounds; the CPU is each round's less that round's no-server
// window's.
func (res *steadyResult) figures(name string) steadyFigures {
	gcb := res.gc.PerByte()
	none := res.windows[""]
	var f steadyFigures
	var down, cpu, raw, own, perUpdate []float64
	for i, w := range res.windows[name] {
		down = append(down, w.PerReplica(w.Down/w.Secs))
		own = append(own, w.PerReplica(w.ServerCPU/w.Secs))
		if i < len(none) {
			n := none[i]
			cpu = append(cpu, w.PerReplica(w.Charged(gcb)/w.Secs-n.Charged(gcb)/n.Secs))
			raw = append(raw, w.PerReplica(w.APICPU/w.Secs-n.APICPU/n.Secs))
			if w.Updates > 0 && n.Updates > 0 {
				perUpdate = append(perUpdate, w.PerReplica(w.Charged(gcb)/float64(w.Updates)-n.Charged(gcb)/float64(n.Updates)))
			}
		}
	}
	f.down, f.cpu, f.rawCPU, f.serverCPU, f.perRound = measure.Median(down), measure.Median(cpu), measure.Median(raw), measure.Median(own), cpu
	f.cpuPerUpdate = measure.Median(perUpdate)
	return f
}

// auditCost is one audit's bytes and API server CPU (its window's and the collector's share).
func (res *steadyResult) auditCost(name string) (bytes, cpu float64, ok bool) {
	r := res.audits[name]
	if r == nil {
		return 0, 0, false
	}
	return r.Median(func(a apicost.AuditWindow) float64 { return a.Down }), r.APICPU(res.gc.PerByte()), true
}

// hourly is a kubetree build's bytes and CPU per replica-hour with an audit every iv (0: none).
func (res *steadyResult) hourly(name string, iv time.Duration) (bytes, cpu float64) {
	f := res.figures(name)
	bytes, cpu = f.down*3600, f.cpu*3600
	if ab, ac, ok := res.auditCost(name); ok && iv > 0 {
		k := 3600 / iv.Seconds()
		bytes, cpu = bytes+ab*k, cpu+ac*k
	}
	return bytes, cpu
}

// meets is the shortest interval of apicost.Intervals at which name costs at most apicost.Goal times
// the in-tree replica in bytes, and in CPU too unless bytesOnly; 0 and false if none.
func (res *steadyResult) meets(name string, bytesOnly bool) (time.Duration, bool) {
	base := res.figures("kubernetes")
	for _, iv := range apicost.Intervals {
		b, c := res.hourly(name, iv)
		if b <= apicost.Goal*base.down*3600 && (bytesOnly || c <= apicost.Goal*base.cpu*3600) {
			return iv, true
		}
	}
	return 0, false
}

// cpuResolved says whether the in-tree replica's CPU came out above the API server's own variation
// (positive): below it, no ratio to it means anything, and the CPU half of the goal is not judged.
func (res *steadyResult) cpuResolved() bool { return res.figures("kubernetes").cpu > 0 }

// rate is the churn achieved over name's windows, updates a second.
func (res *steadyResult) rate(name string) float64 {
	var v []float64
	for _, w := range res.windows[name] {
		v = append(v, float64(w.Updates)/w.Secs)
	}
	return measure.Median(v)
}
