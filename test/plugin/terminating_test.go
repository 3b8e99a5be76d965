package plugin_test

import (
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestServingTerminating follows a headless service through a rollout: with serving_terminating,
// while every endpoint is terminating but still serving, those are answered (A, SRV, endpoint
// names, PTR) instead of NXDOMAIN; once a new endpoint is ready, only it. Without the option the
// same cluster is NXDOMAIN in between. A terminating endpoint that no longer serves is never
// answered, and a ClusterIP service's endpoint names are unchanged.
func TestServingTerminating(t *testing.T) {
	const db, web = "db.prod.svc.cluster.local.", "web.prod.svc.cluster.local."
	ports := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432))
	oldSlice := k8stest.Slice("prod", "db", "db-old", discovery.AddressTypeIPv4, ports,
		k8stest.Endpoint{Addrs: []string{"10.0.4.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.0.4.2"}, Hostname: "db-1"})
	objs := []runtime.Object{k8stest.Namespace("prod"), k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)), oldSlice,
		k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10"}, k8stest.TCP("http", 80)),
		k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, nil,
			k8stest.Endpoint{Addrs: []string{"10.0.5.1"}, Hostname: "web-0", NotReady: true, Terminating: true})}
	on := plugintest.StartCluster(t, "kubetree cluster.local 10.in-addr.arpa {\n\tserving_terminating\n}", objs...)
	off := plugintest.StartCluster(t, plugintest.Zones, objs...)
	both := func(f func(c *plugintest.Cluster)) { f(on); f(off) }

	both(func(c *plugintest.Cluster) {
		c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.1"), plugintest.RecA(db, "10.0.4.2"))
	})

	t.Run("every endpoint terminating, still serving", func(t *testing.T) {
		oldSlice.Endpoints = k8stest.Slice("", "", "", "", nil,
			k8stest.Endpoint{Addrs: []string{"10.0.4.1"}, Hostname: "db-0", NotReady: true, Terminating: true},
			k8stest.Endpoint{Addrs: []string{"10.0.4.2"}, Hostname: "db-1", NotReady: true, Terminating: true}).Endpoints
		both(func(c *plugintest.Cluster) { c.Update(t, oldSlice); c.Barrier(t) })
		on.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.1"), plugintest.RecA(db, "10.0.4.2"))
		on.Expect(t, "db-0."+db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("db-0."+db, "10.0.4.1"))
		on.Expect(t, "_pg._tcp."+db, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_pg._tcp."+db, 50, 5432, "db-0."+db), plugintest.RecSRV("_pg._tcp."+db, 50, 5432, "db-1."+db))
		on.Expect(t, "1.4.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("1.4.0.10.in-addr.arpa.", "db-0."+db))
		off.NX(t, db, "db-0."+db, "_pg._tcp."+db, "1.4.0.10.in-addr.arpa.")
		// A ClusterIP service's endpoint names stay those of its ready endpoints.
		on.NX(t, "web-0."+web)
	})

	t.Run("one stops serving", func(t *testing.T) {
		oldSlice.Endpoints[1].Conditions.Serving = new(false)
		both(func(c *plugintest.Cluster) { c.Update(t, oldSlice); c.Barrier(t) })
		on.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.1"))
		on.NX(t, "db-1."+db, "2.4.0.10.in-addr.arpa.")
	})

	newSlice := k8stest.Slice("prod", "db", "db-new", discovery.AddressTypeIPv4, ports, k8stest.Endpoint{Addrs: []string{"10.0.4.3"}, Hostname: "db-2"})
	t.Run("a new endpoint ready: only it", func(t *testing.T) {
		both(func(c *plugintest.Cluster) { c.Create(t, newSlice); c.Barrier(t) })
		both(func(c *plugintest.Cluster) {
			c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.3"))
			c.Expect(t, "_pg._tcp."+db, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_pg._tcp."+db, 100, 5432, "db-2."+db))
			c.NX(t, "db-0."+db, "1.4.0.10.in-addr.arpa.")
		})
	})

	t.Run("the new one not ready either: back to the terminating ones", func(t *testing.T) {
		newSlice.Endpoints[0].Conditions.Ready = new(false)
		both(func(c *plugintest.Cluster) { c.Update(t, newSlice); c.Barrier(t) })
		on.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.1"))
		off.NX(t, db)
	})

	t.Run("gone", func(t *testing.T) {
		both(func(c *plugintest.Cluster) { c.Remove(t, oldSlice); c.Barrier(t) })
		both(func(c *plugintest.Cluster) { c.NX(t, db, "db-0."+db) })
	})
}
