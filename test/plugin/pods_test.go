package plugin_test

import (
	"net/netip"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	api "k8s.io/api/core/v1"
)

const verifiedZones = "kubetree cluster.local {\n\tpods verified\n}"

// TestPodsVerified: <address>.<ns>.pod.<zone> answers only while a pod of that namespace has the
// address, through every change a pod's addresses go through.
func TestPodsVerified(t *testing.T) {
	const (
		web4 = "10-244-0-5.prod.pod.cluster.local."
		web6 = "fd00--5.prod.pod.cluster.local."
	)
	c := plugintest.StartCluster(t, verifiedZones, k8stest.Namespace("prod"), k8stest.Namespace("staging"),
		k8stest.Pod("prod", "web-0", "10.244.0.5", "fd00::5"))

	c.Expect(t, web4, dns.TypeA, dns.RcodeSuccess, plugintest.RecA(web4, "10.244.0.5"))
	c.Expect(t, web6, dns.TypeAAAA, dns.RcodeSuccess, plugintest.RecAAAA(web6, "fd00::5"))
	c.Expect(t, web4, dns.TypeAAAA, dns.RcodeSuccess) // the name exists: NODATA for the other family
	c.Expect(t, "10-244-0-5.staging.pod.cluster.local.", dns.TypeA, dns.RcodeNameError)
	c.Expect(t, "10-244-0-6.prod.pod.cluster.local.", dns.TypeA, dns.RcodeNameError)
	c.Expect(t, "10-244-0-5.nope.pod.cluster.local.", dns.TypeA, dns.RcodeNameError)
	c.Expect(t, "prod.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess) // the namespace's name is NODATA

	// The pod moves to a new address: the old name goes, the new one comes.
	c.Update(t, k8stest.Pod("prod", "web-0", "10.244.0.7"))
	c.Barrier(t)
	c.NX(t, web4, web6)
	c.Expect(t, "10-244-0-7.prod.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-244-0-7.prod.pod.cluster.local.", "10.244.0.7"))

	// A pod that has finished has released its address, although its status still shows it.
	done := k8stest.Pod("prod", "job-1", "10.244.0.8")
	done.Status.Phase = api.PodSucceeded
	c.Create(t, done)
	c.Barrier(t)
	c.NX(t, "10-244-0-8.prod.pod.cluster.local.")

	// Deleted: gone.
	c.Remove(t, k8stest.Pod("prod", "web-0"))
	c.Barrier(t)
	c.NX(t, "10-244-0-7.prod.pod.cluster.local.")

	// A host-network pod has the node's address: it answers pods verified, as in the in-tree plugin.
	host := k8stest.Pod("staging", "agent", "192.168.1.10")
	host.Spec.HostNetwork = true
	c.Create(t, host)
	c.Barrier(t)
	c.Expect(t, "192-168-1-10.staging.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("192-168-1-10.staging.pod.cluster.local.", "192.168.1.10"))
}

// TestPodIdentity: a client is a pod only when exactly one live pod that is not on the host's
// network has its address.
func TestPodIdentity(t *testing.T) {
	c := plugintest.StartCluster(t, verifiedZones, k8stest.Namespace("prod"), k8stest.Namespace("staging"),
		k8stest.Pod("prod", "web-0", "10.244.0.5"))
	who := func(addr string) string {
		p := c.Pods.ClientAt(netip.MustParseAddr(addr))
		if p == nil {
			return "nobody"
		}
		return p.Namespace + "/" + p.Name
	}
	if got := who("10.244.0.5"); got != "prod/web-0" {
		t.Fatalf("10.244.0.5 is %s, want prod/web-0", got)
	}
	if got := who("10.244.0.6"); got != "nobody" {
		t.Errorf("an address no pod has is %s", got)
	}

	// Two pods reuse one address one after the other: the new pod arrives while the old one is still
	// there (its deletion is late). Until it goes, the address is ambiguous: no one's.
	c.Create(t, k8stest.Pod("staging", "api-0", "10.244.0.5"))
	c.Barrier(t)
	if got := who("10.244.0.5"); got != "nobody" {
		t.Errorf("an address two pods claim is %s", got)
	}
	c.Expect(t, "10-244-0-5.prod.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-244-0-5.prod.pod.cluster.local.", "10.244.0.5"))
	c.Expect(t, "10-244-0-5.staging.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, plugintest.RecA("10-244-0-5.staging.pod.cluster.local.", "10.244.0.5"))
	c.Remove(t, k8stest.Pod("prod", "web-0"))
	c.Barrier(t)
	if got := who("10.244.0.5"); got != "staging/api-0" {
		t.Errorf("after the old pod left, 10.244.0.5 is %s, want staging/api-0", got)
	}
	c.NX(t, "10-244-0-5.prod.pod.cluster.local.")

	host := k8stest.Pod("staging", "agent", "192.168.1.10")
	host.Spec.HostNetwork = true
	c.Create(t, host)
	c.Barrier(t)
	if got := who("192.168.1.10"); got != "nobody" {
		t.Errorf("a host-network pod's address is %s", got)
	}
}

// TestPodsRejected: what a pod's identity cannot hold is left out and counted, and nothing else of
// the pod or of other pods is lost.
func TestPodsRejected(t *testing.T) {
	c := plugintest.StartCluster(t, verifiedZones, k8stest.Namespace("prod"))
	rejected := func() float64 { return testutil.ToFloat64(c.Metrics.Rejected) }
	before := rejected()

	bad := k8stest.Pod("prod", "odd", "10.244.0.9", "not-an-address", "::ffff:10.0.0.1")
	bad.Labels = map[string]string{"app": "odd", "note": "bell\a"}
	c.Create(t, bad, k8stest.Pod("prod", "none"))
	c.Barrier(t)
	if got := rejected() - before; got != 3 {
		t.Errorf("rejected grew by %v, want 3 (two addresses and a label)", got)
	}
	p := c.Pods.ClientAt(netip.MustParseAddr("10.244.0.9"))
	if p == nil || len(p.Identity.Labels) != 1 || p.Identity.Labels[0] != [2]string{"app", "odd"} {
		t.Fatalf("the pod's valid parts are not all kept: %+v", p)
	}
	c.NX(t, "0--ffff-a00-1.prod.pod.cluster.local.")
}
