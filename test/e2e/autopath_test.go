package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestAutoPathAgainstKubernetes runs `autopath @kubetree` with `pods verified` beside CoreDNS's own
// `autopath @kubernetes` with `pods verified` on the same API server, and sends the same queries to
// both from a pod's address (pods here have loopback addresses, so a query can come from one): the
// replies must be the same, and autopath must have done its work.
func TestAutoPathAgainstKubernetes(t *testing.T) {
	baz, bar := newNamespace(t, "autopath-baz"), newNamespace(t, "autopath-bar")
	createService(t, k8stest.ClusterIPService(baz, "local", nil, k8stest.TCP("http", 80)))
	foo := createService(t, k8stest.ClusterIPService(bar, "foo", nil, k8stest.TCP("http", 80)))
	const client, other = "127.0.88.5", "127.0.88.6"
	runningPod(t, baz, "client", map[string]string{"app": "shop"}, client)
	runningPod(t, bar, "other", nil, other)

	servers := map[string]*coreDNS{
		"kubetree":   startCoreDNSWith(t, []string{"autopath @kubetree"}, "pods verified"),
		"kubernetes": startCoreDNSPlugin(t, "kubernetes", []string{"autopath @kubernetes"}, "pods verified"),
	}
	for _, c := range servers {
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitAnswer(t, svcName(bar, "foo"), dns.TypeA, foo.Spec.ClusterIP)
	}
	// The pods may reach the two plugins' indexes after their services: wait for both to know them.
	for _, c := range servers {
		c.waitAnswer(t, "127-0-88-5."+baz+".pod.cluster.local.", dns.TypeA, client)
	}

	cases := []struct {
		rule, source, name string
		qtype              uint16
		want               string // the reply, as reply() writes it
	}{
		{"a short name in the client's namespace, as its resolver first asks it", client, "local." + baz + ".svc.cluster.local.", dns.TypeA, ""},
		{"name.namespace, answered in one round trip", client, "foo." + bar + "." + baz + ".svc.cluster.local.", dns.TypeA,
			fmt.Sprintf("NOERROR foo.%[1]s.%[2]s.svc.cluster.local. CNAME foo.%[1]s.svc.cluster.local.; foo.%[1]s.svc.cluster.local. A %[3]s", bar, baz, foo.Spec.ClusterIP)},
		{"an external name, through forward", client, "www.example.org." + baz + ".svc.cluster.local.", dns.TypeA,
			"NOERROR www.example.org." + baz + ".svc.cluster.local. CNAME www.example.org.; www.example.org. A 192.0.2.1"},
		{"a client that is no pod: no autopath", "127.0.88.9", "foo." + bar + "." + baz + ".svc.cluster.local.", dns.TypeA, "NXDOMAIN"},
		{"pods verified: the pod's own name", other, "127-0-88-6." + bar + ".pod.cluster.local.", dns.TypeA,
			"NOERROR 127-0-88-6." + bar + ".pod.cluster.local. A 127.0.88.6"},
		{"pods verified: the address in another namespace", other, "127-0-88-6." + baz + ".pod.cluster.local.", dns.TypeA, "NXDOMAIN"},
	}
	for _, tc := range cases {
		got := map[string]string{}
		for name, c := range servers {
			got[name] = reply(t, c, tc.source, tc.name, tc.qtype)
		}
		if got["kubetree"] != got["kubernetes"] {
			t.Errorf("%s: kubetree and kubernetes differ:\n  kubetree:   %s\n  kubernetes: %s", tc.rule, got["kubetree"], got["kubernetes"])
		}
		if tc.want != "" && got["kubetree"] != tc.want {
			t.Errorf("%s: %s\n  want %s", tc.rule, got["kubetree"], tc.want)
		}
	}
}

// reply asks c one question from source (a loopback address), over UDP.
func reply(t testing.TB, c *coreDNS, source, name string, qtype uint16) string {
	t.Helper()
	client := &dns.Client{Net: "udp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(source)}}}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := client.Exchange(m, c.addr)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", name, dns.TypeToString[qtype], source, err)
	}
	return summarize(r)
}

// summarize writes a reply as its rcode and its answer records in order.
func summarize(r *dns.Msg) string {
	parts := []string{dns.RcodeToString[r.Rcode]}
	var rrs []string
	for _, rr := range r.Answer {
		f := strings.Fields(rr.String())
		rrs = append(rrs, f[0]+" "+strings.Join(f[3:], " "))
	}
	if len(rrs) > 0 {
		parts = append(parts, strings.Join(rrs, "; "))
	}
	return strings.Join(parts, " ")
}

// TestAutoPathBehindNodeLocalCache: a node-local cache forwards its pods' queries from its own
// address, with the pod's in an EDNS0 client-subnet option. kubetree believes the option only from
// the sources client_subnet_from lists (the in-tree plugin has no such option and autopaths for
// nobody there, coredns/coredns#4308).
func TestAutoPathBehindNodeLocalCache(t *testing.T) {
	baz, bar := newNamespace(t, "ecs-baz"), newNamespace(t, "ecs-bar")
	foo := createService(t, k8stest.ClusterIPService(bar, "foo", nil, k8stest.TCP("http", 80)))
	const client, cache, stranger = "127.0.89.5", "127.0.89.100", "127.0.89.101"
	runningPod(t, baz, "client", nil, client)
	c := startCoreDNSWith(t, []string{"autopath @kubetree"}, "pods verified", "client_subnet_from "+cache+"/32")
	eventually(t, "ready", 30*time.Second, c.isReady)
	c.waitAnswer(t, "127-0-89-5."+baz+".pod.cluster.local.", dns.TypeA, client)

	name := "foo." + bar + "." + baz + ".svc.cluster.local."
	autopathed := fmt.Sprintf("NOERROR %s CNAME foo.%s.svc.cluster.local.; foo.%s.svc.cluster.local. A %s", name, bar, bar, foo.Spec.ClusterIP)
	for _, tc := range []struct{ rule, source, want string }{
		{"the trusted cache, for the pod", cache, autopathed},
		{"an untrusted source claiming to be the pod", stranger, "NXDOMAIN"},
	} {
		if got := replyWithSubnet(t, c, tc.source, client, name); got != tc.want {
			t.Errorf("%s: %s\n  want %s", tc.rule, got, tc.want)
		}
	}
}

// replyWithSubnet is reply with an EDNS0 client-subnet option naming addr.
func replyWithSubnet(t testing.TB, c *coreDNS, source, addr, name string) string {
	t.Helper()
	client := &dns.Client{Net: "udp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(source)}}}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 32, Address: net.ParseIP(addr).To4()})
	r, _, err := client.Exchange(m, c.addr)
	if err != nil {
		t.Fatalf("%s from %s: %v", name, source, err)
	}
	return summarize(r)
}
