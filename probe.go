package kubetree

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// The self-probe (the probe option) is what kube-dns's sidecar did for it: every interval it asks
// the plugin's own handler, in process, for a name that must exist, and counts the result and the
// time taken. After misses probes in a row that did not find the name, or while one has been
// waiting that long for its reply (a handler that hangs), Ready says no; the next success says
// yes again. Without the option there is no prober, and nothing of this runs.

// probeConfig is the probe option.
type probeConfig struct {
	name     string        // asked for, type A; lower case, fully qualified, in one of our zones
	interval time.Duration // between two probes
	misses   int32         // probes in a row without the name before Ready says no
}

const (
	defaultProbeInterval = 5 * time.Second // kube-dns's sidecar probed every 5 s
	defaultProbeMisses   = 3
	minProbeInterval     = time.Second
	maxProbeMisses       = 100
)

// The results a probe is counted under.
const (
	probeSuccess  = "success"  // NOERROR: the name exists (its records, or NODATA for type A)
	probeNXDomain = "nxdomain" // the name does not exist
	probeServFail = "servfail"
	probeError    = "error" // any other rcode, no reply, or an error from the handler
)

var probeResults = []string{probeSuccess, probeNXDomain, probeServFail, probeError}

// probeKey marks the probe's context: its query stays in kubetree, neither passed on to the next
// plugin (fallthrough) nor resolved upstream (an ExternalName's target). Checked only where a
// query would leave kubetree.
type probeKey struct{}

// probing reports whether ctx is the probe's.
func probing(ctx context.Context) bool { return ctx.Value(probeKey{}) != nil }

// prober runs the self-probe of one Kubetree: started in OnStartup, stopped in OnShutdown.
type prober struct {
	k       *Kubetree
	cfg     probeConfig
	ctx     context.Context // the probe's, marked with probeKey
	latency prometheus.Observer
	results map[string]prometheus.Counter

	missed atomic.Int32 // probes in a row that did not find the name
	// asked is when the probe in flight started (Unix ns), 0 when none is: a handler that never
	// replies is a miss too.
	asked atomic.Int64

	done    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// newProber makes k's prober, with its series under m's labels; nil without the probe option.
func newProber(k *Kubetree, m *serverMetrics) *prober {
	if k.cfg.probe == nil {
		return nil
	}
	p := &prober{
		k: k, cfg: *k.cfg.probe, ctx: context.WithValue(context.Background(), probeKey{}, true),
		latency: probeDuration.WithLabelValues(m.server, m.zones),
		results: map[string]prometheus.Counter{},
		done:    make(chan struct{}),
	}
	// Every result's series exists from the start, so that an alert can see "no success".
	for _, r := range probeResults {
		p.results[r] = probes.WithLabelValues(m.server, m.zones, r)
	}
	return p
}

// start probes now and then every interval, until stop.
func (p *prober) start() {
	if p == nil {
		return
	}
	p.wg.Go(func() {
		t := time.NewTicker(p.cfg.interval)
		defer t.Stop()
		for {
			p.probe()
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	})
}

// stop ends the probing and waits for it; a second call does nothing. A probe in the handler is
// waited for: the handler waits on nothing but the tree's short critical sections.
func (p *prober) stop() error {
	if p == nil {
		return nil
	}
	p.stopped.Do(func() { close(p.done) })
	p.wg.Wait()
	return nil
}

// healthy reports whether the probe finds its name: fewer than misses failures in a row, and no
// probe waiting for its reply as long as that many would take. Without a prober, always.
func (p *prober) healthy() bool {
	if p == nil {
		return true
	}
	if p.missed.Load() >= p.cfg.misses {
		return false
	}
	asked := p.asked.Load()
	return asked == 0 || time.Since(time.Unix(0, asked)) < time.Duration(p.cfg.misses)*p.cfg.interval
}

// probe asks once. Before the first sync it does not ask: a name not yet known is SERVFAIL then,
// and Ready already says no.
func (p *prober) probe() {
	if !p.k.synced.Load() {
		return
	}
	r := new(dns.Msg)
	r.SetQuestion(p.cfg.name, dns.TypeA)
	w := &probeWriter{}
	start := time.Now()
	p.asked.Store(start.UnixNano())
	_, err := p.k.ServeDNS(p.ctx, w, r)
	p.asked.Store(0)
	p.latency.Observe(time.Since(start).Seconds())

	result := probeError
	switch {
	case err != nil || w.msg == nil:
	case w.msg.Rcode == dns.RcodeSuccess:
		result = probeSuccess
	case w.msg.Rcode == dns.RcodeNameError:
		result = probeNXDomain
	case w.msg.Rcode == dns.RcodeServerFailure:
		result = probeServFail
	}
	p.results[result].Inc()
	if result == probeSuccess {
		if p.missed.Swap(0) >= p.cfg.misses {
			log.Infof("probe: %s found again: ready", p.cfg.name)
		}
		return
	}
	if p.missed.Add(1) == p.cfg.misses {
		log.Warningf("probe: %s not found %d times in a row (%s%s): not ready", p.cfg.name, p.cfg.misses, result, errText(err))
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// probeWriter keeps the probe's reply; the probe's query comes from nowhere on the network.
type probeWriter struct{ msg *dns.Msg }

var (
	probeAddr     = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	errProbeWrite = errors.New("the probe takes a reply message, not bytes")
)

func (w *probeWriter) WriteMsg(m *dns.Msg) error { w.msg = m; return nil }
func (w *probeWriter) Write([]byte) (int, error) { return 0, errProbeWrite }
func (w *probeWriter) LocalAddr() net.Addr       { return probeAddr }
func (w *probeWriter) RemoteAddr() net.Addr      { return probeAddr }
func (w *probeWriter) Close() error              { return nil }
func (w *probeWriter) TsigStatus() error         { return nil }
func (w *probeWriter) TsigTimersOnly(bool)       {}
func (w *probeWriter) Hijack()                   {}
