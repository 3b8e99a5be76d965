package kubetree

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
		return testutil.ToFloat64(c.k.metrics.Repairs(resource))
	}
	ctx := context.Background()
	if n, err := c.w.Audit(ctx); n != 0 || err != nil {
		t.Fatalf("an audit of a cluster in step repaired %d (%v)", n, err)
	}

	// The watches lose every event for a while: an endpoint moves, a service comes, one goes.
	c.api.LoseAll.Store(true)
	c.update(t, k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.9.2"}}))
	c.create(t, k8stest.ClusterIPService("prod", "born", []string{"10.0.0.3"}))
	c.remove(t, k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"}))
	waitFor(t, "the three events to be lost", func() bool { return c.api.Lost.Load() >= 3 })
	c.api.LoseAll.Store(false)
	c.barrier(t)
	c.expect(t, db, dns.TypeA, okay, recA(db, "10.0.9.1")) // stale: the watch missed it
	c.nx(t, born)

	n, err := c.w.Audit(ctx)
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
	if n, err := c.w.Audit(ctx); n != 0 || err != nil {
		t.Errorf("a second audit repaired %d (%v)", n, err)
	}
}

// TestAuditFetchesOnlyWhatDiffers: the audit lists names and versions only, and fetches in full
// just the objects whose version differs from the informer's, or that one side lacks. An object
// changed only where DNS does not look is fetched and compared, not repaired, and stored, so that
// the next audit does not fetch it again. In step, nothing is fetched, also with a label selector
// that leaves objects out.
func TestAuditFetchesOnlyWhatDiffers(t *testing.T) {
	const (
		web  = "web.prod.svc.cluster.local."
		db   = "db.prod.svc.cluster.local."
		gone = "gone.prod.svc.cluster.local."
		born = "born.prod.svc.cluster.local."
	)
	port := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432))
	dbSlice := func(ip string) *discovery.EndpointSlice {
		return k8stest.WithLabels(k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{ip}}), "app", "dns")
	}
	webService := func() *api.Service {
		return k8stest.WithLabels(k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}), "app", "dns")
	}
	for _, tc := range []struct {
		name    string
		stanza  string
		missed  func(c *testCluster) // changes the watches lose
		lost    int64                // events they lose
		fetched []string             // "resource ns/name"
		repairs int
		after   func(c *testCluster) // what DNS answers after the audit
	}{
		{
			name:  "in step",
			after: func(c *testCluster) { c.expect(t, web, dns.TypeA, okay, recA(web, "10.0.0.1")) },
		},
		{
			name:   "in step, with a label selector that leaves objects out",
			stanza: "kubetree cluster.local 10.in-addr.arpa {\n\tlabels app=dns\n}",
			after: func(c *testCluster) {
				c.expect(t, web, dns.TypeA, okay, recA(web, "10.0.0.1"))
				c.nx(t, gone)
			},
		},
		{
			name:    "changed only where DNS does not look: fetched, compared, not repaired",
			missed:  func(c *testCluster) { c.update(t, k8stest.WithLabels(webService(), "team", "payments")) },
			lost:    1,
			fetched: []string{"services prod/web"},
			after:   func(c *testCluster) { c.expect(t, web, dns.TypeA, okay, recA(web, "10.0.0.1")) },
		},
		{
			name:    "a missed update",
			missed:  func(c *testCluster) { c.update(t, dbSlice("10.0.9.2")) },
			lost:    1,
			fetched: []string{"endpointslices prod/db-1"},
			repairs: 1,
			after:   func(c *testCluster) { c.expect(t, db, dns.TypeA, okay, recA(db, "10.0.9.2")) },
		},
		{
			name:    "a missed add",
			missed:  func(c *testCluster) { c.create(t, k8stest.ClusterIPService("prod", "born", []string{"10.0.0.3"})) },
			lost:    1,
			fetched: []string{"services prod/born"},
			repairs: 1,
			after:   func(c *testCluster) { c.expect(t, born, dns.TypeA, okay, recA(born, "10.0.0.3")) },
		},
		{
			name:    "a missed delete",
			missed:  func(c *testCluster) { c.remove(t, k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"})) },
			lost:    1,
			fetched: []string{"services prod/gone"},
			repairs: 1,
			after:   func(c *testCluster) { c.nx(t, gone) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stanza := tc.stanza
			if stanza == "" {
				stanza = testZones
			}
			c := startCluster(t, stanza, k8stest.Namespace("prod"), webService(),
				k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"}),
				k8stest.WithLabels(k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)), "app", "dns"),
				dbSlice("10.0.9.1"))
			ctx := context.Background()
			if tc.missed != nil {
				c.api.LoseAll.Store(true)
				tc.missed(c)
				waitFor(t, "the events to be lost", func() bool { return c.api.Lost.Load() >= tc.lost })
				c.api.LoseAll.Store(false)
				c.barrier(t)
			}
			// The resources watched, with the label selector of each one's list and watch.
			selectors := map[string]string{"services": "", "endpointslices": "", "namespaces": ""}
			if sel := c.k.cfg.labelSelector; sel != nil {
				selectors["services"], selectors["endpointslices"] = selector(sel), selector(sel)
			}
			before := map[string]int{}
			for resource := range selectors {
				before[resource] = len(c.api.Versions.RequestsOf(resource))
			}
			mark := c.api.Actions()
			n, err := c.w.Audit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.barrier(t)
			fetched, full := c.api.ByNameSince(mark)
			if n != tc.repairs || !slices.Equal(fetched, tc.fetched) || full != 0 {
				t.Errorf("repaired %d, fetched %q, %d lists in full; want %d, %q, 0", n, fetched, full, tc.repairs, tc.fetched)
			}
			// One metadata-only list per resource with the informer's label selector, which the
			// API server serves from its watch cache, whole, as a consistent read: no
			// resourceVersion, no limit; and not compressed, which would cost the API server more
			// CPU than the audit's bytes are worth.
			for resource, labels := range selectors {
				reqs := c.api.Versions.RequestsOf(resource)[before[resource]:]
				if len(reqs) != 1 {
					t.Errorf("%s: %d metadata lists, want 1", resource, len(reqs))
					continue
				}
				q := reqs[0].Query
				if q.Has("resourceVersion") || q.Has("resourceVersionMatch") || q.Has("limit") || q.Has("continue") ||
					q.Get("labelSelector") != labels || reqs[0].Accept != k8stest.PartialListAccept || reqs[0].Encoding != "identity" {
					t.Errorf("%s: list with %v, Accept %q, Accept-Encoding %q; want labelSelector %q alone, Accept %q, Accept-Encoding identity",
						resource, q, reqs[0].Accept, reqs[0].Encoding, labels, k8stest.PartialListAccept)
				}
			}
			tc.after(c)

			// In step now: the next audit fetches nothing.
			mark = c.api.Actions()
			if n, err := c.w.Audit(ctx); n != 0 || err != nil {
				t.Errorf("a second audit repaired %d (%v)", n, err)
			}
			if fetched, full := c.api.ByNameSince(mark); len(fetched) != 0 || full != 0 {
				t.Errorf("a second audit fetched %q and listed %d in full", fetched, full)
			}
		})
	}
}

// TestAuditStopsAtABrokenList: a list that breaks off (the connection drops) is an error, not a
// shorter list: the audit removes nothing that the rest of the list would have held.
func TestAuditStopsAtABrokenList(t *testing.T) {
	const web = "web.prod.svc.cluster.local."
	var objs []runtime.Object
	for i := range 20 {
		objs = append(objs, k8stest.ClusterIPService("prod", fmt.Sprintf("svc-%02d", i), []string{fmt.Sprintf("10.0.1.%d", i+1)}))
	}
	c := startCluster(t, testZones, append(objs, k8stest.Namespace("prod"), k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}))...)
	c.api.Versions.Truncate = true
	mark := c.api.Actions()
	if n, err := c.w.Audit(context.Background()); n != 0 || err == nil {
		t.Errorf("an audit of broken lists repaired %d (%v); want an error", n, err)
	}
	c.barrier(t)
	if fetched, full := c.api.ByNameSince(mark); len(fetched) != 0 || full != 0 {
		t.Errorf("an audit of broken lists fetched %q and listed %d in full", fetched, full)
	}
	c.expect(t, web, dns.TypeA, okay, recA(web, "10.0.0.1"))
	for i := range 20 {
		name := fmt.Sprintf("svc-%02d.prod.svc.cluster.local.", i)
		c.expect(t, name, dns.TypeA, okay, recA(name, fmt.Sprintf("10.0.1.%d", i+1)))
	}
}
