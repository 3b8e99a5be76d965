// Package ops holds the tests of what kubetree ships besides the plugin: the alerting rules and
// their PrometheusRule, the Grafana dashboard and the Helm values for the CoreDNS chart
// (deploy/monitoring, deploy/helm). `make ops-test` (in make test) runs those that need no tool;
// `make ops-tools` builds promtool and helm, runs the rest and records the run in ops-tools.txt,
// which TestOpsToolsRunIsCurrent holds against the files it checked.
package ops
