package ops

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

type dashboardPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row holds its panels
}

type dashboard struct {
	UID        string           `json:"uid"`
	Title      string           `json:"title"`
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// labelValues is Grafana's variable query label_values(SELECTOR, LABEL) (or (LABEL) alone).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)

// dashboardExpressions returns every PromQL expression in the dashboard: the panels' targets
// (rows included) and the variables' label_values selectors, each with where it is.
func dashboardExpressions(t *testing.T, d dashboard) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q target %s has no expression", p.Title, tg.RefID)
					continue
				}
				exprs["panel "+p.Title+" target "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		// Grafana writes a variable's query as a string (older) or an object with a query field.
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("variable %s: query: %v", v.Name, err)
			}
			q = obj.Query
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q))
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, q)
			continue
		}
		exprs["variable "+v.Name] = m[1]
	}
	return exprs
}

// TestDashboardNamesKnownMetrics: the dashboard parses, and every expression in it parses as
// PromQL and reads only metrics that kubetree (as internal/metrics/metrics.go defines them today, or pending),
// CoreDNS, Go or the process export. A metric renamed in internal/metrics/metrics.go fails here.
func TestDashboardNamesKnownMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard needs a uid and a title (got %q, %q)", d.UID, d.Title)
	}
	metrics := known(kubetreeMetrics(t), pendingMetrics, coreDNSMetrics)
	exprs := dashboardExpressions(t, d)
	used := map[string]bool{}
	for where, expr := range exprs {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
			continue
		}
		for _, n := range names {
			used[n] = true
			if !exports(metrics, n) {
				t.Errorf("%s reads %s, which neither kubetree nor CoreDNS exports", where, n)
			}
		}
	}
	// What the issue asks the dashboard to show.
	for _, n := range []string{
		"coredns_dns_responses_total", "coredns_dns_request_duration_seconds_bucket",
		"coredns_kubetree_synced", "coredns_kubetree_services",
		"coredns_kubetree_dns_programming_duration_seconds_bucket", "coredns_kubetree_api_errors_total",
		"coredns_kubetree_rejected_total", "process_resident_memory_bytes",
	} {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}

// TestDashboardCheckCatchesUnknownMetrics: the check above fails on a name nobody exports, and
// on a kubetree metric internal/metrics/metrics.go does not define.
func TestDashboardCheckCatchesUnknownMetrics(t *testing.T) {
	metrics := known(kubetreeMetrics(t), pendingMetrics, coreDNSMetrics)
	for _, expr := range []string{
		`rate(coredns_kubetree_api_error_total[5m])`,
		`coredns_kubernetes_dns_programming_duration_seconds_bucket`,
		`container_memory_working_set_bytes`,
		`coredns_kubetree_services_bucket`,
	} {
		names, err := metricNames(expr)
		if err != nil {
			t.Fatal(err)
		}
		if exports(metrics, names[0]) {
			t.Errorf("%s was accepted", expr)
		}
	}
}
