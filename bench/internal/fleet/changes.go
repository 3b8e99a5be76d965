package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// churner updates EndpointSlices at -churn a second: each update moves one endpoint of a service
// the probes do not use to another address and back.
type churner struct{ done, failed atomic.Int64 }

func (c *churner) run(ctx context.Context, writer kubernetes.Interface, cl *measure.Cluster, cfg Options, stop chan struct{}) {
	if cfg.Churn <= 0 {
		return
	}
	tokens := make(chan int, 64)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for n := range tokens {
				s := cl.Services[probeTargets+n%(len(cl.Services)-probeTargets)]
				ips := slices.Clone(s.IPs)
				if (n/(len(cl.Services)-probeTargets))%2 == 0 {
					ips[0] = measure.PodIP(2_000_000 + n%(len(cl.Services)-probeTargets))
				}
				slice, opts := measure.BenchSlice(s, ips, cfg.ControllerSlices)
				_, err := writer.DiscoveryV1().EndpointSlices(s.NS).Update(ctx, slice, metav1.UpdateOptions{FieldManager: opts.FieldManager})
				if err != nil {
					c.failed.Add(1)
				} else {
					c.done.Add(1)
				}
			}
		})
	}
	measure.PaceTokens(ctx, stop, tokens, cfg.Churn, &c.failed)
	wg.Wait()
}

// probeTargets: the first services are the probes' (their headless ones move an endpoint), the
// rest the churn's.
const probeTargets = 100

// prober makes a timed change twice a second, the two kinds in turn, and times the answer of
// every replica.
type prober struct {
	storm            *fleetStorm
	servers          []*measure.Server
	writer           kubernetes.Interface
	cl               *measure.Cluster
	restartAt        *atomic.Pointer[time.Time]
	controllerShaped bool
	mu               sync.Mutex
	polls            sync.WaitGroup
}

func (p *prober) run(ctx context.Context, stop chan struct{}) {
	var headless []*measure.Service
	for _, s := range p.cl.Services[:min(probeTargets, len(p.cl.Services))] {
		if s.Headless && s.Hostnames[0] != "" {
			headless = append(headless, s)
		}
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		kind := probeKinds[n%2]
		var name, ip string
		var err error
		switch {
		case kind == probeKinds[0]:
			var c *corev1.Service
			c, err = p.writer.CoreV1().Services(p.cl.Namespaces[0]).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d-%d", os.Getpid(), rand.Uint32()), Namespace: p.cl.Namespaces[0]},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
			}, metav1.CreateOptions{})
			if err == nil {
				name, ip = c.Name+"."+c.Namespace+".svc.cluster.local.", c.Spec.ClusterIP
			}
		case len(headless) > 0:
			s := headless[(n/2)%len(headless)]
			ips := slices.Clone(s.IPs)
			ips[0] = measure.PodIP(3_000_000 + n)
			slice, opts := measure.BenchSlice(s, ips, p.controllerShaped)
			_, err = p.writer.DiscoveryV1().EndpointSlices(s.NS).Update(ctx, slice, metav1.UpdateOptions{FieldManager: opts.FieldManager})
			name, ip = s.EndpointName(0)+"."+s.FQDN(), ips[0]
		default:
			continue
		}
		if err != nil {
			continue // the API server is away
		}
		made := time.Now()
		phase := phaseSteady
		if r := p.restartAt.Load(); r != nil && made.After(*r) {
			phase = phaseRelist
		}
		p.polls.Go(func() { p.timeChange(ctx, phase, kind, name, ip, made) })
	}
}

// timeChange times a change's answer on every replica, and the first replica's answer: a change
// every replica answers late was late before it reached any of them (the API server's write or
// its watch's fan-out).
func (p *prober) timeChange(ctx context.Context, phase, kind, name, ip string, made time.Time) {
	var mu sync.Mutex
	first := time.Duration(-1)
	var each sync.WaitGroup
	for _, s := range p.servers {
		each.Go(func() {
			if took, ok := p.time(ctx, s, phase, kind, name, ip, made); ok {
				mu.Lock()
				if first < 0 || took < first {
					first = took
				}
				mu.Unlock()
			}
		})
	}
	each.Wait()
	if first >= 0 {
		p.mu.Lock()
		p.storm.firstAnswer[phase][kind] = append(p.storm.firstAnswer[phase][kind], first)
		p.mu.Unlock()
	}
}

// time polls one replica for a change's answer: every 10 ms for a second, then every 100 ms.
func (p *prober) time(ctx context.Context, s *measure.Server, phase, kind, name, ip string, made time.Time) (time.Duration, bool) {
	for {
		r, err := measure.Ask(ctx, s.Addr, name, 1 /* A */)
		took := time.Since(made)
		if err == nil && measure.HasA(r, ip) {
			p.mu.Lock()
			p.storm.latency[phase][kind] = append(p.storm.latency[phase][kind], took)
			p.mu.Unlock()
			return took, true
		}
		if took > probeLimit || ctx.Err() != nil {
			p.mu.Lock()
			p.storm.unanswered[phase][kind]++
			p.mu.Unlock()
			return took, false
		}
		wait := 10 * time.Millisecond
		if took > time.Second {
			wait = 100 * time.Millisecond
		}
		time.Sleep(wait)
	}
}

func (p *prober) wait() { p.polls.Wait() }
