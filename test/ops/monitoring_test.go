package ops

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "write deploy/monitoring/prometheusrule.yaml from kubetree.rules.yaml")

var (
	rulesFile          = filepath.Join(root, "deploy/monitoring/kubetree.rules.yaml")
	prometheusRuleFile = filepath.Join(root, "deploy/monitoring/prometheusrule.yaml")
	dashboardFile      = filepath.Join(root, "deploy/monitoring/kubetree-dashboard.json")
)

// ruleGroups is the part of a Prometheus rules file the tests read; the rest is kept as it is.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert,omitempty"`
			Record string `json:"record,omitempty"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

const prometheusRuleHeader = `# GENERATED from kubetree.rules.yaml by ` + "`make monitoring`" + `; edit that file, not this one.
# The same alerting rules as a PrometheusRule for the Prometheus Operator. The operator's
# Prometheus picks it up when its ruleSelector matches these labels (kube-prometheus-stack's
# default selects release=<its release name>: add that label, or set ruleSelector).
`

// prometheusRule wraps the rules file's groups, unchanged, in a PrometheusRule.
func prometheusRule(t *testing.T, rules []byte) []byte {
	t.Helper()
	var groups map[string]any
	if err := yaml.Unmarshal(rules, &groups); err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":      "kubetree",
			"namespace": "kube-system",
			"labels":    map[string]any{"app.kubernetes.io/name": "kubetree"},
		},
		"spec": groups,
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(prometheusRuleHeader), out...)
}

// TestPrometheusRuleMatchesRulesFile: prometheusrule.yaml is exactly what kubetree.rules.yaml
// makes (byte for byte), and its spec holds the same groups. `go test -update` (make monitoring)
// writes it.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	want := prometheusRule(t, rules)
	if *update {
		if err := os.WriteFile(prometheusRuleFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what %s makes: run `make monitoring`", prometheusRuleFile, rulesFile)
	}

	var plain map[string]any
	var wrapped struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Spec       map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(rules, &plain); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(got, &wrapped); err != nil {
		t.Fatal(err)
	}
	if wrapped.APIVersion != "monitoring.coreos.com/v1" || wrapped.Kind != "PrometheusRule" {
		t.Errorf("kind %s/%s, want monitoring.coreos.com/v1 PrometheusRule", wrapped.APIVersion, wrapped.Kind)
	}
	if !reflect.DeepEqual(plain, wrapped.Spec) {
		t.Errorf("the PrometheusRule's spec differs from the rules file")
	}
}

// TestRulesNameKnownMetrics: every alert expression parses and reads only metrics that kubetree
// (metrics.go, or pending), CoreDNS, Go, the process, cAdvisor or kube-state-metrics export; and
// the alerts the issue asks for are there.
func TestRulesNameKnownMetrics(t *testing.T) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleGroups
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	metrics := known(kubetreeMetrics(t), pendingMetrics, coreDNSMetrics, clusterMetrics)
	alerts := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = r.Expr
			names, err := metricNames(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			for _, n := range names {
				if !exports(metrics, n) {
					t.Errorf("%s reads %s, which nothing we know exports", r.Alert, n)
				}
			}
		}
	}
	for alert, metric := range map[string]string{
		"KubetreeNotSynced":                 "coredns_kubetree_synced",
		"KubetreeAPIErrors":                 "coredns_kubetree_api_errors_total",
		"KubetreeRejectedObjects":           "coredns_kubetree_rejected_total",
		"KubetreeAuditRepairs":              "coredns_kubetree_audit_repairs_total",
		"KubetreeMemoryNearLimit":           "container_memory_working_set_bytes",
		"KubetreeDNSProgrammingLatencyHigh": "coredns_kubetree_dns_programming_duration_seconds_bucket",
	} {
		if !strings.Contains(alerts[alert], metric) {
			t.Errorf("alert %s on %s is missing", alert, metric)
		}
	}
}
