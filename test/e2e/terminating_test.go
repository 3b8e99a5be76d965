package e2e

import (
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestServingTerminatingOnAPIServer takes a headless service through a rollout, as the endpoint
// slice controller writes it, on the real API server: kubetree with serving_terminating answers
// the old endpoints while every one of them is terminating but still serving (A, SRV, endpoint
// name, PTR), and only the new one once it is ready; kubetree without it answers NXDOMAIN in
// between.
func TestServingTerminatingOnAPIServer(t *testing.T) {
	ns := newNamespace(t, "terminating")
	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	ports := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432))
	slice := func(name string, eps ...k8stest.Endpoint) *discovery.EndpointSlice {
		return k8stest.Slice(ns, "db", name, discovery.AddressTypeIPv4, ports, eps...)
	}
	applySlice(t, slice("db-old", k8stest.Endpoint{Addrs: []string{"10.94.0.1"}, Hostname: "db-0"},
		k8stest.Endpoint{Addrs: []string{"10.94.0.2"}, Hostname: "db-1"}))

	on := startCoreDNS(t, "serving_terminating")
	off := startCoreDNS(t)
	db := svcName(ns, "db")
	for _, c := range []*coreDNS{on, off} {
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitAnswer(t, db, dns.TypeA, "10.94.0.1", "10.94.0.2")
	}

	// The old pods are deleted: terminating, not ready, still serving through their grace period.
	applySlice(t, slice("db-old", k8stest.Endpoint{Addrs: []string{"10.94.0.1"}, Hostname: "db-0", NotReady: true, Terminating: true},
		k8stest.Endpoint{Addrs: []string{"10.94.0.2"}, Hostname: "db-1", NotReady: true, Terminating: true}))
	off.waitRcode(t, db, dns.TypeA, dns.RcodeNameError)
	on.waitAnswer(t, db, dns.TypeA, "10.94.0.1", "10.94.0.2")
	on.waitAnswer(t, "db-0."+db, dns.TypeA, "10.94.0.1")
	on.waitAnswer(t, "_pg._tcp."+db, dns.TypeSRV, "0 50 5432 db-0."+db, "0 50 5432 db-1."+db)
	on.waitAnswer(t, "1.0.94.10.in-addr.arpa.", dns.TypePTR, "db-0."+db)
	for _, name := range []string{"db-0." + db, "1.0.94.10.in-addr.arpa."} {
		qtype := dns.TypeA
		if name[0] == '1' {
			qtype = dns.TypePTR
		}
		if m := off.query(t, "udp", name, qtype); m.Rcode != dns.RcodeNameError {
			t.Errorf("without serving_terminating, %s: %s, want NXDOMAIN", name, dns.RcodeToString[m.Rcode])
		}
	}

	// One stops serving (its process has exited): it is no longer answered.
	applySlice(t, slice("db-old", k8stest.Endpoint{Addrs: []string{"10.94.0.1"}, Hostname: "db-0", NotReady: true, Terminating: true},
		k8stest.Endpoint{Addrs: []string{"10.94.0.2"}, Hostname: "db-1", NotReady: true, Terminating: true, NotServing: true}))
	on.waitAnswer(t, db, dns.TypeA, "10.94.0.1")

	// A new pod is ready: only it, in both.
	applySlice(t, slice("db-new", k8stest.Endpoint{Addrs: []string{"10.94.0.3"}, Hostname: "db-2"}))
	for _, c := range []*coreDNS{on, off} {
		c.waitAnswer(t, db, dns.TypeA, "10.94.0.3")
		c.waitAnswer(t, "_pg._tcp."+db, dns.TypeSRV, "0 100 5432 db-2."+db)
		c.waitRcode(t, "db-0."+db, dns.TypeA, dns.RcodeNameError)
	}
}
