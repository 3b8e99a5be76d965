package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubetree/kubetree/internal/explainapi"
)

func TestDumpFilter(t *testing.T) {
	for _, c := range []struct {
		ns, glob, name string
		keep           bool
	}{
		{"", "", "cluster.local.", true},
		{"shop", "", "web.shop.svc.cluster.local.", true},
		{"shop", "", "_http._tcp.web.shop.svc.cluster.local.", true},
		{"shop", "", "h1.hl.shop.svc.cluster.local.", true},
		{"shop", "", "10-0-0-1.shop.pod.cluster.local.", true},
		{"shop", "", "web.other.svc.cluster.local.", false},
		{"shop", "", "dns-version.cluster.local.", false},
		{"svc", "", "web.svc.svc.cluster.local.", true}, // a namespace named svc
		{"", "*.kube-system.svc.cluster.local", "kube-dns.kube-system.svc.cluster.local.", true},
		{"", "*.kube-system.svc.cluster.local", "web.shop.svc.cluster.local.", false},
		{"shop", "web.*", "web.shop.svc.cluster.local.", true},
		{"shop", "web.*", "_http._tcp.web.shop.svc.cluster.local.", false},
	} {
		if got := filter(c.ns, c.glob)(c.name); got != c.keep {
			t.Errorf("filter(%q, %q)(%s) = %v, want %v", c.ns, c.glob, c.name, got, c.keep)
		}
	}
}

func explanation(rv string, answer string) *explainapi.Explanation {
	return &explainapi.Explanation{
		Name: "web.shop.svc.cluster.local.", Type: "A", Rcode: "NOERROR", Reason: explainapi.ReasonService, Why: "a ClusterIP service",
		Answer: []string{"web.shop.svc.cluster.local.\t30\tIN\tA\t" + answer},
		From:   []explainapi.Object{{Kind: "Service", Namespace: "shop", Name: "web", ResourceVersion: rv}},
	}
}

func printed(t *testing.T, all bool, res explainResult) string {
	t.Helper()
	var out bytes.Buffer
	e := &explainOptions{options: &options{streams: genericiooptions.IOStreams{Out: &out}}, all: all}
	if err := e.print(res); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestExplainPrintsTheAgreedAnswerOnce(t *testing.T) {
	out := printed(t, false, explainResult{Replicas: []replicaAnswer{
		{Pod: "kubetree-a", Explanation: explanation("7", "10.0.0.1")},
		{Pod: "kubetree-b", Explanation: explanation("7", "10.0.0.1")},
	}})
	for _, want := range []string{
		"REPLICA   QUERY                           RCODE     ANSWER       REASON",
		"2 agree   web.shop.svc.cluster.local. A   NOERROR   A 10.0.0.1   service",
		"Why: a ClusterIP service",
		"KIND      NAMESPACE   NAME   RESOURCEVERSION",
		"Service   shop        web    7",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "kubetree-a") || strings.Contains(out, "disagree") {
		t.Errorf("replicas that agree print one row:\n%s", out)
	}
}

func TestExplainPrintsEveryReplicaWhereTheyDisagree(t *testing.T) {
	res := explainResult{
		Replicas: []replicaAnswer{
			{Pod: "kubetree-a", Explanation: explanation("9", "10.0.0.2")},
			{Pod: "kubetree-b", Explanation: explanation("7", "10.0.0.1")},
		},
		Disagreements: []string{"kubetree-b answers NOERROR ... from Service shop/web@7; kubetree-a answers ... @9"},
	}
	out := printed(t, false, res)
	for _, want := range []string{"kubetree-a   web.shop.svc.cluster.local. A", "A 10.0.0.2", "kubetree-b", "A 10.0.0.1", "Replicas disagree: kubetree-b answers"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
}

func TestFormats(t *testing.T) {
	for _, f := range []string{"", "json", "yaml"} {
		if err := checkFormat(f); err != nil {
			t.Errorf("checkFormat(%q) = %v", f, err)
		}
	}
	if err := checkFormat("wide"); err == nil || !strings.Contains(err.Error(), "json and yaml") {
		t.Errorf("checkFormat(wide) = %v, want the formats named", err)
	}
	var out bytes.Buffer
	if err := printData(&out, formatYAML, explainResult{Replicas: []replicaAnswer{{Pod: "kubetree-a", Error: "refused"}}}); err != nil {
		t.Fatal(err)
	}
	if want := "replicas:\n- error: refused\n  pod: kubetree-a\n"; out.String() != want {
		t.Errorf("yaml:\n%s\nwant\n%s", out.String(), want)
	}
}

// TestReadsOf: explaining a name takes get of kubetree's names in --from's namespace and in the
// name's, as kubetree asks of a caller off loopback; a name of no namespace asked without --from
// takes it cluster-wide.
func TestReadsOf(t *testing.T) {
	for _, tc := range []struct {
		name, from string
		want       []string
	}{
		{"web.shop.svc.cluster.local", "", []string{"get names.kubetree.io in namespace shop"}},
		{"web.shop.svc.cluster.local.", "shop", []string{"get names.kubetree.io in namespace shop"}},
		{"db-0.db.bank.svc.cluster.local", "shop", []string{"get names.kubetree.io in namespace shop", "get names.kubetree.io in namespace bank"}},
		{"10-0-0-1.shop.pod.cluster.local", "", []string{"get names.kubetree.io in namespace shop"}},
		{"www.example.org", "shop", []string{"get names.kubetree.io in namespace shop"}},
		{"dns-version.cluster.local", "", []string{"get names.kubetree.io cluster-wide"}},
	} {
		var got []string
		for _, p := range readsOf(tc.name, tc.from) {
			got = append(got, p.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s from %q: %q, want %q", tc.name, tc.from, got, tc.want)
		}
	}
}
