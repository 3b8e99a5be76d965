package sidebyside

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// poller asks one server one question in a tight loop over one UDP socket.
type poller struct {
	conn *dns.Conn
	id   uint16
}

func newPoller(addr string) (*poller, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	return &poller{conn: &dns.Conn{Conn: c}}, nil
}

// until asks name/qtype again and again until ok(reply), and returns the time since t0; it gives up
// after limit.
func (p *poller) until(ctx context.Context, name string, qtype uint16, ok func(*dns.Msg) bool, t0 time.Time, limit time.Duration) (time.Duration, error) {
	deadline := t0.Add(limit)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		p.id++
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.Id = p.id
		if err := p.conn.WriteMsg(m); err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		p.conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			r, err := p.conn.ReadMsg()
			if err != nil {
				break // lost: ask again
			}
			if r.Id != m.Id {
				continue // a late reply to an earlier question
			}
			if ok(r) {
				return time.Since(t0), nil
			}
			break
		}
	}
	return 0, fmt.Errorf("%s %s: no expected answer within %s", name, dns.TypeToString[qtype], limit)
}

// propResult: per plugin, the time from Create (Delete) returning to the first correct answer
// (NXDOMAIN).
type propResult struct {
	n        int
	create   map[string][]time.Duration
	del      map[string][]time.Duration
	timeouts map[string]int
}

const propLimit = 30 * time.Second

// propagation creates n ClusterIP services one at a time in the first namespace; after each Create
// returns it polls kubernetes and kubetree concurrently until both answer with the cluster IP, then
// deletes the service and polls until both say NXDOMAIN.
func propagation(ctx context.Context, cp *measure.ControlPlane, cl *measure.Cluster, servers map[string]*measure.Server, n int) (*propResult, error) {
	plugins := []string{"kubernetes", "kubetree"}
	res := &propResult{n: n, create: map[string][]time.Duration{}, del: map[string][]time.Duration{}, timeouts: map[string]int{}}
	pollers := map[string]*poller{}
	for _, p := range plugins {
		pl, err := newPoller(servers[p].Addr)
		if err != nil {
			return nil, err
		}
		defer pl.conn.Close()
		pollers[p] = pl
	}
	ns := cl.Namespaces[0]
	services := cp.Client.CoreV1().Services(ns)
	both := func(name string, qtype uint16, ok func(*dns.Msg) bool, t0 time.Time, into map[string][]time.Duration) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, p := range plugins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := pollers[p].until(ctx, name, qtype, ok, t0, propLimit)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if ctx.Err() == nil {
						measure.Logf("propagation, %s: %v", p, err)
						res.timeouts[p]++
						into[p] = append(into[p], propLimit)
					}
					return
				}
				into[p] = append(into[p], d)
			}()
		}
		wg.Wait()
	}
	for i := range n {
		name := fmt.Sprintf("prop-%03d", i)
		fqdn := name + "." + ns + ".svc.cluster.local."
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
			}}},
		}
		created, err := services.Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
		t0 := time.Now()
		ip := created.Spec.ClusterIP
		both(fqdn, dns.TypeA, func(r *dns.Msg) bool { return measure.HasA(r, ip) }, t0, res.create)
		if err := services.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return nil, fmt.Errorf("delete %s: %w", name, err)
		}
		t1 := time.Now()
		both(fqdn, dns.TypeA, func(r *dns.Msg) bool { return r.Rcode == dns.RcodeNameError }, t1, res.del)
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		if (i+1)%10 == 0 {
			measure.Logf("propagation: %d/%d services", i+1, n)
		}
	}
	for _, p := range plugins {
		measure.Logf("propagation %-10s create median %s max %s; delete median %s max %s; %d timeouts", p,
			measure.Millis(medianDur(res.create[p])), measure.Millis(slices.Max(res.create[p])), measure.Millis(medianDur(res.del[p])), measure.Millis(slices.Max(res.del[p])), res.timeouts[p])
	}
	return res, nil
}

// rows are the results table's rows of the propagation.
func (p *propResult) rows() []row {
	nan := math.NaN()
	pr := func(name string, m map[string][]time.Duration, f func([]time.Duration) time.Duration) row {
		return row{metric: name, v: [3]float64{f(m["kubernetes"]).Seconds(), f(m["kubetree"]).Seconds(), nan}, format: fMsShort}
	}
	mx := func(v []time.Duration) time.Duration { return slices.Max(v) }
	return []row{
		pr(fmt.Sprintf("propagation: create → answer, median (n=%d)", p.n), p.create, medianDur),
		pr("propagation: create → answer, max", p.create, mx),
		pr("propagation: delete → NXDOMAIN, median", p.del, medianDur),
		pr("propagation: delete → NXDOMAIN, max", p.del, mx),
	}
}

// medianDur is the median of v.
func medianDur(v []time.Duration) time.Duration {
	f := make([]float64, len(v))
	for i, d := range v {
		f[i] = float64(d)
	}
	return time.Duration(measure.Median(f))
}
