package doctor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/replica"
)

var bg = context.Background()

// The resolv.conf the kubelet writes for a ClusterFirst pod of namespace doc, node search domain
// example.internal.
const kubeletConf = `search doc.svc.cluster.local svc.cluster.local cluster.local example.internal
nameserver 10.96.0.10
options ndots:5
`

func TestResolvConfAsTheKubeletWritesIt(t *testing.T) {
	for _, c := range []struct {
		name, conf, nameserver string
		want                   []string // the differences found
	}{
		{"the kubelet's", kubeletConf, "10.96.0.10", nil},
		{"NodeLocal's address", strings.Replace(kubeletConf, "10.96.0.10", "169.254.20.10", 1), "169.254.20.10", nil},
		{"a nameserver that is not the cluster DNS", strings.Replace(kubeletConf, "10.96.0.10", "8.8.8.8", 1), "10.96.0.10",
			[]string{"nameserver [8.8.8.8], want 10.96.0.10 first"}},
		{"no search path, default ndots", "nameserver 10.96.0.10\n", "10.96.0.10",
			[]string{"search [], want it to begin [doc.svc.cluster.local svc.cluster.local cluster.local]", "ndots 1, want 5"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := checkResolvConf(parseResolvConf(c.conf), "doc", "cluster.local", c.nameserver)
			if !slices.Equal(got, c.want) {
				t.Errorf("differences %q, want %q", got, c.want)
			}
		})
	}
}

func TestQueriesOneExternalLookupCosts(t *testing.T) {
	rc := parseResolvConf(kubeletConf)
	// www.example.com has 2 dots, fewer than ndots 5: the 4 search domains, then the name; A and AAAA each.
	if got := queriesPerLookup(rc, 2); got != 10 {
		t.Errorf("queries = %d, want 10", got)
	}
	if got := queriesPerLookup(rc, 5); got != 2 {
		t.Errorf("queries for a name of ndots dots = %d, want 2 (the name first, and it answers)", got)
	}
}

// resolver answers from a table, as the client pod's resolver would; names missing fail as
// NXDOMAIN does. calls counts the lookups.
type resolver struct {
	records map[string][]string // "TYPE NAME"
	calls   int
}

func (r *resolver) Lookup(_ context.Context, qtype, name string) ([]string, error) {
	r.calls++
	rrs, ok := r.records[qtype+" "+name]
	if !ok {
		return nil, errors.New("lookup " + name + ": no such host")
	}
	return rrs, nil
}

func (r *resolver) ResolvConf(context.Context) (string, error) { return kubeletConf, nil }

var fx = &fixtures{Namespace: "doc", ClusterIPs: []string{"10.96.5.5", "fd00::5"}, PodIP: "10.244.0.9", Client: clientName}

var front = dnsService{Namespace: "kube-system", Name: "kube-dns", ClusterIPs: []string{"10.96.0.10"}, Ready: 2}

// conformant is what a DNS that follows the specification answers for fx.
func conformant() *resolver {
	web, host := "web.doc.svc.cluster.local.", "h1.hl.doc.svc.cluster.local."
	return &resolver{records: map[string][]string{
		"txt dns-version.cluster.local.":            {"1.1.0"},
		"a kube-dns.kube-system.svc.cluster.local.": {"10.96.0.10"},
		"a " + web:                    {"fd00::5", "10.96.5.5"},
		"a web":                       {"10.96.5.5", "fd00::5"},
		"a web.doc":                   {"10.96.5.5", "fd00::5"},
		"srv _http._tcp." + web:       {"0 100 80 " + web},
		"srv _syslog._udp." + web:     {"0 100 514 " + web},
		"a hl.doc.svc.cluster.local.": {"10.244.0.9"},
		"a " + host:                   {"10.244.0.9"},
		"a h1.hl":                     {"10.244.0.9"},
		"srv _http._tcp.hl.doc.svc.cluster.local.": {"0 100 80 " + host},
		"ptr 10.244.0.9":                   {host},
		"cname ext.doc.svc.cluster.local.": {web},
		"ptr 10.96.5.5":                    {web},
		"ptr fd00::5":                      {web},
	}}
}

func TestEveryRecordFormPassesOnAConformantDNS(t *testing.T) {
	r := conformant()
	ls := lookups(fx, "cluster.local", front)
	if len(ls) != len(r.records) {
		t.Errorf("%d lookups for %d record forms", len(ls), len(r.records))
	}
	for _, l := range ls {
		if c := ask(bg, r, l, time.Now()); !c.Pass {
			t.Errorf("%s (%s): %s", c.Name, c.Query, c.Detail)
		}
	}
	if r.calls != len(ls) {
		t.Errorf("%d lookups made, want %d: one each when the first answer is right", r.calls, len(ls))
	}
}

func TestAWrongAnswerFailsWithTheSection(t *testing.T) {
	r := conformant()
	r.records["srv _http._tcp.hl.doc.svc.cluster.local."] = []string{"0 100 80 10-244-0-9.hl.doc.svc.cluster.local."} // the hostname ignored
	delete(r.records, "ptr 10.244.0.9")
	var failed []Check
	for _, l := range lookups(fx, "cluster.local", front) {
		if c := ask(bg, r, l, time.Now()); !c.Pass {
			failed = append(failed, c)
		}
	}
	if len(failed) != 2 {
		t.Fatalf("%d checks failed, want 2: %+v", len(failed), failed)
	}
	if c := failed[0]; c.Section != specHeadSRV || !strings.Contains(c.Detail, "got 80 10-244-0-9.hl.doc.svc.cluster.local., want 80 h1.hl.doc.svc.cluster.local.") {
		t.Errorf("headless SRV: %+v", c)
	}
	if c := failed[1]; c.Section != specHeadPTR || !strings.Contains(c.Detail, "no such host") {
		t.Errorf("headless PTR: %+v", c)
	}
}

// TestAskWaitsForTheDNSToLearn: an answer that is wrong at first (the watch has not delivered
// the fixture yet) is asked again until it is right.
func TestAskWaitsForTheDNSToLearn(t *testing.T) {
	askAgainAfter = time.Millisecond
	defer func() { askAgainAfter = 2 * time.Second }()
	r := &late{right: 2}
	c := ask(bg, r, lookup{name: "n", qtype: "a", qname: "web", want: []string{"10.96.5.5"}}, time.Now().Add(time.Hour))
	if !c.Pass || r.calls != 3 {
		t.Errorf("check %+v after %d lookups, want a pass at the third", c, r.calls)
	}
}

type late struct{ right, calls int }

func (l *late) Lookup(context.Context, string, string) ([]string, error) {
	if l.calls++; l.calls > l.right {
		return []string{"10.96.5.5"}, nil
	}
	return nil, errors.New("no such host")
}

func (l *late) ResolvConf(context.Context) (string, error) { return "", nil }

func TestConfChecks(t *testing.T) {
	checks := confChecks(kubeletConf, "doc", "cluster.local", "10.96.0.10")
	if len(checks) != 2 || !checks[0].Pass || !checks[1].Info || !strings.HasPrefix(checks[1].Detail, "10 queries") {
		t.Errorf("confChecks = %+v, want resolv.conf passing and the cost of an external lookup (10 queries)", checks)
	}
	if !passed(checks) {
		t.Error("a measurement failed the run")
	}
}

func TestADNSScaledToZeroFails(t *testing.T) {
	c := frontCheck(dnsService{Namespace: "kube-system", Name: "kube-dns", ClusterIPs: []string{"10.96.0.10"}})
	if c.Pass || !strings.Contains(c.Detail, "scaled to zero") {
		t.Errorf("frontCheck with no ready endpoint = %+v", c)
	}
}

func TestFindDNSCountsReadyEndpoints(t *testing.T) {
	yes, no := true, false
	svc := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Spec: api.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}}}
	slice := &discovery.EndpointSlice{
		ObjectMeta: meta.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-1", Labels: map[string]string{discovery.LabelServiceName: "kube-dns"}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.0.2"}, Conditions: discovery.EndpointConditions{Ready: &yes}},
			{Addresses: []string{"10.244.0.3"}, Conditions: discovery.EndpointConditions{Ready: &no}},
		},
	}
	d, err := findDNS(bg, fake.NewClientset(svc, slice), replica.DefaultService)
	if err != nil || d.Ready != 1 || !slices.Equal(d.ClusterIPs, []string{"10.96.0.10"}) {
		t.Errorf("findDNS = %+v, %v; want 10.96.0.10 with 1 ready endpoint", d, err)
	}
	if _, err := findDNS(bg, fake.NewClientset(), replica.DefaultService); err == nil || !strings.Contains(err.Error(), "--dns-service") {
		t.Errorf("findDNS without the Service: %v", err)
	}
}

// TestSRVPriorityAndWeightAreTheImplementations: the specification fixes an SRV record's port and
// target; the in-tree plugin's two records of weight 50 for a dual-stack service pass as one.
func TestSRVPriorityAndWeightAreTheImplementations(t *testing.T) {
	r := conformant()
	web := "web.doc.svc.cluster.local."
	r.records["srv _http._tcp."+web] = []string{"0 50 80 " + web, "0 50 80 " + web}
	l := lookups(fx, "cluster.local", front)[5]
	if c := ask(bg, r, l, time.Now()); !c.Pass || c.Detail != "80 "+web {
		t.Errorf("%s: %+v, want a pass", l.qname, c)
	}
	r.records["srv _http._tcp."+web] = []string{"0 100 8080 " + web}
	if c := ask(bg, r, l, time.Now()); c.Pass {
		t.Errorf("%s on another port: %+v, want a failure", l.qname, c)
	}
}

// TestACacheThatFailsWhereTheClusterDNSAnswers: behind NodeLocal DNSCache, lookups that fail
// through the cache but not at the cluster DNS blame the cache; lookups that fail at both do not.
func TestACacheThatFailsWhereTheClusterDNSAnswers(t *testing.T) {
	ls := lookups(fx, "cluster.local", front)
	blocked := &resolver{records: map[string][]string{}} // the cache, its upstream blocked: nothing answers
	var checks []Check
	for _, l := range ls {
		checks = append(checks, ask(bg, blocked, l, time.Now()))
	}
	c := cacheCheck(bg, checks, ls, conformant(), "169.254.20.10", "10.96.0.10")
	if c.Pass || !strings.HasPrefix(c.Detail, "15 lookups fail through the cache at 169.254.20.10 that the cluster DNS at 10.96.0.10 answers (dns-version.cluster.local., kube-dns.kube-system.svc.cluster.local., web.doc.svc.cluster.local. and 12 more)") ||
		!strings.Contains(c.Detail, "the cache's upstream is blocked, or the cache is down") {
		t.Errorf("cache blocked: %+v", c)
	}
	c = cacheCheck(bg, checks, ls, blocked, "169.254.20.10", "10.96.0.10")
	if !c.Pass || !strings.Contains(c.Detail, "fail at the cluster DNS at 10.96.0.10 too") {
		t.Errorf("cluster DNS failing too: %+v, want no blame on the cache", c)
	}
}
