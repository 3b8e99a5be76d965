package apicost

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// AuditPlan is how kubetree's audit is measured: audits after the first (-audits), and the
// servers' audit_interval meanwhile (-audit-interval).
type AuditPlan struct {
	Audits   int
	Interval time.Duration
}

// Window margins around an audit, for the CPU its requests cost.
const (
	AuditLead = 500 * time.Millisecond
	AuditTail = 2 * time.Second
)

// Rest is what the API server allocates with nothing measured going on: what an audit's or a
// pass's allocations are taken off.
type Rest struct {
	APIAlloc float64 // kube-apiserver heap bytes allocated per second
	// What one scrape of the API server's /metrics makes it allocate: two readings of its
	// allocation counter always have one scrape's worth between them.
	ScrapeAlloc float64
}

// AuditRun is one kubetree's audits.
type AuditRun struct {
	Name     string // the server's
	binary   string
	Initial  float64 // bytes the API server sent from start until ready (the initial list)
	Audits   []AuditWindow
	Lists    map[string]float64 // LIST requests per audit, by resource (the API server's count)
	ListSize map[string]float64 // LIST response bytes per audit, by resource (the API server's count)
	Alloc    float64            // the API server's heap allocations per audit, less its rate at rest
	Idle     rates              // per second between audits
	Other    []string           // audit log lines other than "in step"
}

// AuditWindow is one audit: when it ended, how long it said it took, and what each counter moved
// in its window, less the idle rate.
type AuditWindow struct {
	end       time.Time
	Took      time.Duration
	Down, Up  float64 // bytes from / to the API server
	APICPU    float64 // seconds
	EtcdCPU   float64
	ServerCPU float64
}

// rates is what each counter moves per second.
type rates struct{ Down, up, APICPU, EtcdCPU, ServerCPU float64 }

// MeasureAudits runs one kubetree (binary) with the audit on, and measures plan.Audits audits after
// the first. rest has the API server's heap allocation at rest and per scrape of its metrics.
func MeasureAudits(ctx context.Context, plan AuditPlan, dir string, cp *measure.ControlPlane, target string, pids map[string]int,
	probe measure.Probe, name, binary string, rest Rest) (*AuditRun, error) {
	measure.Logf("== %s (%s): %d audits every %s", name, binary, plan.Audits, plan.Interval)
	run := &AuditRun{Name: name, binary: binary}
	proxy, kubeconfig, err := measure.Proxied(dir, name, cp.Kubeconfig, target)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	measure.ServerBinary[name] = binary
	s, err := measure.StartServerConf(ctx, dir, name, 0, func(addr, ready, metrics string) string {
		return fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    ready %s\n    kubetree cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig %s\n        audit_interval %s\n    }\n}\n",
			measure.Port(addr), metrics, ready, kubeconfig, plan.Interval)
	})
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	if _, err := s.WaitStartup(ctx, probe.Name, probe.IP); err != nil {
		return nil, err
	}
	run.Initial = float64(proxy.Down.Load())
	smp := startSampler(map[string]int{"kube-apiserver": pids["kube-apiserver"], "etcd": pids["etcd"], "server": s.PID()}, proxy)
	defer smp.stop()
	follow := newLogFollower(s.Log)

	// The first audit is not counted: it may overlap the end of start-up.
	if _, err := follow.next(ctx, s, 3*plan.Interval); err != nil {
		return nil, err
	}
	m0, err := cp.APIMetrics(ctx)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	for len(run.Audits) < plan.Audits {
		a, err := follow.next(ctx, s, 3*plan.Interval+time.Minute)
		if err != nil {
			return nil, err
		}
		if !a.inStep {
			run.Other = append(run.Other, a.line)
		}
		run.Audits = append(run.Audits, AuditWindow{end: a.end, Took: a.took})
		measure.Logf("%s: audit %d took %s", name, len(run.Audits), a.took)
	}
	if err := measure.Sleep(ctx, AuditTail+500*time.Millisecond); err != nil {
		return nil, err
	}
	m1, err := cp.APIMetrics(ctx)
	if err != nil {
		return nil, err
	}
	span := time.Since(t0)
	smp.stop()
	run.Lists, run.ListSize = map[string]float64{}, map[string]float64{}
	n := float64(len(run.Audits))
	for r, v := range m1.Lists {
		if d := v - m0.Lists[r]; d > 0 {
			run.Lists[r] = d / n
		}
	}
	for r, v := range m1.Sizes {
		if d := v - m0.Sizes[r]; d > 0 {
			run.ListSize[r] = d / n
		}
	}
	run.Alloc = (m1.Alloc - m0.Alloc - rest.ScrapeAlloc - rest.APIAlloc*span.Seconds()) / n
	run.windows(smp.samples())
	measure.Logf("%s: per audit %s sent by the API server, %.2f s of its CPU in the window (median), %s of its heap allocated", name,
		measure.Human(run.Median(func(a AuditWindow) float64 { return a.Down })), run.Median(func(a AuditWindow) float64 { return a.APICPU }), measure.Human(run.Alloc))
	return run, nil
}

// windows fills in each audit's counters from the samples: what moved in its window, less the
// rate between audits times the window's length.
func (r *AuditRun) windows(samples []sample) {
	type span struct{ from, to time.Time }
	var busy []span
	for _, a := range r.Audits {
		busy = append(busy, span{a.end.Add(-a.Took - AuditLead), a.end.Add(AuditTail)})
	}
	// Idle: from the end of each window to the start of the next.
	var idle sample
	var idleFor float64
	for i := 0; i+1 < len(busy); i++ {
		d := diff(at(samples, busy[i].to), at(samples, busy[i+1].from))
		idle = idle.plus(d)
		idleFor += busy[i+1].from.Sub(busy[i].to).Seconds()
	}
	if idleFor > 0 {
		r.Idle = rates{Down: idle.down / idleFor, up: idle.up / idleFor, APICPU: idle.cpu["kube-apiserver"] / idleFor,
			EtcdCPU: idle.cpu["etcd"] / idleFor, ServerCPU: idle.cpu["server"] / idleFor}
	}
	for i, b := range busy {
		d := diff(at(samples, b.from), at(samples, b.to))
		secs := b.to.Sub(b.from).Seconds()
		a := &r.Audits[i]
		a.Down = d.down - r.Idle.Down*secs
		a.Up = d.up - r.Idle.up*secs
		a.APICPU = d.cpu["kube-apiserver"] - r.Idle.APICPU*secs
		a.EtcdCPU = d.cpu["etcd"] - r.Idle.EtcdCPU*secs
		a.ServerCPU = d.cpu["server"] - r.Idle.ServerCPU*secs
	}
}

// Median is f's median over the audits.
func (r *AuditRun) Median(f func(AuditWindow) float64) float64 {
	var v []float64
	for _, a := range r.Audits {
		v = append(v, f(a))
	}
	return measure.Median(v)
}

// Spread is f's lowest and highest over the audits.
func (r *AuditRun) Spread(f func(AuditWindow) float64) (lo, hi float64) {
	var v []float64
	for _, a := range r.Audits {
		v = append(v, f(a))
	}
	return slices.Min(v), slices.Max(v)
}

// APICPU is the API server's CPU per audit: the median in the audits' windows, and the collector's
// share of what they allocated.
func (r *AuditRun) APICPU(gcPerByte float64) float64 {
	return r.Median(func(a AuditWindow) float64 { return a.APICPU }) + r.Alloc*gcPerByte
}
