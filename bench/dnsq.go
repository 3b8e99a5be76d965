package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ask sends one query over UDP with a 4096-byte EDNS buffer, and over TCP when the reply is truncated;
// it tries 3 times.
func ask(ctx context.Context, addr, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(4096, false)
	var err error
	for range 3 {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		var r *dns.Msg
		r, _, err = (&dns.Client{Net: "udp", Timeout: 2 * time.Second}).ExchangeContext(ctx, m, addr)
		if err == nil && r.Truncated {
			r, _, err = (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).ExchangeContext(ctx, m, addr)
		}
		if err == nil {
			return r, nil
		}
	}
	return nil, err
}

// norm is a reply reduced to what should be equal between the two plugins.
type norm struct {
	rcode   string
	answer  []string // "owner TYPE rdata", lower case, sorted; SRV without the weight
	weights []string // SRV weights, by record
	ttls    []string
	auth    []string // the authority section, sorted (SOA without its serial)
	extra   []string // additional section, without OPT, sorted
}

func normalize(r *dns.Msg) norm {
	n := norm{rcode: dns.RcodeToString[r.Rcode]}
	rdata := func(rr dns.RR) string {
		h := rr.Header()
		if soa, ok := rr.(*dns.SOA); ok { // the serial is a timestamp: left out
			return strings.ToLower(fmt.Sprintf("%s SOA %s %s (serial) %d %d %d %d", h.Name, soa.Ns, soa.Mbox, soa.Refresh, soa.Retry, soa.Expire, soa.Minttl))
		}
		return strings.ToLower(fmt.Sprintf("%s %s %s", h.Name, dns.TypeToString[h.Rrtype], strings.TrimPrefix(rr.String(), h.String())))
	}
	for _, rr := range r.Answer {
		h := rr.Header()
		if srv, ok := rr.(*dns.SRV); ok {
			n.answer = append(n.answer, strings.ToLower(fmt.Sprintf("%s SRV %d %d %s", h.Name, srv.Priority, srv.Port, srv.Target)))
			n.weights = append(n.weights, strings.ToLower(fmt.Sprintf("%s w=%d", srv.Target, srv.Weight)))
		} else {
			n.answer = append(n.answer, rdata(rr))
		}
		n.ttls = append(n.ttls, fmt.Sprintf("%s %d", dns.TypeToString[h.Rrtype], h.Ttl))
	}
	for _, rr := range r.Ns {
		h := rr.Header()
		n.auth = append(n.auth, rdata(rr))
		n.ttls = append(n.ttls, fmt.Sprintf("auth %s %d", dns.TypeToString[h.Rrtype], h.Ttl))
	}
	for _, rr := range r.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		n.extra = append(n.extra, rdata(rr))
	}
	for _, s := range [][]string{n.answer, n.weights, n.ttls, n.auth, n.extra} {
		slices.Sort(s)
	}
	n.ttls = slices.Compact(n.ttls)
	return n
}

// A difference between the two plugins' answers to one question.
type difference struct {
	question string
	kind     string
	a, b     string
}

// diffReport is the outcome of compareAnswers.
type diffReport struct {
	checked int
	byKind  map[string]int // questions checked per kind of name
	classes []string       // in order of first appearance
	diffs   map[string][]difference
}

// The classes of difference; weight and TTL-only ones are told apart from real disagreements.
const (
	dRcode  = "rcode differs"
	dAnswer = "answer records differ"
	dWeight = "SRV weights differ (documented: weights differ)"
	dAuth   = "authority section differs"
	dExtra  = "additional section differs"
	dTTL    = "TTLs differ"
)

func (d *diffReport) add(class string, x difference) {
	if _, ok := d.diffs[class]; !ok {
		d.classes = append(d.classes, class)
	}
	d.diffs[class] = append(d.diffs[class], x)
}

func (d *diffReport) total() int {
	n := 0
	for _, v := range d.diffs {
		n += len(v)
	}
	return n
}

// groups splits a class's differences by the kind of question, in order of first appearance.
func (d *diffReport) groups(class string) (kinds []string, by map[string][]difference) {
	by = map[string][]difference{}
	for _, x := range d.diffs[class] {
		if _, ok := by[x.kind]; !ok {
			kinds = append(kinds, x.kind)
		}
		by[x.kind] = append(by[x.kind], x)
	}
	return kinds, by
}

func (d *diffReport) print(w io.Writer) {
	fmt.Fprintf(w, "correctness: %d questions asked of kubernetes and kubetree; %d differences\n", d.checked, d.total())
	for _, c := range d.classes {
		fmt.Fprintf(w, "  %s: %d\n", c, len(d.diffs[c]))
		kinds, by := d.groups(c)
		for _, k := range kinds {
			fmt.Fprintf(w, "    [%s] %d of %d questions, e.g.\n", k, len(by[k]), d.byKind[k])
			for _, x := range by[k][:min(2, len(by[k]))] {
				fmt.Fprintf(w, "      %s\n        kubernetes: %s\n        kubetree:   %s\n", x.question, x.a, x.b)
			}
		}
	}
}

type question struct {
	name  string
	qtype uint16
	kind  string
}

// sampleQuestions: the first cfg.sample distinct questions of the query file, then extra ones that are
// not in the load mix (PTR, bare-name SRV, other types, the apex, case, names that do not exist).
func sampleQuestions(qs *querySet, cl *cluster, cfg *config) []question {
	var out []question
	seen := map[string]bool{}
	addQ := func(name string, qtype uint16, kind string) {
		k := strings.ToLower(name) + "/" + dns.TypeToString[qtype]
		if !seen[k] {
			seen[k] = true
			out = append(out, question{name, qtype, kind})
		}
	}
	for _, l := range qs.lines {
		if len(out) >= cfg.sample {
			break
		}
		addQ(l.name, dns.StringToType[l.qtype], kinds[l.kind].name)
	}
	var plain, headless []*svc
	for _, s := range cl.services {
		if s.headless && len(headless) < 10 {
			headless = append(headless, s)
		} else if !s.headless && len(plain) < 10 {
			plain = append(plain, s)
		}
	}
	for _, s := range append(plain, headless...) {
		kind := "extra: ClusterIP service"
		if s.headless {
			kind = "extra: headless service"
		}
		if s.clusterIP != "" {
			r, _ := dns.ReverseAddr(s.clusterIP)
			addQ(r, dns.TypePTR, kind+" PTR of the cluster IP")
		}
		for j := range min(2, len(s.ips)) {
			r, _ := dns.ReverseAddr(s.ips[j])
			addQ(r, dns.TypePTR, kind+" PTR of an endpoint")
			addQ(s.endpointName(j)+"."+s.fqdn(), dns.TypeAAAA, kind+" endpoint AAAA")
			addQ(s.endpointName(j)+"."+s.fqdn(), dns.TypeSRV, kind+" endpoint SRV")
		}
		addQ(s.fqdn(), dns.TypeSRV, kind+" SRV on the bare name")
		addQ("_http._udp."+s.fqdn(), dns.TypeSRV, kind+" SRV wrong protocol")
		addQ("_https._tcp."+s.fqdn(), dns.TypeSRV, kind+" SRV unknown port")
		addQ("_tcp."+s.fqdn(), dns.TypeSRV, kind+" SRV protocol only")
		addQ(s.fqdn(), dns.TypeTXT, kind+" TXT")
		addQ(strings.ToUpper(s.fqdn()), dns.TypeA, kind+" A in upper case")
		addQ("nosuchendpoint."+s.fqdn(), dns.TypeA, kind+" unknown endpoint")
	}
	ns := cl.namespaces[0]
	for _, q := range []question{
		{"cluster.local.", dns.TypeSOA, "extra: apex"},
		{"cluster.local.", dns.TypeNS, "extra: apex"},
		{"cluster.local.", dns.TypeA, "extra: apex"},
		{"dns-version.cluster.local.", dns.TypeTXT, "extra: dns-version"},
		{"svc.cluster.local.", dns.TypeA, "extra: between"},
		{"pod.cluster.local.", dns.TypeA, "extra: between"},
		{ns + ".svc.cluster.local.", dns.TypeA, "extra: namespace"},
		{"nosuchns.svc.cluster.local.", dns.TypeA, "extra: unknown namespace"},
		{"nosuchsvc." + ns + ".svc.cluster.local.", dns.TypeA, "extra: unknown service"},
		{"kubernetes.default.svc.cluster.local.", dns.TypeA, "extra: kubernetes service (no endpoints)"},
		{"_https._tcp.kubernetes.default.svc.cluster.local.", dns.TypeSRV, "extra: kubernetes service (no endpoints)"},
		{"1-2-3-4." + ns + ".pod.cluster.local.", dns.TypeA, "extra: pod name (pods disabled)"},
		{"in-addr.arpa.", dns.TypeSOA, "extra: reverse apex"},
		{"1.0.0.127.in-addr.arpa.", dns.TypePTR, "extra: PTR of an unknown address"},
	} {
		addQ(q.name, q.qtype, q.kind)
	}
	return out
}

// compareAnswers asks a (kubernetes) and b (kubetree) the same sample of questions and classifies
// every difference.
func compareAnswers(ctx context.Context, a, b string, qs *querySet, cl *cluster, cfg *config) (*diffReport, error) {
	qq := sampleQuestions(qs, cl, cfg)
	d := &diffReport{byKind: map[string]int{}, diffs: map[string][]difference{}}
	type pair struct{ a, b *dns.Msg }
	replies := make([]pair, len(qq))
	errs := make([]error, len(qq))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				q := qq[i]
				ra, err := ask(ctx, a, q.name, q.qtype)
				if err != nil {
					errs[i] = fmt.Errorf("kubernetes, %s %s: %w", q.name, dns.TypeToString[q.qtype], err)
					continue
				}
				rb, err := ask(ctx, b, q.name, q.qtype)
				if err != nil {
					errs[i] = fmt.Errorf("kubetree, %s %s: %w", q.name, dns.TypeToString[q.qtype], err)
					continue
				}
				replies[i] = pair{ra, rb}
			}
		}()
	}
	for i := range qq {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, q := range qq {
		d.checked++
		d.byKind[q.kind]++
		na, nb := normalize(replies[i].a), normalize(replies[i].b)
		show := func(n norm, f func(norm) []string) string {
			return n.rcode + " " + fmt.Sprintf("%q", f(n))
		}
		x := difference{question: q.name + " " + dns.TypeToString[q.qtype], kind: q.kind}
		switch {
		case na.rcode != nb.rcode:
			x.a, x.b = show(na, func(n norm) []string { return n.answer }), show(nb, func(n norm) []string { return n.answer })
			d.add(dRcode, x)
			continue
		case !slices.Equal(na.answer, nb.answer):
			x.a, x.b = show(na, func(n norm) []string { return n.answer }), show(nb, func(n norm) []string { return n.answer })
			d.add(dAnswer, x)
			continue
		}
		if !slices.Equal(na.weights, nb.weights) {
			x.a, x.b = show(na, func(n norm) []string { return n.weights }), show(nb, func(n norm) []string { return n.weights })
			d.add(dWeight, x)
		}
		if !slices.Equal(na.auth, nb.auth) {
			x.a, x.b = show(na, func(n norm) []string { return n.auth }), show(nb, func(n norm) []string { return n.auth })
			d.add(dAuth, x)
		}
		if !slices.Equal(na.extra, nb.extra) {
			x.a, x.b = show(na, func(n norm) []string { return n.extra }), show(nb, func(n norm) []string { return n.extra })
			d.add(dExtra, x)
		}
		if !slices.Equal(na.ttls, nb.ttls) {
			x.a, x.b = show(na, func(n norm) []string { return n.ttls }), show(nb, func(n norm) []string { return n.ttls })
			d.add(dTTL, x)
		}
	}
	return d, nil
}

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
func propagation(ctx context.Context, cp *controlPlane, cl *cluster, servers map[string]*server, n int) (*propResult, error) {
	plugins := []string{"kubernetes", "kubetree"}
	res := &propResult{n: n, create: map[string][]time.Duration{}, del: map[string][]time.Duration{}, timeouts: map[string]int{}}
	pollers := map[string]*poller{}
	for _, p := range plugins {
		pl, err := newPoller(servers[p].addr)
		if err != nil {
			return nil, err
		}
		defer pl.conn.Close()
		pollers[p] = pl
	}
	ns := cl.namespaces[0]
	services := cp.client.CoreV1().Services(ns)
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
						logf("propagation, %s: %v", p, err)
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
		both(fqdn, dns.TypeA, func(r *dns.Msg) bool { return hasA(r, ip) }, t0, res.create)
		if err := services.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return nil, fmt.Errorf("delete %s: %w", name, err)
		}
		t1 := time.Now()
		both(fqdn, dns.TypeA, func(r *dns.Msg) bool { return r.Rcode == dns.RcodeNameError }, t1, res.del)
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		if (i+1)%10 == 0 {
			logf("propagation: %d/%d services", i+1, n)
		}
	}
	for _, p := range plugins {
		logf("propagation %-10s create median %s max %s; delete median %s max %s; %d timeouts", p,
			ms(medianDur(res.create[p])), ms(slices.Max(res.create[p])), ms(medianDur(res.del[p])), ms(slices.Max(res.del[p])), res.timeouts[p])
	}
	return res, nil
}

func medianDur(v []time.Duration) time.Duration {
	f := make([]float64, len(v))
	for i, d := range v {
		f[i] = float64(d)
	}
	return time.Duration(median(f))
}
