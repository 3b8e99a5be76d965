package ops

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	promql "github.com/prometheus/prometheus/promql/parser"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// A metric kind decides which series names a metric has: a histogram's are its name with _bucket,
// _sum and _count.
type kind int

const (
	plain kind = iota
	histogram
)

// coreDNSMetrics are the series of CoreDNS v1.15.0 (plugin/metrics: the server's own), of the
// plugins the deploy/ Corefile runs, and of the Go and process collectors that CoreDNS's
// prometheus plugin registers (client_golang v1.24: its defaults). Only what the dashboard and
// the rules may reasonably use; add a name here when a panel needs it, after checking CoreDNS
// exports it.
var coreDNSMetrics = map[string]kind{
	"coredns_build_info":                       plain,
	"coredns_panics_total":                     plain,
	"coredns_plugin_enabled":                   plain,
	"coredns_dns_requests_total":               plain,
	"coredns_dns_responses_total":              plain,
	"coredns_dns_request_duration_seconds":     histogram,
	"coredns_dns_request_size_bytes":           histogram,
	"coredns_dns_response_size_bytes":          histogram,
	"coredns_cache_entries":                    plain,
	"coredns_cache_hits_total":                 plain,
	"coredns_cache_misses_total":               plain,
	"coredns_cache_requests_total":             plain,
	"coredns_forward_requests_total":           plain,
	"coredns_forward_responses_total":          plain,
	"coredns_forward_request_duration_seconds": histogram,
	"coredns_health_request_duration_seconds":  histogram,
	"coredns_reload_failed_total":              plain,

	"go_goroutines":                 plain,
	"go_threads":                    plain,
	"go_info":                       plain,
	"go_gc_duration_seconds":        plain, // a summary: quantile label, _sum, _count
	"go_gc_duration_seconds_sum":    plain,
	"go_gc_duration_seconds_count":  plain,
	"go_gc_gogc_percent":            plain,
	"go_gc_gomemlimit_bytes":        plain,
	"go_sched_gomaxprocs_threads":   plain,
	"go_memstats_alloc_bytes":       plain,
	"go_memstats_heap_alloc_bytes":  plain,
	"go_memstats_heap_inuse_bytes":  plain,
	"go_memstats_heap_idle_bytes":   plain,
	"go_memstats_heap_sys_bytes":    plain,
	"go_memstats_sys_bytes":         plain,
	"go_memstats_next_gc_bytes":     plain,
	"go_memstats_heap_objects":      plain,
	"go_memstats_alloc_bytes_total": plain,
	"go_memstats_mallocs_total":     plain,
	"go_memstats_frees_total":       plain,

	"process_cpu_seconds_total":     plain,
	"process_resident_memory_bytes": plain,
	"process_virtual_memory_bytes":  plain,
	"process_open_fds":              plain,
	"process_max_fds":               plain,
	"process_start_time_seconds":    plain,
}

// clusterMetrics come from the cluster's own exporters, not from kubetree: cAdvisor (through the
// kubelet) and kube-state-metrics. Only the alerting rules may use them.
var clusterMetrics = map[string]kind{
	"container_memory_working_set_bytes": plain,
	"kube_pod_container_resource_limits": plain,
}

// pendingMetrics are kubetree metrics that the rules and the dashboard already use but metrics.go
// does not define yet. Once it does, TestPendingMetricsStillPending fails: take the name out.
var pendingMetrics = map[string]kind{
	// Empty: coredns_kubetree_dns_programming_duration_seconds was here until metrics.go defined it.
}

// kubetreeMetrics reads the metrics kubetree defines from internal/metrics/metrics.go: every
// prometheus.{Counter,Gauge,Histogram,Summary}Opts literal, its name made of Namespace, Subsystem
// and Name as client_golang does. A metric renamed there changes what the tests accept.
func kubetreeMetrics(t *testing.T) map[string]kind {
	t.Helper()
	consts := metricsConstants(t)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(metricsDir, "metrics.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]kind{}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
			return true
		}
		parts := map[string]string{}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key := kv.Key.(*ast.Ident).Name
			if key != "Namespace" && key != "Subsystem" && key != "Name" {
				continue
			}
			v, err := stringValue(kv.Value, consts)
			if err != nil {
				t.Fatalf("%s: %s: %v", fset.Position(kv.Pos()), key, err)
			}
			parts[key] = v
		}
		var name []string
		for _, k := range []string{"Namespace", "Subsystem", "Name"} {
			if parts[k] != "" {
				name = append(name, parts[k])
			}
		}
		k := plain
		if sel.Sel.Name == "HistogramOpts" {
			k = histogram
		}
		found[strings.Join(name, "_")] = k
		return true
	})
	if len(found) == 0 {
		t.Fatal("no metric definitions found in metrics.go")
	}
	return found
}

// metricsDir is the package that defines every kubetree metric.
var metricsDir = filepath.Join(root, "internal", "metrics")

// metricsConstants are the metrics package's string constants, and CoreDNS's plugin.Namespace.
func metricsConstants(t *testing.T) map[string]string {
	t.Helper()
	consts := map[string]string{"plugin.Namespace": "coredns"}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(metricsDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[n.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return consts
}

func stringValue(e ast.Expr, consts map[string]string) (string, error) {
	switch v := e.(type) {
	case *ast.BasicLit:
		return strconv.Unquote(v.Value)
	case *ast.Ident:
		if s, ok := consts[v.Name]; ok {
			return s, nil
		}
	case *ast.SelectorExpr:
		if x, ok := v.X.(*ast.Ident); ok {
			if s, ok := consts[x.Name+"."+v.Sel.Name]; ok {
				return s, nil
			}
		}
	}
	return "", fmt.Errorf("not a string this test can resolve: %T", e)
}

// known is the set of metrics an expression may name, with their kinds.
func known(sets ...map[string]kind) map[string]kind {
	all := map[string]kind{}
	for _, s := range sets {
		for n, k := range s {
			all[n] = k
		}
	}
	return all
}

// exports says whether a series name belongs to a known metric.
func exports(metrics map[string]kind, name string) bool {
	if _, ok := metrics[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && metrics[base] == histogram {
			return true
		}
	}
	return false
}

// grafanaVariables are the dashboard's variables and Grafana's own, replaced by something PromQL
// parses before the expression is parsed.
var grafanaVariables = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range)\}?|\$\{?[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\}?`)

// metricNames parses a PromQL expression (with Grafana's variables in it) and returns the metric
// names of its selectors. A selector without a metric name is an error: the test could not tell
// what it reads.
func metricNames(expr string) ([]string, error) {
	expr = grafanaVariables.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__") {
			return "5m"
		}
		return "x"
	})
	e, err := promql.NewParser(promql.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	promql.Inspect(e, func(n promql.Node, _ []promql.Node) error {
		vs, ok := n.(*promql.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s names no metric", vs)
		}
		names = append(names, name)
		return nil
	})
	sort.Strings(names)
	return names, bad
}

func TestKubetreeMetricsFromMetricsGo(t *testing.T) {
	got := kubetreeMetrics(t)
	// The ones the README documents; if this fails, metrics.go and the README (and the dashboard
	// and rules) need to move together.
	for _, name := range []string{
		"coredns_kubetree_services", "coredns_kubetree_synced", "coredns_kubetree_apply_duration_seconds",
		"coredns_kubetree_api_errors_total", "coredns_kubetree_rejected_total",
		"coredns_kubetree_probes_total", "coredns_kubetree_probe_duration_seconds",
	} {
		if _, ok := got[name]; !ok {
			t.Errorf("metrics.go does not define %s (found %v)", name, got)
		}
	}
	for _, name := range []string{"coredns_kubetree_apply_duration_seconds", "coredns_kubetree_probe_duration_seconds"} {
		if got[name] != histogram {
			t.Errorf("%s is not read as a histogram", name)
		}
	}
}

func TestPendingMetricsStillPending(t *testing.T) {
	defined := kubetreeMetrics(t)
	for name := range pendingMetrics {
		if _, ok := defined[name]; ok {
			t.Errorf("%s is now defined in metrics.go: remove it from pendingMetrics", name)
		}
	}
}

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`sum by (rcode) (rate(coredns_dns_responses_total{job=~"$job"}[$__rate_interval]))`, []string{"coredns_dns_responses_total"}},
		{`a / on (x) b and c`, []string{"a", "b", "c"}},
		{`{__name__="up"}`, []string{"up"}},
		{`max(go_gc_gomemlimit_bytes{instance=~"${instance}"} < 1e18)`, []string{"go_gc_gomemlimit_bytes"}},
	}
	for _, tc := range tests {
		got, err := metricNames(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: got %v, want %v", tc.expr, got, tc.want)
		}
	}
	if _, err := metricNames(`{job="x"}`); err == nil {
		t.Error("a selector without a metric name was accepted")
	}
}
