package sidebyside

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

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

// sampleQuestions: the first cfg.Sample distinct questions of the query file, then extra ones that are
// not in the load mix (PTR, bare-name SRV, other types, the apex, case, names that do not exist).
func sampleQuestions(qs *querySet, cl *measure.Cluster, cfg Options) []question {
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
		if len(out) >= cfg.Sample {
			break
		}
		addQ(l.name, dns.StringToType[l.qtype], qs.kinds[l.kind].name)
	}
	var plain, headless []*measure.Service
	for _, s := range cl.Services {
		if s.Headless && len(headless) < 10 {
			headless = append(headless, s)
		} else if !s.Headless && len(plain) < 10 {
			plain = append(plain, s)
		}
	}
	for _, s := range append(plain, headless...) {
		kind := "extra: ClusterIP service"
		if s.Headless {
			kind = "extra: headless service"
		}
		if s.ClusterIP != "" {
			r, _ := dns.ReverseAddr(s.ClusterIP)
			addQ(r, dns.TypePTR, kind+" PTR of the cluster IP")
		}
		for j := range min(2, len(s.IPs)) {
			r, _ := dns.ReverseAddr(s.IPs[j])
			addQ(r, dns.TypePTR, kind+" PTR of an endpoint")
			addQ(s.EndpointName(j)+"."+s.FQDN(), dns.TypeAAAA, kind+" endpoint AAAA")
			addQ(s.EndpointName(j)+"."+s.FQDN(), dns.TypeSRV, kind+" endpoint SRV")
		}
		addQ(s.FQDN(), dns.TypeSRV, kind+" SRV on the bare name")
		addQ("_http._udp."+s.FQDN(), dns.TypeSRV, kind+" SRV wrong protocol")
		addQ("_https._tcp."+s.FQDN(), dns.TypeSRV, kind+" SRV unknown port")
		addQ("_tcp."+s.FQDN(), dns.TypeSRV, kind+" SRV protocol only")
		addQ(s.FQDN(), dns.TypeTXT, kind+" TXT")
		addQ(strings.ToUpper(s.FQDN()), dns.TypeA, kind+" A in upper case")
		addQ("nosuchendpoint."+s.FQDN(), dns.TypeA, kind+" unknown endpoint")
	}
	ns := cl.Namespaces[0]
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

// sections are the parts of a normalized reply compared after its rcode and answer, and the class
// of difference each makes.
var sections = []struct {
	class string
	of    func(norm) []string
}{
	{dWeight, func(n norm) []string { return n.weights }},
	{dAuth, func(n norm) []string { return n.auth }},
	{dExtra, func(n norm) []string { return n.extra }},
	{dTTL, func(n norm) []string { return n.ttls }},
}

// classify adds the differences between a (kubernetes) and b (kubetree), the replies to q, to d.
func (d *diffReport) classify(q question, a, b *dns.Msg) {
	d.checked++
	d.byKind[q.kind]++
	na, nb := normalize(a), normalize(b)
	show := func(n norm, f func(norm) []string) string {
		return n.rcode + " " + fmt.Sprintf("%q", f(n))
	}
	answer := func(n norm) []string { return n.answer }
	x := difference{question: q.name + " " + dns.TypeToString[q.qtype], kind: q.kind}
	switch {
	case na.rcode != nb.rcode:
		x.a, x.b = show(na, answer), show(nb, answer)
		d.add(dRcode, x)
		return
	case !slices.Equal(na.answer, nb.answer):
		x.a, x.b = show(na, answer), show(nb, answer)
		d.add(dAnswer, x)
		return
	}
	for _, sec := range sections {
		if !slices.Equal(sec.of(na), sec.of(nb)) {
			x.a, x.b = show(na, sec.of), show(nb, sec.of)
			d.add(sec.class, x)
		}
	}
}

// compareAnswers asks a (kubernetes) and b (kubetree) the same sample of questions and classifies
// every difference.
func compareAnswers(ctx context.Context, a, b string, qs *querySet, cl *measure.Cluster, cfg Options) (*diffReport, error) {
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
				ra, err := measure.Ask(ctx, a, q.name, q.qtype)
				if err != nil {
					errs[i] = fmt.Errorf("kubernetes, %s %s: %w", q.name, dns.TypeToString[q.qtype], err)
					continue
				}
				rb, err := measure.Ask(ctx, b, q.name, q.qtype)
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
		d.classify(q, replies[i].a, replies[i].b)
	}
	return d, nil
}
