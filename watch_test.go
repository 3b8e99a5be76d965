package kubetree_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/plugintest"
	"github.com/kubetree/kubetree/internal/records"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// TestServiceLifecycle follows one service through every kind of change a user can make.
func TestServiceLifecycle(t *testing.T) {
	const web = "web.prod.svc.cluster.local."
	svc := k8stest.ClusterIPService("prod", "web", []string{"10.0.0.10"}, k8stest.TCP("http", 80))
	sl := k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
		k8stest.Endpoint{Addrs: []string{"10.0.3.1"}}, k8stest.Endpoint{Addrs: []string{"10.0.3.2"}, Hostname: "two"})
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"))

	c.Create(t, svc, sl)
	c.Barrier(t)
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.10"))
	c.Expect(t, "_http._tcp."+web, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_http._tcp."+web, 100, 80, web))
	c.Expect(t, "10-0-3-1."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-0-3-1."+web, "10.0.3.1"))
	c.Expect(t, "two."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("two."+web, "10.0.3.2"))
	c.Expect(t, "10.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("10.0.0.10.in-addr.arpa.", web))
	c.Expect(t, "2.3.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("2.3.0.10.in-addr.arpa.", "two."+web))

	t.Run("cluster IP changes", func(t *testing.T) {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.0.0.11", []string{"10.0.0.11"}
		c.Update(t, svc)
		c.Barrier(t)
		c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.11"))
		c.Expect(t, "11.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("11.0.0.10.in-addr.arpa.", web))
		c.NX(t, "10.0.0.10.in-addr.arpa.")
	})

	t.Run("ports renamed", func(t *testing.T) {
		svc.Spec.Ports = k8stest.SvcPorts(k8stest.TCP("web", 80), k8stest.UDP("dns", 53))
		c.Update(t, svc)
		c.Barrier(t)
		c.NX(t, "_http._tcp."+web)
		c.Expect(t, "_web._tcp."+web, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_web._tcp."+web, 100, 80, web))
		c.Expect(t, "_dns._udp."+web, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_dns._udp."+web, 100, 53, web))
		c.Expect(t, web, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV(web, 50, 80, web), plugintest.RecSRV(web, 50, 53, web))
	})

	t.Run("becomes headless", func(t *testing.T) {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = api.ClusterIPNone, []string{api.ClusterIPNone}
		c.Update(t, svc)
		c.Barrier(t)
		c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.3.1"), plugintest.RecA(web, "10.0.3.2"))
		// Headless SRV records come from the slice's ports and point at each endpoint.
		c.Expect(t, "_http._tcp."+web, dns.TypeSRV, dns.RcodeSuccess,
			plugintest.RecSRV("_http._tcp."+web, 50, 8080, "10-0-3-1."+web), plugintest.RecSRV("_http._tcp."+web, 50, 8080, "two."+web))
		c.NX(t, "_web._tcp."+web, "11.0.0.10.in-addr.arpa.")
		c.Expect(t, "1.3.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("1.3.0.10.in-addr.arpa.", "10-0-3-1."+web))
	})

	t.Run("becomes ExternalName and changes target", func(t *testing.T) {
		svc.Spec = api.ServiceSpec{Type: api.ServiceTypeExternalName, ExternalName: "example.com"}
		c.Update(t, svc)
		c.Barrier(t)
		c.Expect(t, web, dns.TypeCNAME, dns.RcodeSuccess, web+" 5 IN CNAME example.com.")
		// An ExternalName service has no endpoint names or reverse records.
		c.NX(t, "two."+web, "1.3.0.10.in-addr.arpa.", "2.3.0.10.in-addr.arpa.")

		svc.Spec.ExternalName = "Example.ORG."
		c.Update(t, svc)
		c.Barrier(t)
		c.Expect(t, web, dns.TypeCNAME, dns.RcodeSuccess, web+" 5 IN CNAME example.org.")
	})

	t.Run("deleted", func(t *testing.T) {
		svc.Spec = api.ServiceSpec{Type: api.ServiceTypeClusterIP, ClusterIP: "10.0.0.12", ClusterIPs: []string{"10.0.0.12"},
			Ports: k8stest.SvcPorts(k8stest.TCP("http", 80))}
		c.Update(t, svc)
		c.Barrier(t)
		c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.12"))
		c.Remove(t, svc)
		c.Barrier(t)
		c.NX(t, web, "_http._tcp."+web, "two."+web, "10-0-3-1."+web, "12.0.0.10.in-addr.arpa.", "1.3.0.10.in-addr.arpa.")
		// The namespace stays.
		c.Expect(t, "prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess)
	})
}

// TestEndpointChanges adds, removes and flips the readiness of endpoints.
func TestEndpointChanges(t *testing.T) {
	const db = "db.prod.svc.cluster.local."
	ports := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432))
	sl := k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, ports, k8stest.Endpoint{Addrs: []string{"10.0.4.1"}, Hostname: "db-0"})
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"), k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)), sl)
	c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.1"))

	t.Run("added", func(t *testing.T) {
		sl.Endpoints = k8stest.Slice("", "", "", "", nil,
			k8stest.Endpoint{Addrs: []string{"10.0.4.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.0.4.2"}, Hostname: "db-1"}).Endpoints
		c.Update(t, sl)
		c.Barrier(t)
		c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.1"), plugintest.RecA(db, "10.0.4.2"))
		c.Expect(t, "db-1."+db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("db-1."+db, "10.0.4.2"))
		c.Expect(t, "_pg._tcp."+db, dns.TypeSRV, dns.RcodeSuccess,
			plugintest.RecSRV("_pg._tcp."+db, 50, 5432, "db-0."+db), plugintest.RecSRV("_pg._tcp."+db, 50, 5432, "db-1."+db))
		c.Expect(t, "2.4.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("2.4.0.10.in-addr.arpa.", "db-1."+db))
	})

	t.Run("not ready", func(t *testing.T) {
		sl.Endpoints = k8stest.Slice("", "", "", "", nil,
			k8stest.Endpoint{Addrs: []string{"10.0.4.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.0.4.2"}, Hostname: "db-1", NotReady: true}).Endpoints
		c.Update(t, sl)
		c.Barrier(t)
		c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.1"))
		c.Expect(t, "_pg._tcp."+db, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_pg._tcp."+db, 100, 5432, "db-0."+db))
		c.NX(t, "db-1."+db, "2.4.0.10.in-addr.arpa.")
	})

	t.Run("ready again, readiness unknown counts as ready", func(t *testing.T) {
		sl.Endpoints = k8stest.Slice("", "", "", "", nil,
			k8stest.Endpoint{Addrs: []string{"10.0.4.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.0.4.2"}, Hostname: "db-1", Unknown: true}).Endpoints
		c.Update(t, sl)
		c.Barrier(t)
		c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.1"), plugintest.RecA(db, "10.0.4.2"))
		c.Expect(t, "db-1."+db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("db-1."+db, "10.0.4.2"))
	})

	t.Run("removed", func(t *testing.T) {
		sl.Endpoints = sl.Endpoints[1:]
		c.Update(t, sl)
		c.Barrier(t)
		c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.4.2"))
		c.NX(t, "db-0."+db, "1.4.0.10.in-addr.arpa.")
	})

	t.Run("slice deleted", func(t *testing.T) {
		c.Remove(t, sl)
		c.Barrier(t)
		// A headless service without endpoints has no name of its own.
		c.NX(t, db, "db-1."+db, "_pg._tcp."+db, "2.4.0.10.in-addr.arpa.")
	})
}

// TestEndpointMovesBetweenSlices moves an endpoint from one slice of a service to another, in both
// orders; whatever the order, once settled every record is there exactly once.
func TestEndpointMovesBetweenSlices(t *testing.T) {
	const db = "db.prod.svc.cluster.local."
	ports := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432))
	e0 := k8stest.Endpoint{Addrs: []string{"10.0.5.1"}, Hostname: "db-0"}
	e1 := k8stest.Endpoint{Addrs: []string{"10.0.5.2"}, Hostname: "db-1"}
	e2 := k8stest.Endpoint{Addrs: []string{"10.0.5.3"}, Hostname: "db-2"}
	sliceA := k8stest.Slice("prod", "db", "db-a", discovery.AddressTypeIPv4, ports, e0, e1)
	sliceB := k8stest.Slice("prod", "db", "db-b", discovery.AddressTypeIPv4, ports, e2)
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"), k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)), sliceA, sliceB)

	settled := func(t *testing.T) {
		t.Helper()
		c.Expect(t, db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(db, "10.0.5.1"), plugintest.RecA(db, "10.0.5.2"), plugintest.RecA(db, "10.0.5.3"))
		c.Expect(t, "db-1."+db, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("db-1."+db, "10.0.5.2"))
		c.Expect(t, "_pg._tcp."+db, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_pg._tcp."+db, 33, 5432, "db-0."+db),
			plugintest.RecSRV("_pg._tcp."+db, 33, 5432, "db-1."+db), plugintest.RecSRV("_pg._tcp."+db, 33, 5432, "db-2."+db))
		c.Expect(t, "2.5.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("2.5.0.10.in-addr.arpa.", "db-1."+db))
	}
	settled(t)
	set := func(s *discovery.EndpointSlice, eps ...k8stest.Endpoint) *discovery.EndpointSlice {
		s.Endpoints = k8stest.Slice("", "", "", "", nil, eps...).Endpoints
		return s
	}

	t.Run("removed first", func(t *testing.T) {
		c.Update(t, set(sliceA, e0))
		c.Barrier(t)
		c.NX(t, "db-1."+db, "2.5.0.10.in-addr.arpa.")
		c.Update(t, set(sliceB, e2, e1))
		c.Barrier(t)
		settled(t)
	})

	t.Run("added first", func(t *testing.T) {
		// Back into A while still in B: for a moment it is in both, and still answers once.
		c.Update(t, set(sliceA, e0, e1))
		c.Barrier(t)
		settled(t)
		c.Update(t, set(sliceB, e2))
		c.Barrier(t)
		settled(t)
	})

	t.Run("both updates at once", func(t *testing.T) {
		c.Update(t, set(sliceB, e2, e1), set(sliceA, e0))
		c.Barrier(t)
		settled(t)
		c.Update(t, set(sliceA, e0, e1), set(sliceB, e2))
		c.Barrier(t)
		settled(t)
	})
}

// TestSliceChangesService relabels an EndpointSlice to another service: its endpoints move.
func TestSliceChangesService(t *testing.T) {
	const one, two = "one.prod.svc.cluster.local.", "two.prod.svc.cluster.local."
	sl := k8stest.Slice("prod", "one", "s-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.6.1"}, Hostname: "h"})
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"),
		k8stest.HeadlessService("prod", "one"), k8stest.HeadlessService("prod", "two"), sl)
	c.Expect(t, one, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(one, "10.0.6.1"))
	c.Expect(t, "1.6.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("1.6.0.10.in-addr.arpa.", "h."+one))
	c.NX(t, two)

	sl.Labels[discovery.LabelServiceName] = "two"
	c.Update(t, sl)
	c.Barrier(t)
	c.NX(t, one, "h."+one)
	c.Expect(t, two, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(two, "10.0.6.1"))
	c.Expect(t, "h."+two, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("h."+two, "10.0.6.1"))
	c.Expect(t, "1.6.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("1.6.0.10.in-addr.arpa.", "h."+two))

	// A slice that loses its service label belongs to no service.
	delete(sl.Labels, discovery.LabelServiceName)
	c.Update(t, sl)
	c.Barrier(t)
	c.NX(t, two, "h."+two, "1.6.0.10.in-addr.arpa.")
}

// TestTombstoneFromRelist loses a delete event, then expires the watch: the informer relists, finds
// the service gone and delivers a tombstone, which must take the service's names away.
func TestTombstoneFromRelist(t *testing.T) {
	const web = "web.prod.svc.cluster.local."
	svc := k8stest.ClusterIPService("prod", "web", []string{"10.0.0.30"}, k8stest.TCP("http", 80))
	sl := k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.8.1"}, Hostname: "h"})
	keep := k8stest.ClusterIPService("prod", "keep", []string{"10.0.0.31"})
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"), svc, sl, keep)
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.30"))

	c.API.LoseDelete.Store(true)
	c.Remove(t, sl, svc)
	c.Barrier(t) // the deletes were lost: nothing changed
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.30"))
	c.API.LoseDelete.Store(false)

	// The watches expire: the relists find the service and its slice gone, and hand their
	// tombstones over before the watches open again, ahead of the barrier.
	c.API.Expire(t, "services", "endpointslices")
	c.Barrier(t)
	c.NX(t, web, "h."+web, "_http._tcp."+web, "30.0.0.10.in-addr.arpa.", "1.8.0.10.in-addr.arpa.")
	c.Expect(t, "keep.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("keep.prod.svc.cluster.local.", "10.0.0.31"))
}

// TestConvergeAfterGap loses every event for a while, as when the API server is away, then
// relists: the last known state is served meanwhile, and afterwards exactly the API's state.
func TestConvergeAfterGap(t *testing.T) {
	const one, two = "one.prod.svc.cluster.local.", "two.prod.svc.cluster.local."
	svcOne := k8stest.ClusterIPService("prod", "one", []string{"10.0.0.140"})
	s1 := k8stest.Slice("prod", "one", "s-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.14.1"}, Hostname: "h"})
	s2 := k8stest.Slice("prod", "two", "s-2", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.14.2"}, Hostname: "g"})
	gone := k8stest.ClusterIPService("prod", "gone", []string{"10.0.0.141"})
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"), k8stest.Namespace("old"), svcOne, k8stest.HeadlessService("prod", "two"), gone, s1, s2,
		k8stest.ClusterIPService("old", "x", []string{"10.0.0.144"}))
	c.Expect(t, "h."+one, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("h."+one, "10.0.14.1"))

	c.API.LoseAll.Store(true)
	svcOne.Spec.ClusterIP, svcOne.Spec.ClusterIPs = "10.0.0.142", []string{"10.0.0.142"}
	s1.Labels[discovery.LabelServiceName] = "two"
	s2.Endpoints = k8stest.Slice("", "", "", "", nil, k8stest.Endpoint{Addrs: []string{"10.0.14.3"}, Hostname: "g"}).Endpoints
	c.Update(t, svcOne, s1, s2)
	c.Create(t, k8stest.Namespace("new"), k8stest.ClusterIPService("new", "y", []string{"10.0.0.143"}))
	c.Remove(t, gone, k8stest.Namespace("old"))
	c.Expect(t, one, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(one, "10.0.0.140"))
	c.Expect(t, "141.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("141.0.0.10.in-addr.arpa.", "gone.prod.svc.cluster.local."))
	c.API.LoseAll.Store(false)

	c.API.Expire(t, "services", "endpointslices", "namespaces")
	c.Barrier(t)
	c.Expect(t, one, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(one, "10.0.0.142"))
	c.Expect(t, "142.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("142.0.0.10.in-addr.arpa.", one))
	c.Expect(t, two, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(two, "10.0.14.1"), plugintest.RecA(two, "10.0.14.3"))
	c.Expect(t, "h."+two, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("h."+two, "10.0.14.1"))
	c.Expect(t, "1.14.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("1.14.0.10.in-addr.arpa.", "h."+two))
	c.Expect(t, "y.new.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("y.new.svc.cluster.local.", "10.0.0.143"))
	c.NX(t, "h."+one, "140.0.0.10.in-addr.arpa.", "gone.prod.svc.cluster.local.", "141.0.0.10.in-addr.arpa.",
		"2.14.0.10.in-addr.arpa.", "old.svc.cluster.local.", "x.old.svc.cluster.local.", "144.0.0.10.in-addr.arpa.")
}

// TestZones serves every service in every forward plugintest.ClusterZone; PTR records point into the first, in
// whichever reverse plugintest.ClusterZone holds the address.
func TestZones(t *testing.T) {
	const web = "web.prod.svc.cluster.local."
	rev6, _ := dns.ReverseAddr("fd00::150")
	c := plugintest.StartCluster(t, "kubetree cluster.local example.org 10.in-addr.arpa d.f.ip6.arpa", k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.0.0.150", "fd00::150", "192.168.0.1"}))
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.150"), plugintest.RecA(web, "192.168.0.1"))
	c.Expect(t, web, dns.TypeAAAA, dns.RcodeSuccess, plugintest.RecAAAA(web, "fd00::150"))
	c.Expect(t, "web.prod.svc.example.org.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("web.prod.svc.example.org.", "10.0.0.150"), plugintest.RecA("web.prod.svc.example.org.", "192.168.0.1"))
	c.Expect(t, "150.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("150.0.0.10.in-addr.arpa.", web))
	c.Expect(t, rev6, dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR(rev6, web))

	c.Remove(t, k8stest.Namespace("prod"))
	c.Barrier(t)
	c.NX(t, web, "web.prod.svc.example.org.", "prod.svc.example.org.", "150.0.0.10.in-addr.arpa.", rev6)
}

// TestPodsFollowNamespaces answers pod names under pods insecure only while the namespace exists.
func TestPodsFollowNamespaces(t *testing.T) {
	const pod = "10-0-15-1.prod.pod.cluster.local."
	c := plugintest.StartCluster(t, plugintest.Zones+" {\n pods insecure\n}", k8stest.Namespace("prod"))
	c.Expect(t, pod, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(pod, "10.0.15.1"))
	c.Remove(t, k8stest.Namespace("prod"))
	c.Barrier(t)
	c.NX(t, pod)
	c.Create(t, k8stest.Namespace("prod"))
	c.Barrier(t)
	c.Expect(t, pod, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(pod, "10.0.15.1"))
}

// TestNoEndpoints does not watch EndpointSlices: services answer with their cluster IPs only.
func TestNoEndpoints(t *testing.T) {
	const web = "web.prod.svc.cluster.local."
	c := plugintest.StartCluster(t, plugintest.Zones+" {\n noendpoints\n}", k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.0.0.160"}, k8stest.TCP("http", 80)),
		k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.16.1"}, Hostname: "h"}))
	if _, watched := c.W.Versions()["endpointslices"]; watched {
		t.Fatal("noendpoints still watches EndpointSlices")
	}
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.160"))
	c.Expect(t, "_http._tcp."+web, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_http._tcp."+web, 100, 80, web))
	c.NX(t, "h."+web, "1.16.0.10.in-addr.arpa.")
}

// TestEndpointPodNames names an endpoint without a hostname after its pod.
func TestEndpointPodNames(t *testing.T) {
	const web = "web.prod.svc.cluster.local."
	c := plugintest.StartCluster(t, plugintest.Zones+" {\n endpoint_pod_names\n}", k8stest.Namespace("prod"), k8stest.HeadlessService("prod", "web"),
		k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, nil,
			k8stest.Endpoint{Addrs: []string{"10.0.17.1"}, Pod: "web-7d9f-abcde"}, k8stest.Endpoint{Addrs: []string{"10.0.17.2"}, Pod: "web-2", Hostname: "named"},
			k8stest.Endpoint{Addrs: []string{"10.0.17.3"}}))
	c.Expect(t, "web-7d9f-abcde."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("web-7d9f-abcde."+web, "10.0.17.1"))
	c.Expect(t, "named."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("named."+web, "10.0.17.2"))
	c.Expect(t, "10-0-17-3."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-0-17-3."+web, "10.0.17.3"))
	c.NX(t, "web-2."+web, "10-0-17-1."+web)
}

// TestQueriesDuringChurn answers queries while services change under them; run with -race.
func TestQueriesDuringChurn(t *testing.T) {
	const web = "web.prod.svc.cluster.local."
	sl := k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)),
		k8stest.Endpoint{Addrs: []string{"10.0.18.1"}, Hostname: "h"})
	svc := k8stest.HeadlessService("prod", "web", k8stest.TCP("http", 80))
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"), svc, sl)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Value
	queries := []struct {
		name  string
		qtype uint16
	}{{web, dns.TypeA}, {"_http._tcp." + web, dns.TypeSRV}, {"h." + web, dns.TypeA}, {"1.18.0.10.in-addr.arpa.", dns.TypePTR}, {plugintest.ClusterZone, dns.TypeSOA}}
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			q := queries[i%len(queries)]
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			m := new(dns.Msg)
			m.SetQuestion(q.name, q.qtype)
			if _, err := c.ServeDNS(context.Background(), rec, m); err != nil || rec.Msg == nil {
				bad.Store(fmt.Sprintf("%s: %v", q.name, err))
			} else if rc := rec.Msg.Rcode; rc != dns.RcodeSuccess && rc != dns.RcodeNameError {
				bad.Store(fmt.Sprintf("%s: rcode %s", q.name, dns.RcodeToString[rc]))
			}
		}
	})
	for i := range 20 {
		sl.Endpoints = k8stest.Slice("", "", "", "", nil, k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.0.18.%d", i%3+1)}, Hostname: "h"}).Endpoints
		c.Update(t, sl)
		if i%5 == 4 {
			c.Barrier(t) // keep the fake's watch buffer from filling
		}
	}
	close(stop)
	wg.Wait()
	if b := bad.Load(); b != nil {
		t.Error(b)
	}
	c.Barrier(t)
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.18.2"))
}

func TestKeyOfTombstone(t *testing.T) {
	for _, tc := range []struct {
		obj  any
		want string
	}{
		{k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}), "prod/web"},
		{cache.DeletedFinalStateUnknown{Key: "prod/web", Obj: k8stest.ClusterIPService("other", "stale", []string{"10.0.0.1"})}, "prod/web"},
		{cache.DeletedFinalStateUnknown{Key: "prod", Obj: nil}, "prod"},
		{k8stest.Namespace("prod"), "prod"},
		{"not an object", ""},
	} {
		if got := object.KeyOf(tc.obj); got != tc.want {
			t.Errorf("object.KeyOf(%T) = %q, want %q", tc.obj, got, tc.want)
		}
	}
}

// TestServiceLabels serves only services matching `labels`; a service relabelled out of the
// selection goes, and back in comes back.
func TestServiceLabels(t *testing.T) {
	const web, other = "web.prod.svc.cluster.local.", "other.prod.svc.cluster.local."
	web1 := k8stest.WithLabels(k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.9.1"}, Hostname: "h"}), "app", "x")
	svc := k8stest.WithLabels(k8stest.HeadlessService("prod", "web"), "app", "x")
	c := plugintest.StartCluster(t, plugintest.Zones+" {\n labels app=x\n}", k8stest.Namespace("prod"), svc, web1,
		k8stest.WithLabels(k8stest.ClusterIPService("prod", "other", []string{"10.0.0.40"}), "app", "y"),
		k8stest.WithLabels(k8stest.Slice("prod", "other", "other-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.9.2"}, Hostname: "h"}), "app", "y"))
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.9.1"))
	c.NX(t, other, "h."+other, "40.0.0.10.in-addr.arpa.", "2.9.0.10.in-addr.arpa.")

	k8stest.WithLabels(svc, "app", "z")
	c.Update(t, svc)
	c.Barrier(t)
	c.NX(t, web, "h."+web, "1.9.0.10.in-addr.arpa.")

	k8stest.WithLabels(svc, "app", "x")
	c.Update(t, svc)
	c.Barrier(t)
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.9.1"))
	c.Expect(t, "1.9.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("1.9.0.10.in-addr.arpa.", "h."+web))

	// A slice relabelled out of the selection takes its endpoints with it.
	k8stest.WithLabels(web1, "app", "z")
	c.Update(t, web1)
	c.Barrier(t)
	c.NX(t, web, "h."+web)
}

// TestNamespaceLabels serves only namespaces matching `namespace_labels`; relabelling a namespace
// adds or removes all of its services.
func TestNamespaceLabels(t *testing.T) {
	const web, api2 = "web.a.svc.cluster.local.", "api.b.svc.cluster.local."
	nsA, nsB := k8stest.WithLabels(k8stest.Namespace("a"), "team", "a"), k8stest.WithLabels(k8stest.Namespace("b"), "team", "b")
	c := plugintest.StartCluster(t, plugintest.Zones+" {\n namespace_labels team=a\n}", nsA, nsB,
		k8stest.ClusterIPService("a", "web", []string{"10.0.0.50"}), k8stest.ClusterIPService("b", "api", []string{"10.0.0.51"}),
		k8stest.ClusterIPService("b", "db", []string{"10.0.0.52"}))
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.50"))
	c.Expect(t, "a.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess)
	c.NX(t, api2, "db.b.svc.cluster.local.", "b.svc.cluster.local.", "51.0.0.10.in-addr.arpa.")

	k8stest.WithLabels(nsB, "team", "a")
	c.Update(t, nsB)
	c.Barrier(t)
	c.Expect(t, api2, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(api2, "10.0.0.51"))
	c.Expect(t, "db.b.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("db.b.svc.cluster.local.", "10.0.0.52"))
	c.Expect(t, "51.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("51.0.0.10.in-addr.arpa.", api2))

	k8stest.WithLabels(nsA, "team", "c")
	c.Update(t, nsA)
	c.Barrier(t)
	c.NX(t, web, "a.svc.cluster.local.", "50.0.0.10.in-addr.arpa.")
	c.Expect(t, api2, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(api2, "10.0.0.51"))
}

// TestNamespacesOption serves only the namespaces listed.
func TestNamespacesOption(t *testing.T) {
	c := plugintest.StartCluster(t, plugintest.Zones+" {\n namespaces a b\n}", k8stest.Namespace("a"), k8stest.Namespace("b"), k8stest.Namespace("c"),
		k8stest.ClusterIPService("a", "web", []string{"10.0.0.60"}), k8stest.ClusterIPService("c", "web", []string{"10.0.0.61"}))
	c.Expect(t, "web.a.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("web.a.svc.cluster.local.", "10.0.0.60"))
	c.Expect(t, "b.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess)
	c.NX(t, "web.c.svc.cluster.local.", "c.svc.cluster.local.", "61.0.0.10.in-addr.arpa.")

	c.Create(t, k8stest.ClusterIPService("b", "api", []string{"10.0.0.62"}), k8stest.ClusterIPService("c", "api", []string{"10.0.0.63"}))
	c.Barrier(t)
	c.Expect(t, "api.b.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("api.b.svc.cluster.local.", "10.0.0.62"))
	c.NX(t, "api.c.svc.cluster.local.", "63.0.0.10.in-addr.arpa.")
}

// TestNamespaceLifecycle creates a namespace after its services, then deletes it.
func TestNamespaceLifecycle(t *testing.T) {
	const web = "web.late.svc.cluster.local."
	c := plugintest.StartCluster(t, plugintest.Zones)
	svc := k8stest.ClusterIPService("late", "web", []string{"10.0.0.70"})
	sl := k8stest.Slice("late", "web", "web-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.10.1"}, Hostname: "h"})
	c.Create(t, svc, sl)
	c.Barrier(t)
	c.NX(t, web, "late.svc.cluster.local.", "70.0.0.10.in-addr.arpa.")

	ns := k8stest.Namespace("late")
	c.Create(t, ns)
	c.Barrier(t)
	c.Expect(t, "late.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess)
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.70"))
	c.Expect(t, "h."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("h."+web, "10.0.10.1"))
	c.Expect(t, "70.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR("70.0.0.10.in-addr.arpa.", web))

	// The fake API does not cascade: the services outlive their namespace and must still go.
	c.Remove(t, ns)
	c.Barrier(t)
	c.NX(t, "late.svc.cluster.local.", web, "h."+web, "70.0.0.10.in-addr.arpa.", "1.10.0.10.in-addr.arpa.")
	c.Expect(t, "svc.cluster.local.", dns.TypeA, dns.RcodeSuccess)
}

// TestInvisibleUpdatesSkipped checks that updates DNS cannot see queue nothing, and that visible
// ones do.
func TestInvisibleUpdatesSkipped(t *testing.T) {
	svc := k8stest.ClusterIPService("prod", "web", []string{"10.0.0.80"}, k8stest.TCP("http", 80))
	sl := k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)),
		k8stest.Endpoint{Addrs: []string{"10.0.11.1"}})
	ns := k8stest.Namespace("prod")
	c := plugintest.StartCluster(t, plugintest.Zones, ns, svc, sl)

	cases := []struct {
		name    string
		change  func() runtime.Object
		key     string
		visible bool
	}{
		{"service annotations", func() runtime.Object {
			svc.Annotations = map[string]string{"note": "x"}
			return svc
		}, "prod/web", false},
		{"service labels", func() runtime.Object { return k8stest.WithLabels(svc, "tier", "front") }, "prod/web", false},
		{"service session affinity", func() runtime.Object {
			svc.Spec.SessionAffinity = api.ServiceAffinityClientIP
			return svc
		}, "prod/web", false},
		{"service port target", func() runtime.Object {
			svc.Spec.Ports[0].TargetPort.IntVal = 8080
			return svc
		}, "prod/web", false},
		{"slice annotations and labels", func() runtime.Object {
			sl.Annotations = map[string]string{"note": "x"}
			return k8stest.WithLabels(sl, "tier", "front")
		}, "prod/web", false},
		{"slice endpoint topology", func() runtime.Object {
			node, zoneName := "node-1", "zone-a"
			sl.Endpoints[0].NodeName, sl.Endpoints[0].Zone = &node, &zoneName
			serving := true
			sl.Endpoints[0].Conditions.Serving = &serving
			return sl
		}, "prod/web", false},
		{"namespace labels", func() runtime.Object { return k8stest.WithLabels(ns, "team", "a") }, "namespace:prod", false},
		{"service port number", func() runtime.Object {
			svc.Spec.Ports[0].Port = 81
			return svc
		}, "prod/web", true},
		{"slice endpoint address", func() runtime.Object {
			sl.Endpoints[0].Addresses = []string{"10.0.11.2"}
			return sl
		}, "prod/web", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mark := c.Applied.Mark()
			c.Update(t, tc.change())
			c.Barrier(t)
			n := c.Applied.Since(mark, tc.key)
			if tc.visible && n == 0 {
				t.Errorf("a visible change did not queue %s", tc.key)
			}
			if !tc.visible && n != 0 {
				t.Errorf("an invisible change queued %s %d times", tc.key, n)
			}
		})
	}
	c.Expect(t, "_http._tcp.web.prod.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
		plugintest.RecSRV("_http._tcp.web.prod.svc.cluster.local.", 100, 81, "web.prod.svc.cluster.local."))
	c.Expect(t, "10-0-11-2.web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-0-11-2.web.prod.svc.cluster.local.", "10.0.11.2"))
}

// TestUnrepresentable leaves out what DNS cannot show, keeps everything else of the same and of
// other services, and counts each problem once per object version.
func TestUnrepresentable(t *testing.T) {
	const (
		web  = "web.prod.svc.cluster.local."
		good = "good.prod.svc.cluster.local."
	)
	long := strings.Repeat("h", 64)
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "good", []string{"10.0.0.90"}, k8stest.TCP("http", 80)),
		k8stest.WithRV(k8stest.Slice("prod", "good", "good-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.12.1"}, Hostname: "g"}), "1"))
	rejected := func() float64 { return testutil.ToFloat64(c.Metrics.Rejected) }
	c.Expect(t, good, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(good, "10.0.0.90"))

	svc := k8stest.ClusterIPService("prod", "web", []string{"10.0.0.91", "fd00::zz"},
		k8stest.TCP("http", 80), k8stest.TCP("HTTP", 81), k8stest.TCP("8080", 8080), k8stest.UDP("dns", 53))
	v4 := k8stest.Slice("prod", "web", "web-v4", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80), k8stest.SlicePort("Bad", api.ProtocolTCP, 81)),
		k8stest.Endpoint{Addrs: []string{"10.0.12.2"}, Hostname: "ok"},
		k8stest.Endpoint{Addrs: []string{"10.0.12.3"}, Hostname: "bad_name"},
		k8stest.Endpoint{Addrs: []string{"10.0.12.4"}, Hostname: long},
		k8stest.Endpoint{Addrs: []string{"fd00::5", "10.0.12.5"}, Hostname: "mixed"})
	v6 := k8stest.Slice("prod", "web", "web-v6", discovery.AddressTypeIPv6, nil,
		k8stest.Endpoint{Addrs: []string{"::ffff:10.0.12.6"}, Hostname: "mapped"},
		k8stest.Endpoint{Addrs: []string{"fd00::7"}, Hostname: "six"})
	// Problems: the bad cluster IP, the port HTTP of the service; the port Bad, two hostnames and an
	// IPv6 address in the IPv4 slice; the mapped address in the IPv6 slice. (A port name of digits
	// alone is a DNS label, which a Service's port name must be, and is served.)
	before := rejected()
	c.Create(t, svc, v4, v6)
	c.Barrier(t)
	if got := rejected() - before; got != 7 {
		t.Errorf("rejected grew by %v, want 7", got)
	}
	c.Expect(t, web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web, "10.0.0.91"))
	c.Expect(t, web, dns.TypeAAAA, dns.RcodeSuccess)
	c.Expect(t, "_http._tcp."+web, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_http._tcp."+web, 100, 80, web))
	c.Expect(t, "_dns._udp."+web, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_dns._udp."+web, 100, 53, web))
	c.Expect(t, "_8080._tcp."+web, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_8080._tcp."+web, 100, 8080, web))
	c.NX(t, "bad_name."+web, long[:63]+"."+web)
	c.Expect(t, "ok."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("ok."+web, "10.0.12.2"))
	// An endpoint whose hostname cannot be a label is still served under its address.
	c.Expect(t, "10-0-12-3."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-0-12-3."+web, "10.0.12.3"))
	c.Expect(t, "10-0-12-4."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-0-12-4."+web, "10.0.12.4"))
	c.Expect(t, "mixed."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("mixed."+web, "10.0.12.5"))
	c.Expect(t, "mixed."+web, dns.TypeAAAA, dns.RcodeSuccess)
	c.NX(t, "mapped."+web)
	c.Expect(t, "six."+web, dns.TypeAAAA, dns.RcodeSuccess, plugintest.RecAAAA("six."+web, "fd00::7"))
	c.Expect(t, good, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(good, "10.0.0.90"))
	c.Expect(t, "g."+good, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("g."+good, "10.0.12.1"))

	t.Run("rebuilt without new versions: not counted again", func(t *testing.T) {
		before := rejected()
		c.Create(t, k8stest.Slice("prod", "web", "web-v4b", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.12.8"}, Hostname: "more"}))
		c.Barrier(t)
		c.Expect(t, "more."+web, dns.TypeA, dns.RcodeSuccess, plugintest.RecA("more."+web, "10.0.12.8"))
		if got := rejected() - before; got != 0 {
			t.Errorf("rejected grew by %v on a rebuild, want 0", got)
		}
	})

	t.Run("a new slice version is counted, even with the service unchanged", func(t *testing.T) {
		before := rejected()
		v6.Endpoints = k8stest.Slice("", "", "", "", nil,
			k8stest.Endpoint{Addrs: []string{"::ffff:10.0.12.6"}, Hostname: "mapped"}, k8stest.Endpoint{Addrs: []string{"fd00::7"}, Hostname: "six"},
			k8stest.Endpoint{Addrs: []string{"10.0.12.9"}, Hostname: "four"}).Endpoints
		c.Update(t, v6)
		c.Barrier(t)
		if got := rejected() - before; got != 2 {
			t.Errorf("rejected grew by %v, want 2 (the new version's two problems)", got)
		}
		c.Expect(t, "six."+web, dns.TypeAAAA, dns.RcodeSuccess, plugintest.RecAAAA("six."+web, "fd00::7"))
	})

	t.Run("a new service version is counted", func(t *testing.T) {
		before := rejected()
		svc.Spec.Ports = k8stest.SvcPorts(k8stest.TCP("http", 80), k8stest.TCP("HTTP", 81))
		c.Update(t, svc)
		c.Barrier(t)
		if got := rejected() - before; got != 2 {
			t.Errorf("rejected grew by %v, want 2 (the cluster IP and the port of the new version)", got)
		}
		c.NX(t, "_dns._udp."+web)
	})

	t.Run("deleted service forgets what it reported", func(t *testing.T) {
		c.Remove(t, svc)
		c.Barrier(t)
		c.NX(t, web) // and the applier forgets what it reported (TestReportsForgottenWithTheService)
	})

	t.Run("ExternalName", func(t *testing.T) {
		for _, tc := range []struct {
			target string
			served string // "": rejected
		}{
			{"1.2.3.4", ""},
			{"fd00::1", ""},
			{"", ""},
			{"bad name.example.com", ""},
			{"example.com..", ""},
			{"example.com.", "example.com."},
			{"Example.COM", "example.com."},
		} {
			name := fmt.Sprintf("ext-%d", c.Seq.Add(1))
			owner := name + ".prod.svc.cluster.local."
			before := rejected()
			c.Create(t, k8stest.ExternalNameService("prod", name, tc.target))
			c.Barrier(t)
			if tc.served == "" {
				c.NX(t, owner)
				if got := rejected() - before; got != 1 {
					t.Errorf("ExternalName %q: rejected grew by %v, want 1", tc.target, got)
				}
				continue
			}
			c.Expect(t, owner, dns.TypeCNAME, dns.RcodeSuccess, owner+" 5 IN CNAME "+tc.served)
			if got := rejected() - before; got != 0 {
				t.Errorf("ExternalName %q: rejected grew by %v, want 0", tc.target, got)
			}
		}
		c.Expect(t, good, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(good, "10.0.0.90"))
	})
}

// TestPTROwnership shares one address between services.
func TestPTROwnership(t *testing.T) {
	const (
		rev  = "1.13.0.10.in-addr.arpa."
		svcA = "a.prod.svc.cluster.local."
		svcB = "b.prod.svc.cluster.local."
		svcC = "c.prod.svc.cluster.local."
	)
	sliceA := k8stest.Slice("prod", "a", "a-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.13.1"}, Hostname: "x"})
	sliceB := k8stest.Slice("prod", "b", "b-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.13.1"}, Hostname: "y"})
	svcs := []*api.Service{k8stest.HeadlessService("prod", "a"), k8stest.HeadlessService("prod", "b")}
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"), svcs[0], svcs[1], sliceA, sliceB)
	c.Expect(t, rev, dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR(rev, "x."+svcA), plugintest.RecPTR(rev, "y."+svcB))

	c.Create(t, k8stest.ClusterIPService("prod", "c", []string{"10.0.13.1"}))
	c.Barrier(t)
	c.Expect(t, rev, dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR(rev, svcC))

	c.Remove(t, k8stest.ClusterIPService("prod", "c", []string{"10.0.13.1"}))
	c.Barrier(t)
	c.Expect(t, rev, dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR(rev, "x."+svcA), plugintest.RecPTR(rev, "y."+svcB))

	c.Remove(t, sliceA)
	c.Barrier(t)
	c.Expect(t, rev, dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR(rev, "y."+svcB))

	c.Remove(t, svcs[1])
	c.Barrier(t)
	c.NX(t, rev)
}

// TestSerialMoves checks that the SOA serial moves after a change.
func TestSerialMoves(t *testing.T) {
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("prod"))
	serial := func() uint32 {
		apex, _, _ := c.Tree.Lookup(plugintest.ClusterZone, plugintest.ClusterZone)
		return apex.(*records.FixedSet).SOA[0].(*dns.SOA).Serial
	}
	before := serial()
	// The serial is in seconds: a change in the second of the last one moves it only in the next
	// (TestSerialMovesWithinSecond); here the change is served with its serial at once.
	plugintest.WaitFor(t, "the next second", func() bool { return time.Now().Unix() > int64(before) })
	c.Create(t, k8stest.ClusterIPService("prod", "web", []string{"10.0.0.100"}))
	c.Barrier(t)
	c.Expect(t, "web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("web.prod.svc.cluster.local.", "10.0.0.100"))
	if after := serial(); after <= before {
		t.Errorf("serial %d did not move from %d", after, before)
	}
	rev, _, _ := c.Tree.Lookup("10.in-addr.arpa.", "10.in-addr.arpa.")
	if got := rev.(*records.FixedSet).SOA[0].(*dns.SOA).Serial; got != serial() {
		t.Errorf("reverse plugintest.ClusterZone serial %d, want %d", got, serial())
	}
}

// TestReadyAfterSync holds the first list back: until it arrives Ready is false and names the
// plugin cannot know answer SERVFAIL.
func TestReadyAfterSync(t *testing.T) {
	k, a := plugintest.Wired(t, plugintest.Zones)
	k.Watch.StartupTimeout = 0 // start returns at once: the list is held
	fa := k8stest.NewFakeAPI(k8stest.Namespace("prod"), k8stest.ClusterIPService("prod", "web", []string{"10.0.0.110"}))
	release := make(chan struct{})
	released := sync.OnceFunc(func() { close(release) })
	fa.Client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	w := plugintest.WatcherFor(t, k, a, fa.Client, fa.Versions.Client(), nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		released() // the held list ignores the stop
		_ = w.Stop()
	}()

	if k.Ready() {
		t.Fatal("Ready before the first list")
	}
	plugintest.Expect(t, k, "web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeServerFailure)
	plugintest.Expect(t, k, "nope.prod.svc.cluster.local.", dns.TypeA, dns.RcodeServerFailure)

	released()
	plugintest.WaitFor(t, "Ready", k.Ready)
	plugintest.Expect(t, k, "web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("web.prod.svc.cluster.local.", "10.0.0.110"))
	plugintest.Expect(t, k, "nope.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError)
}

// TestPortNamesWithoutALetter: a Service's port name is a DNS label, which need not hold a letter:
// kubectl create service clusterip late --tcp=80:80 names its port 80-80, and its SRV name answers,
// as the in-tree plugin's does.
func TestPortNamesWithoutALetter(t *testing.T) {
	const late = "late.ns1.svc.cluster.local."
	svc := k8stest.ClusterIPService("ns1", "late", []string{"10.0.0.95"}, k8stest.TCP("80-80", 80))
	svc.Spec.Ports[0].TargetPort.IntVal = 80
	c := plugintest.StartCluster(t, plugintest.Zones, k8stest.Namespace("ns1"), svc,
		k8stest.Slice("ns1", "late", "late-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("80-80", api.ProtocolTCP, 80)),
			k8stest.Endpoint{Addrs: []string{"10.0.13.1"}}))
	c.Expect(t, "_80-80._tcp."+late, dns.TypeSRV, dns.RcodeSuccess, plugintest.RecSRV("_80-80._tcp."+late, 100, 80, late))
	c.NX(t, "_80-80._udp."+late)
}

// TestSliceWithoutItsService: an EndpointSlice whose kubernetes.io/service-name label names a
// Service that does not exist gives its addresses no names, PTR records included (README's
// Differences: the in-tree plugin answers their PTR, pointing at names that do not resolve); once
// the Service exists, they have both.
func TestSliceWithoutItsService(t *testing.T) {
	const (
		ptr  = "1.5.244.10.in-addr.arpa."
		name = "double-ep.svc2.testns.svc.cluster.local."
	)
	objs := func() []runtime.Object {
		return []runtime.Object{k8stest.Namespace("testns"),
			k8stest.Slice("testns", "svc2", "svc2-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)),
				k8stest.Endpoint{Addrs: []string{"10.244.5.1"}, Hostname: "double-ep"})}
	}
	c := plugintest.StartCluster(t, "kubetree cluster.local 10.in-addr.arpa", objs()...)
	c.Barrier(t)
	c.NX(t, ptr, name, "svc2.testns.svc.cluster.local.")

	// The in-tree plugin, on the same objects, answers the PTR with a name it says does not exist.
	inTree := plugintest.InTreeHandler(t, "kubernetes cluster.local 10.in-addr.arpa", objs())
	plugintest.CheckHandler(t, inTree, func(plugin.Handler) {}, plugintest.Case{AnswerOnly: true, Case: test.Case{Qname: ptr, Qtype: dns.TypePTR,
		Answer: []dns.RR{test.PTR(plugintest.RecPTR(ptr, name))}}})
	plugintest.CheckHandler(t, inTree, func(plugin.Handler) {}, plugintest.Case{AnswerOnly: true, Case: test.Case{Qname: name, Qtype: dns.TypeA,
		Rcode: dns.RcodeNameError}})

	c.Create(t, k8stest.HeadlessService("testns", "svc2", k8stest.TCP("http", 80)))
	c.Barrier(t)
	c.Expect(t, ptr, dns.TypePTR, dns.RcodeSuccess, plugintest.RecPTR(ptr, name))
	c.Expect(t, name, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(name, "10.244.5.1"))
}
