package kubetree

import (
	"context"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestAuditRepairsMissedEvents: watches that silently drop an event (an update, an add, a delete)
// leave the informer stale; one audit finds each, repairs it through the same handlers, counts one
// repair per missed event, and touches nothing else.
func TestAuditRepairsMissedEvents(t *testing.T) {
	const (
		web  = "web.prod.svc.cluster.local."
		db   = "db.prod.svc.cluster.local."
		gone = "gone.prod.svc.cluster.local."
		born = "born.prod.svc.cluster.local."
	)
	port := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432))
	c := startCluster(t, testZones, k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}),
		k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"}),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.9.1"}}))
	repairs := func(resource string) float64 {
		return testutil.ToFloat64(auditRepairs.WithLabelValues(c.applier.metrics.server, c.applier.metrics.zones, resource))
	}
	ctx := context.Background()
	if n, err := c.w.audit(ctx); n != 0 || err != nil {
		t.Fatalf("an audit of a cluster in step repaired %d (%v)", n, err)
	}

	// The watches lose every event for a while: an endpoint moves, a service comes, one goes.
	c.api.loseAll.Store(true)
	c.update(t, k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.9.2"}}))
	c.create(t, k8stest.ClusterIPService("prod", "born", []string{"10.0.0.3"}))
	c.remove(t, k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"}))
	waitFor(t, "the three events to be lost", func() bool { return c.api.lost.Load() >= 3 })
	c.api.loseAll.Store(false)
	c.barrier(t)
	c.expect(t, db, dns.TypeA, okay, recA(db, "10.0.9.1")) // stale: the watch missed it
	c.nx(t, born)

	n, err := c.w.audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.barrier(t)
	if n != 3 || repairs("endpointslices") != 1 || repairs("services") != 2 {
		t.Errorf("repairs: %d in all, %v slices, %v services; want 3, 1, 2", n, repairs("endpointslices"), repairs("services"))
	}
	c.expect(t, db, dns.TypeA, okay, recA(db, "10.0.9.2"))
	c.expect(t, born, dns.TypeA, okay, recA(born, "10.0.0.3"))
	c.nx(t, gone)
	c.expect(t, web, dns.TypeA, okay, recA(web, "10.0.0.1"))

	// In step again: the next audit repairs nothing.
	if n, err := c.w.audit(ctx); n != 0 || err != nil {
		t.Errorf("a second audit repaired %d (%v)", n, err)
	}
}
