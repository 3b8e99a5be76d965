package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestIsolateAcrossNamespaces: pods in three namespaces (their addresses on loopback, so that a
// query comes from the pod) ask kubetree with `pods verified`, `isolate refuse` and
// `isolate_labels`, behind `cache 30` in the same server block as deploy/'s Corefile has it: each
// resolves its own namespace, default and the labelled namespace, and nothing of the others (A,
// AAAA, SRV, endpoint names, PTR, pod names), each hidden query counted, whichever pod asked a name
// first (the cache bypasses kubetree's zones: an answer is made for its client); a client that is
// no pod resolves the open namespaces only.
func TestIsolateAcrossNamespaces(t *testing.T) {
	const label = "isolate-e2e.kubetree.io/open"
	names := []string{newNamespace(t, "iso-red"), newNamespace(t, "iso-green"), newNamespace(t, "iso-blue")}
	open := newNamespace(t, "iso-open")
	ns, err := env.client.CoreV1().Namespaces().Get(bg, open, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{label: "true"}
	if _, err := env.client.CoreV1().Namespaces().Update(bg, ns, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	shared := createService(t, k8stest.ClusterIPService(open, "cache", nil, k8stest.TCP("redis", 6379)))

	type tenant struct{ ns, pod, endpoint, clusterIP string }
	tenants := make([]tenant, len(names))
	for i, n := range names {
		tn := tenant{ns: n, pod: fmt.Sprintf("127.0.93.%d", i+1), endpoint: fmt.Sprintf("10.93.%d.10", i+1)}
		runningPod(t, n, "client", nil, tn.pod)
		tn.clusterIP = createService(t, k8stest.ClusterIPService(n, "api", nil, k8stest.TCP("http", 80))).Spec.ClusterIP
		createService(t, k8stest.HeadlessService(n, "db", k8stest.TCP("sql", 5432)))
		applySlice(t, k8stest.Slice(n, "db", "db-1", discovery.AddressTypeIPv4,
			k8stest.SlicePorts(k8stest.SlicePort("sql", api.ProtocolTCP, 5432)),
			k8stest.Endpoint{Addrs: []string{tn.endpoint}, Hostname: "db-0"}))
		tenants[i] = tn
	}

	c := startCoreDNSWith(t, []string{"cache 30"}, "pods verified", "isolate refuse", "isolate_labels "+label+"=true")
	eventually(t, "ready", 30*time.Second, c.isReady)
	// Every pod, service and slice known before asking (from 127.0.0.1, an unidentified client,
	// which resolves the open namespace only: the tenants' names are waited for from their pods).
	c.waitAnswer(t, svcName(open, "cache"), dns.TypeA, shared.Spec.ClusterIP)
	for _, tn := range tenants {
		eventually(t, tn.ns+" known to its pod", 30*time.Second, func() bool {
			return replyFrom(t, c, tn.pod, "db-0.db."+tn.ns+".svc.cluster.local.", dns.TypeA) == "NOERROR "+tn.endpoint
		})
	}

	hiddenBefore := probeMetric(c.scrape(), "coredns_kubetree_isolated_total", `client="pod"`)
	hidden := 0
	for _, from := range tenants {
		for _, to := range tenants {
			visible := from.ns == to.ns
			ptr, _ := dns.ReverseAddr(to.endpoint)
			clusterPTR, _ := dns.ReverseAddr(to.clusterIP)
			for _, q := range []struct {
				name  string
				qtype uint16
				want  string
			}{
				{svcName(to.ns, "api"), dns.TypeA, "NOERROR " + to.clusterIP},
				{svcName(to.ns, "api"), dns.TypeAAAA, "NOERROR"},
				{svcName(to.ns, "db"), dns.TypeA, "NOERROR " + to.endpoint},
				{"db-0." + svcName(to.ns, "db"), dns.TypeA, "NOERROR " + to.endpoint},
				{"_sql._tcp." + svcName(to.ns, "db"), dns.TypeSRV, "NOERROR 0 100 5432 db-0." + svcName(to.ns, "db")},
				{"_http._tcp." + svcName(to.ns, "api"), dns.TypeSRV, "NOERROR 0 100 80 " + svcName(to.ns, "api")},
				{ptr, dns.TypePTR, "NOERROR db-0." + svcName(to.ns, "db")},
				{clusterPTR, dns.TypePTR, "NOERROR " + svcName(to.ns, "api")},
				{dashed(to.pod) + "." + to.ns + ".pod.cluster.local.", dns.TypeA, "NOERROR " + to.pod},
			} {
				want := q.want
				if !visible {
					want = "NXDOMAIN"
					hidden++
				}
				if got := replyFrom(t, c, from.pod, q.name, q.qtype); got != want {
					t.Errorf("%s %s from the pod in %s: %s, want %s", q.name, dns.TypeToString[q.qtype], from.ns, got, want)
				}
			}
		}
		for _, q := range []struct {
			rule, name string
			qtype      uint16
			want       string
		}{
			{"the labelled namespace", svcName(open, "cache"), dns.TypeA, "NOERROR " + shared.Spec.ClusterIP},
			{"the kubernetes Service in default", "kubernetes.default.svc.cluster.local.", dns.TypeA, "NOERROR " + kubernetesIP(t)},
			{"dns-version", "dns-version.cluster.local.", dns.TypeTXT, `NOERROR "1.1.0"`},
			{"a name outside the zones, forwarded", "www.example.org.", dns.TypeA, "NOERROR 192.0.2.1"},
		} {
			if got := replyFrom(t, c, from.pod, q.name, q.qtype); got != q.want {
				t.Errorf("%s from the pod in %s: %s, want %s", q.rule, from.ns, got, q.want)
			}
		}
	}
	if got := probeMetric(c.scrape(), "coredns_kubetree_isolated_total", `client="pod"`) - hiddenBefore; got != float64(hidden) {
		t.Errorf("coredns_kubetree_isolated_total{client=\"pod\"} grew by %v, want %d (one per hidden query)", got, hidden)
	}
	// A client that is no pod, under refuse: the open namespaces only.
	if got := replyFrom(t, c, "127.0.93.99", svcName(tenants[0].ns, "api"), dns.TypeA); got != "NXDOMAIN" {
		t.Errorf("a tenant's service from a client that is no pod: %s, want NXDOMAIN", got)
	}
	if got := probeMetric(c.scrape(), "coredns_kubetree_isolated_total", `client="unidentified"`); got < 1 {
		t.Errorf("coredns_kubetree_isolated_total{client=\"unidentified\"} is %v, want the query counted", got)
	}
}

// replyFrom asks c one question from source over UDP, and writes the reply as its rcode and the
// rdata of its answer records.
func replyFrom(t testing.TB, c *coreDNS, source, name string, qtype uint16) string {
	t.Helper()
	client := &dns.Client{Net: "udp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(source)}}}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := client.Exchange(m, c.addr)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", name, dns.TypeToString[qtype], source, err)
	}
	return strings.Join(append([]string{dns.RcodeToString[r.Rcode]}, answers(r)...), " ")
}

// kubernetesIP is the cluster IP of the kubernetes Service in default.
func kubernetesIP(t testing.TB) string {
	t.Helper()
	s, err := env.client.CoreV1().Services("default").Get(bg, "kubernetes", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Spec.ClusterIP
}

// dashed is an IPv4 address as a pod name's label.
func dashed(addr string) string {
	return strings.ReplaceAll(addr, ".", "-")
}
