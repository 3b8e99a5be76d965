package plugin_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestApplierPublishesAndTakesAway follows services through the one write path without a watcher:
// what is applied answers in every forward zone and in the reverse zone, what is taken away leaves
// nothing behind, and the services gauge counts what has a name.
func TestApplierPublishesAndTakesAway(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local other.local 10.in-addr.arpa {\n\tpods insecure\n}")
	k.SyncedFlag.Store(true)
	emptySize, emptyReverse := k.Tree.Size(), k.Reverse.Sizes()
	k.Metrics.Claim() // as the watcher's start does: the gauges are this instance's
	t.Cleanup(k.Metrics.Release)
	services := func() float64 { return gaugeValue(t, "coredns_kubetree_services", k.Metrics.Server) }

	a.ApplyNamespace("prod", true)
	web, webSlices := plugintest.Slim(t, k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}, k8stest.TCP("http", 80)), nil, false)
	db, dbSlices := plugintest.Slim(t, k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)), []*discovery.EndpointSlice{
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)), k8stest.Endpoint{Addrs: []string{"10.1.0.1"}, Hostname: "db-0"}),
	}, false)
	a.ApplyService(web.Key(), web, webSlices, true)
	a.ApplyService(db.Key(), db, dbSlices, true)
	for _, z := range []string{"cluster.local.", "other.local."} {
		plugintest.Expect(t, k, "web.prod.svc."+z, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("web.prod.svc."+z, "10.0.0.1"))
		plugintest.Expect(t, k, "db-0.db.prod.svc."+z, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("db-0.db.prod.svc."+z, "10.1.0.1"))
	}
	plugintest.Expect(t, k, "1.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("1.0.0.10.in-addr.arpa.", "web.prod.svc.cluster.local."))
	plugintest.Expect(t, k, "1.0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("1.0.1.10.in-addr.arpa.", "db-0.db.prod.svc.cluster.local."))
	plugintest.Expect(t, k, "10-1-0-9.prod.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-1-0-9.prod.pod.cluster.local.", "10.1.0.9"))
	if got := services(); got != 2 {
		t.Errorf("services gauge = %v, want 2", got)
	}

	// Applied again unchanged: still two services.
	a.ApplyService(web.Key(), web, webSlices, true)
	if got := services(); got != 2 {
		t.Errorf("services gauge after an unchanged apply = %v, want 2", got)
	}

	// A namespace that is not exposed takes its services' names away, though their objects remain.
	a.ApplyService(db.Key(), db, dbSlices, false)
	plugintest.Expect(t, k, "db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError)
	plugintest.Expect(t, k, "1.0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError)

	a.ApplyService(web.Key(), nil, nil, true)
	a.ApplyNamespace("prod", false)
	plugintest.Expect(t, k, "web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError)
	plugintest.Expect(t, k, "10-1-0-9.prod.pod.cluster.local.", dns.TypeA, dns.RcodeNameError)
	if got := services(); got != 0 {
		t.Errorf("services gauge = %v after every service left, want 0", got)
	}
	if k.Tree.Size() != emptySize || k.Reverse.Sizes() != emptyReverse {
		t.Errorf("names left behind: %d names, reverse %v; empty was %d, %v", k.Tree.Size(), k.Reverse.Sizes(), emptySize, emptyReverse)
	}
}

// gaugeValue is the value of the gauge name of server block server, as a scrape reads it.
func gaugeValue(t *testing.T, name, server string) float64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "server" && l.GetValue() == server {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
