// Package ops holds the tests of what kubetree ships besides the plugin: the alerting rules and
// their PrometheusRule, the Grafana dashboard and the Helm values for the CoreDNS chart
// (deploy/monitoring, deploy/helm). `make ops-test` runs them with the tools they need.
package ops
