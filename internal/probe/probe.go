// Package probe is the self-probe (the probe option), what kube-dns's sidecar did for it: every
// interval it asks the plugin's own answerer, in process, for a name that must exist, and counts
// the result and the time taken. After misses probes in a row that did not find the name, or while
// one has been waiting that long for its reply (an answerer that hangs), Healthy says no; the next
// success says yes again. Without the option there is no prober, and nothing of this runs.
package probe

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/query"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

var log = clog.NewWithPlugin("kubetree")

// Options are the probe option: probe [NAME [INTERVAL [MISSES]]].
type Options struct {
	Name     string        // asked for, type A; lower case, fully qualified, in one of our zones
	Interval time.Duration // between two probes
	Misses   int32         // probes in a row without the name before Healthy says no
}

// The probe option's defaults and bounds.
const (
	DefaultInterval = 5 * time.Second // kube-dns's sidecar probed every 5 s
	DefaultMisses   = 3
	MinInterval     = time.Second
	MaxMisses       = 100
)

// The results a probe is counted under (probes_total's result label).
const (
	ResultSuccess  = "success"  // NOERROR: the name exists (its records, or NODATA for type A)
	ResultNXDomain = "nxdomain" // the name does not exist
	ResultServFail = "servfail"
	ResultError    = "error" // any other rcode, or no reply
)

// Results are every result, each a series from the start.
var Results = []string{ResultSuccess, ResultNXDomain, ResultServFail, ResultError}

// Prober runs the self-probe of one instance: started in OnStartup, stopped in OnShutdown.
type Prober struct {
	answerer *query.Answerer
	opts     Options
	ctx      context.Context // the probe's, marked as an internal query
	latency  prometheus.Observer
	results  map[string]prometheus.Counter

	missed atomic.Int32 // probes in a row that did not find the name
	// asked is when the probe in flight started (Unix ns), 0 when none is: an answerer that never
	// replies is a miss too.
	asked atomic.Int64

	done    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// New makes the prober that asks a as o says, with its series under m's labels; nil without the
// probe option (o nil).
func New(o *Options, a *query.Answerer, m *metrics.ServerBlock) *Prober {
	if o == nil {
		return nil
	}
	p := &Prober{
		answerer: a, opts: *o, ctx: query.Probe(context.Background()),
		latency: m.ProbeLatency(),
		results: map[string]prometheus.Counter{},
		done:    make(chan struct{}),
	}
	// Every result's series exists from the start, so that an alert can see "no success".
	for _, r := range Results {
		p.results[r] = m.Probes(r)
	}
	return p
}

// Start probes now and then every interval, until stop.
func (p *Prober) Start() {
	if p == nil {
		return
	}
	p.wg.Go(func() {
		t := time.NewTicker(p.opts.Interval)
		defer t.Stop()
		for {
			p.Probe()
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	})
}

// Stop ends the probing and waits for it; a second call does nothing. A probe being answered is
// waited for: the answerer waits on nothing but the tree's short critical sections.
func (p *Prober) Stop() error {
	if p == nil {
		return nil
	}
	p.stopped.Do(func() { close(p.done) })
	p.wg.Wait()
	return nil
}

// Healthy reports whether the probe finds its name: fewer than misses failures in a row, and no
// probe waiting for its reply as long as that many would take. Without a prober, always.
func (p *Prober) Healthy() bool {
	if p == nil {
		return true
	}
	if p.missed.Load() >= p.opts.Misses {
		return false
	}
	asked := p.asked.Load()
	return asked == 0 || time.Since(time.Unix(0, asked)) < time.Duration(p.opts.Misses)*p.opts.Interval
}

// Probe asks once. Before the first sync it does not ask: a name not yet known is SERVFAIL then,
// and the instance is not ready anyway.
func (p *Prober) Probe() {
	if !p.answerer.Synced.Load() {
		return
	}
	r := new(dns.Msg)
	r.SetQuestion(p.opts.Name, dns.TypeA)
	w := &query.InternalWriter{}
	start := time.Now()
	p.asked.Store(start.UnixNano())
	if z, ok := p.answerer.ZoneOf(p.opts.Name); ok {
		p.answerer.Answer(p.ctx, w, r, z)
	}
	p.asked.Store(0)
	p.latency.Observe(time.Since(start).Seconds())

	result := ResultError
	switch {
	case w.Msg == nil:
	case w.Msg.Rcode == dns.RcodeSuccess:
		result = ResultSuccess
	case w.Msg.Rcode == dns.RcodeNameError:
		result = ResultNXDomain
	case w.Msg.Rcode == dns.RcodeServerFailure:
		result = ResultServFail
	}
	p.results[result].Inc()
	if result == ResultSuccess {
		if p.missed.Swap(0) >= p.opts.Misses {
			log.Infof("probe: %s found again: ready", p.opts.Name)
		}
		return
	}
	if p.missed.Add(1) == p.opts.Misses {
		log.Warningf("probe: %s not found %d times in a row (%s): not ready", p.opts.Name, p.opts.Misses, result)
	}
}
