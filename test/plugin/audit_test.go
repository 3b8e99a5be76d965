package plugin_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}),
		k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"}),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.9.1"}}))
	repairs := func(resource string) float64 {
		return testutil.ToFloat64(c.Metrics.Repairs(resource))
	}
	ctx := context.Background()
	if n, err := c.W.Audit(ctx); n != 0 || err != nil {
		t.Fatalf("an audit of a cluster in step repaired %d (%v)", n, err)
	}

	// The watches lose every event for a while: an endpoint moves, a service comes, one goes.
	c.API.LoseAll.Store(true)
	c.Update(t, k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.9.2"}}))
	c.Create(t, k8stest.ClusterIPService("prod", "born", []string{"10.0.0.3"}))
	c.Remove(t, k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"}))
	plugintest.WaitFor(t, "the three events to be lost", func() bool { return c.API.Lost.Load() >= 3 })
	c.API.LoseAll.Store(false)
	c.Barrier(t)
	c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.9.1")) // stale: the watch missed it
	c.NX(t, born)

	n, err := c.W.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Barrier(t)
	if n != 3 || repairs("endpointslices") != 1 || repairs("services") != 2 {
		t.Errorf("repairs: %d in all, %v slices, %v services; want 3, 1, 2", n, repairs("endpointslices"), repairs("services"))
	}
	c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.9.2"))
	c.Expect(t, born, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(born, "10.0.0.3"))
	c.NX(t, gone)
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.1"))

	// In step again: the next audit repairs nothing.
	if n, err := c.W.Audit(ctx); n != 0 || err != nil {
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
		missed  func(c *plugintest.Cluster) // changes the watches lose
		lost    int64                       // events they lose
		fetched []string                    // "resource ns/name"
		repairs int
		after   func(c *plugintest.Cluster) // what DNS answers after the audit
	}{
		{
			name: "in step",
			after: func(c *plugintest.Cluster) {
				c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.1"))
			},
		},
		{
			name:   "in step, with a label selector that leaves objects out",
			stanza: "kubetree cluster.local 10.in-addr.arpa {\n\tlabels app=dns\n}",
			after: func(c *plugintest.Cluster) {
				c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.1"))
				c.NX(t, gone)
			},
		},
		{
			name:    "changed only where DNS does not look: fetched, compared, not repaired",
			missed:  func(c *plugintest.Cluster) { c.Update(t, k8stest.WithLabels(webService(), "team", "payments")) },
			lost:    1,
			fetched: []string{"services prod/web"},
			after: func(c *plugintest.Cluster) {
				c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.1"))
			},
		},
		{
			name:    "a missed update",
			missed:  func(c *plugintest.Cluster) { c.Update(t, dbSlice("10.0.9.2")) },
			lost:    1,
			fetched: []string{"endpointslices prod/db-1"},
			repairs: 1,
			after: func(c *plugintest.Cluster) {
				c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.9.2"))
			},
		},
		{
			name: "a missed add",
			missed: func(c *plugintest.Cluster) {
				c.Create(t, k8stest.ClusterIPService("prod", "born", []string{"10.0.0.3"}))
			},
			lost:    1,
			fetched: []string{"services prod/born"},
			repairs: 1,
			after: func(c *plugintest.Cluster) {
				c.Expect(t, born, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(born, "10.0.0.3"))
			},
		},
		{
			name: "a missed delete",
			missed: func(c *plugintest.Cluster) {
				c.Remove(t, k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"}))
			},
			lost:    1,
			fetched: []string{"services prod/gone"},
			repairs: 1,
			after:   func(c *plugintest.Cluster) { c.NX(t, gone) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stanza := tc.stanza
			if stanza == "" {
				stanza = plugintest.Zones
			}
			c := plugintest.StartCluster(t, stanza, k8stest.Namespace("prod"), webService(),
				k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.2"}),
				k8stest.WithLabels(k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)), "app", "dns"),
				dbSlice("10.0.9.1"))
			ctx := context.Background()
			if tc.missed != nil {
				c.API.LoseAll.Store(true)
				tc.missed(c)
				plugintest.WaitFor(t, "the events to be lost", func() bool { return c.API.Lost.Load() >= tc.lost })
				c.API.LoseAll.Store(false)
				c.Barrier(t)
			}
			// The resources watched, with the label selector of each one's list and watch.
			selectors := map[string]string{"services": "", "endpointslices": "", "namespaces": ""}
			if sel := c.Watch.LabelSelector; sel != nil {
				selectors["services"], selectors["endpointslices"] = meta.FormatLabelSelector(sel), meta.FormatLabelSelector(sel)
			}
			before := map[string]int{}
			for resource := range selectors {
				before[resource] = len(c.API.Versions.RequestsOf(resource))
			}
			mark := c.API.Actions()
			n, err := c.W.Audit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.Barrier(t)
			fetched, full := c.API.ByNameSince(mark)
			if n != tc.repairs || !slices.Equal(fetched, tc.fetched) || full != 0 {
				t.Errorf("repaired %d, fetched %q, %d lists in full; want %d, %q, 0", n, fetched, full, tc.repairs, tc.fetched)
			}
			// One metadata-only list per resource with the informer's label selector, which the
			// API server serves from its watch cache, whole, as a consistent read: no
			// resourceVersion, no limit; and not compressed, which would cost the API server more
			// CPU than the audit's bytes are worth.
			for resource, labels := range selectors {
				reqs := c.API.Versions.RequestsOf(resource)[before[resource]:]
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
			mark = c.API.Actions()
			if n, err := c.W.Audit(ctx); n != 0 || err != nil {
				t.Errorf("a second audit repaired %d (%v)", n, err)
			}
			if fetched, full := c.API.ByNameSince(mark); len(fetched) != 0 || full != 0 {
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
	c := plugintest.StartCluster(t, plugintest.Zones, append(objs, k8stest.Namespace("prod"), k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}))...)
	c.API.Versions.Truncate = true
	mark := c.API.Actions()
	if n, err := c.W.Audit(context.Background()); n != 0 || err == nil {
		t.Errorf("an audit of broken lists repaired %d (%v); want an error", n, err)
	}
	c.Barrier(t)
	if fetched, full := c.API.ByNameSince(mark); len(fetched) != 0 || full != 0 {
		t.Errorf("an audit of broken lists fetched %q and listed %d in full", fetched, full)
	}
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.1"))
	for i := range 20 {
		name := fmt.Sprintf("svc-%02d.prod.svc.cluster.local.", i)
		c.Expect(t, name, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(name, fmt.Sprintf("10.0.1.%d", i+1)))
	}
}
