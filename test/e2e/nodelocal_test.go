package e2e

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// The NodeLocal DNSCache of deploy/nodelocal/ on the node: its address (the kubelet's clusterDNS
// in node.sh's KUBETREE_NODELOCAL mode) and where it exports its metrics.
const (
	localDNS         = "169.254.20.10"
	localDNSMetrics  = "9253"
	kubeDNSClusterIP = "10.96.0.10"
)

// TestNodeLocal runs kubetree behind NodeLocal DNSCache on a real node (hack/node.sh with
// KUBETREE_NODELOCAL=1): the pods' resolv.conf names the cache on 169.254.20.10, the cache
// (deploy/nodelocal/) forwards the cluster's zones to kubetree over TCP with the client's address
// in an EDNS0 client-subnet option, and kubetree (deploy/nodelocal/kubetree-configmap.yaml) runs
// autopath @kubetree with pods verified, trusting that option from the node's address only.
// Queries are counted at both servers (coredns_dns_requests_total). Last, with isolate on, pods of
// two namespaces ask each other's names through the cache in both orders: each gets what kubetree
// answers it directly. Needs root, as TestNode (`make e2e-node` runs both).
func TestNodeLocal(t *testing.T) {
	if os.Getenv("KUBETREE_E2E_NODE") == "" {
		t.Skip("needs root and a node; run `make e2e-node` (sets KUBETREE_E2E_NODE=1)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("TestNodeLocal needs root (containerd, kubelet, iptables, a bridge): run `make e2e-node` as root")
	}
	n := startNode(t, nodeLocal)
	foo := n.service(t, k8stest.ClusterIPService("bar", "foo", nil, k8stest.TCP("http", 80)))
	web := n.service(t, k8stest.ClusterIPService("baz", "web", nil, k8stest.TCP("http", 80)))
	n.service(t, k8stest.ExternalNameService("baz", "ext", "www.example.test"))
	// One name per question of the client-subnet checks below: every server on the way caches
	// answers by name, whoever asked.
	claimed := map[string]string{}
	for _, s := range []string{"direct", "cached", "node"} {
		claimed[s] = n.service(t, k8stest.ClusterIPService("bar", s, nil, k8stest.TCP("http", 80))).Spec.ClusterIP
	}
	client := n.waitReady(t, "baz", "client")
	kubetree := n.podIPs(t, "kube-system", "app.kubernetes.io/name=kubetree")
	cache := []string{localDNS}

	t.Run("the pod's resolv.conf names the cache", func(t *testing.T) {
		conf, err := n.dnsq("-t", "conf")
		if err != nil {
			t.Fatalf("%v\n%s", err, conf)
		}
		want := "search baz.svc.cluster.local svc.cluster.local cluster.local\nnameserver " + localDNS + "\noptions ndots:5"
		if strings.TrimSpace(conf) != want {
			t.Errorf("baz/client's resolv.conf:\n%s\nwant\n%s", conf, want)
		}
	})

	// Asked before anything else, so that no server on the way has the answers cached.
	t.Run("one external lookup costs kubetree 2 queries", func(t *testing.T) {
		ktBefore, cacheBefore := n.requests(t, metricsPort, kubetree), n.requests(t, localDNSMetrics, cache)
		autopathBefore := n.counter(t, "coredns_autopath_success_total", metricsPort, kubetree)
		if out, err := n.dnsq("api.example.test"); err != nil || strings.TrimSpace(out) != "198.51.100.8" {
			t.Fatalf("dnsq api.example.test = %v %q", err, out)
		}
		atKubetree, byTypeKubetree := delta(ktBefore, n.requests(t, metricsPort, kubetree))
		atCache, byTypeCache := delta(cacheBefore, n.requests(t, localDNSMetrics, cache))
		autopathed, _ := delta(autopathBefore, n.counter(t, "coredns_autopath_success_total", metricsPort, kubetree))
		report(t, "one lookup of api.example.test from a pod through NodeLocal DNSCache: %d queries at kubetree (%s; %d answered by autopath), %d at the cache (%s); TestNode counts 8 without the cache and autopath",
			atKubetree, byTypeKubetree, autopathed, atCache, byTypeCache)
		// The pod's first search name, A and AAAA, each answered with the whole search done.
		if atKubetree == 0 || atKubetree > 2 {
			t.Errorf("one external lookup cost kubetree %d queries (%s), want at most 2", atKubetree, byTypeKubetree)
		}
		if autopathed != atKubetree {
			t.Errorf("autopath answered %d of the %d queries at kubetree", autopathed, atKubetree)
		}
	})

	// From the pod's side: one question per type (A and AAAA, asked together), each answered
	// with the name the search path found.
	t.Run("foo.bar from a pod in baz is answered in one round trip", func(t *testing.T) {
		cacheBefore, ktBefore := n.requests(t, localDNSMetrics, cache), n.requests(t, metricsPort, kubetree)
		if out, err := n.dnsq("foo.bar"); err != nil || strings.TrimSpace(out) != foo.Spec.ClusterIP {
			t.Fatalf("dnsq foo.bar = %v %q, want %s", err, out, foo.Spec.ClusterIP)
		}
		cacheAfter := n.requests(t, localDNSMetrics, cache)
		atCache, byType := delta(cacheBefore, cacheAfter)
		atKubetree, _ := delta(ktBefore, n.requests(t, metricsPort, kubetree))
		report(t, "dnsq foo.bar in baz: %d questions from the pod (%s), %d at kubetree", atCache, byType, atKubetree)
		for _, typ := range []string{"A", "AAAA"} {
			if d := cacheAfter[typ] - cacheBefore[typ]; d != 1 {
				t.Errorf("the pod asked %d %s questions, want 1 (one round trip): %s", d, typ, byType)
			}
		}
		if atCache != 2 {
			t.Errorf("the pod asked %d questions (%s), want A and AAAA once each", atCache, byType)
		}
		// The answer names the search path's step: the CNAME autopath writes.
		out, err := n.dnsq("-t", "cname", "foo.bar.baz.svc.cluster.local")
		if want := "foo.bar.svc.cluster.local."; err != nil || strings.TrimSpace(out) != want {
			t.Errorf("dnsq -t cname foo.bar.baz.svc.cluster.local = %v %q, want %s", err, out, want)
		}
	})

	// kubetree takes a client's identity from an EDNS0 client-subnet option only when the query
	// comes from the node (where the cache runs): a pod that claims baz/client's address gets no
	// answer from baz's search path, asking kubetree directly or through the cache (which replaces
	// the option with the pod's own address); the node with the same claim does.
	t.Run("a client-subnet option from a pod names no one", func(t *testing.T) {
		for _, c := range []struct{ name, server string }{
			{"direct", kubeDNSClusterIP},
			{"cached", localDNS},
		} {
			q := c.name + ".bar.baz.svc.cluster.local"
			out, err := n.kubectlRun("exec", "dnsutils", "--", "dig", "@"+c.server, "+subnet="+client+"/32", "+noall", "+comments", "+answer", q, "A")
			if err != nil {
				t.Fatalf("dig %s from default/dnsutils: %v\n%s", q, err, out)
			}
			if !strings.Contains(out, "status: NXDOMAIN") || strings.Contains(out, "CNAME") {
				t.Errorf("default/dnsutils asking %s for %s as %s (baz/client): want NXDOMAIN, got\n%s", c.server, q, client, out)
			}
		}
		q := "node.bar.baz.svc.cluster.local."
		want := fmt.Sprintf("NOERROR %s CNAME node.bar.svc.cluster.local.; node.bar.svc.cluster.local. A %s", q, claimed["node"])
		if got := askWithSubnet(t, net.JoinHostPort(kubetree[0], "53"), client, q); got != want {
			t.Errorf("the node asking kubetree for %s as %s: %s\n  want %s", q, client, got, want)
		}
	})

	t.Run("names through the cache", func(t *testing.T) {
		// Fully qualified, an outside name goes to the cache's own `.` block, which sends it to the
		// node's resolver (the stand-in upstream), not to kubetree.
		ktBefore := n.requests(t, metricsPort, kubetree)
		if out, err := n.dnsq("api.example.test."); err != nil || strings.TrimSpace(out) != "198.51.100.8" {
			t.Errorf("dnsq api.example.test. = %v %q", err, out)
		}
		if got, byType := delta(ktBefore, n.requests(t, metricsPort, kubetree)); got != 0 {
			t.Errorf("a fully qualified outside name reached kubetree: %d queries (%s); want the cache's . block to send it upstream", got, byType)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"web"}, web.Spec.ClusterIP},
			{[]string{"kubernetes.default"}, "10.96.0.1"},
			{[]string{"ext"}, "198.51.100.7"},
			{[]string{"-t", "srv", "_dns._udp.kube-dns.kube-system.svc.cluster.local"}, "0 100 53 kube-dns.kube-system.svc.cluster.local."},
			{[]string{"-t", "ptr", web.Spec.ClusterIP}, "web.baz.svc.cluster.local."},
		} {
			if out, err := n.dnsq(c.args...); err != nil || strings.TrimSpace(out) != c.want {
				t.Errorf("dnsq %s = %v %q, want %q", strings.Join(c.args, " "), err, out, c.want)
			}
		}
	})

	t.Run("the docs' debugging page", func(t *testing.T) { n.debuggingPage(t, localDNS) })
	t.Run("kubectl kubetree doctor", func(t *testing.T) { testDoctorNodeLocal(t, n) })
	// Last: it restarts kubetree with isolate on.
	t.Run("with isolate, each pod gets its own answers through the cache, whoever asked first", func(t *testing.T) { n.isolatedThroughCache(t) })
}

// isolatedThroughCache turns isolate on (`isolate refuse kube-system`: baz and default are both
// closed) and runs issue 40's sequences through the cache, with dig in a dnsutils pod of each
// namespace: baz asks its own b-web first (A, SRV, PTR), then default asks the same; default
// asks baz's b-dual first (AAAA, then A; the node is single-stack, so baz's AAAA answer is
// NODATA), then baz. Each reply through the cache must be the one kubetree gives that pod
// directly (kube-dns's address, which kube-proxy sends to kubetree with the pod's own address).
func (n *node) isolatedThroughCache(t *testing.T) {
	n.addKubetreeOption(t, "isolate refuse kube-system")
	var pod api.Pod
	decodeManifest(t, "hack/dnsutils.yaml", &pod)
	pod.Namespace = "baz"
	restrict(&pod.Spec)
	if _, err := n.client.CoreV1().Pods("baz").Create(bg, &pod, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitReady(t, "baz", "dnsutils")
	web := n.service(t, k8stest.ClusterIPService("baz", "b-web", nil, k8stest.TCP("http", 80)))
	dual := n.service(t, k8stest.ClusterIPService("baz", "b-dual", nil, k8stest.TCP("http", 80)))
	webName, dualName := "b-web.baz.svc.cluster.local.", "b-dual.baz.svc.cluster.local."
	webPTR, _ := dns.ReverseAddr(web.Spec.ClusterIP)
	// Known to kubetree before anyone asks the cache (asked directly, which its own cache
	// bypasses with isolate on).
	for name, ip := range map[string]string{webName: web.Spec.ClusterIP, dualName: dual.Spec.ClusterIP} {
		eventually(t, name+" from baz at kubetree", 60*time.Second, func() bool {
			return n.digFrom(t, "baz", kubeDNSClusterIP, name, dns.TypeA) == "NOERROR "+ip
		})
	}

	type ask struct {
		from  string // the dnsutils pod's namespace
		may   bool   // whether that namespace may see the name
		name  string
		qtype uint16
	}
	var asks []ask
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{webName, dns.TypeA}, {"_http._tcp." + webName, dns.TypeSRV}, {webPTR, dns.TypePTR}} {
		asks = append(asks, ask{"baz", true, q.name, q.qtype}, ask{"default", false, q.name, q.qtype})
	}
	for _, qtype := range []uint16{dns.TypeAAAA, dns.TypeA} {
		asks = append(asks, ask{"default", false, dualName, qtype}, ask{"baz", true, dualName, qtype})
	}
	var tally isolationTally
	for _, a := range asks {
		got := n.digFrom(t, a.from, localDNS, a.name, a.qtype)
		want := n.digFrom(t, a.from, kubeDNSClusterIP, a.name, a.qtype)
		if !tally.agree(t, a.from+"/dnsutils", a.may, a.name, a.qtype, got, want) {
			t.Errorf("%s %s from %s/dnsutils through the cache: %s; kubetree answers it %s", a.name, dns.TypeToString[a.qtype], a.from, got, want)
		}
	}
	report(t, "through the node's cache with isolate: %s", tally)
}

// digFrom asks server one question with dig in pod ns/dnsutils, and writes the reply as its
// status and the rdata of its answer records, sorted (TTLs left out: a cache counts them down).
func (n *node) digFrom(t *testing.T, ns, server, name string, qtype uint16) string {
	t.Helper()
	out, err := n.kubectlRun("-n", ns, "exec", "dnsutils", "--", "dig", "@"+server, "+noall", "+comments", "+answer", "+tries=1", "+time=5", name, dns.TypeToString[qtype])
	status := regexp.MustCompile(`status: ([A-Z]+)`).FindStringSubmatch(out)
	if err != nil || status == nil {
		t.Fatalf("dig @%s %s %s in %s/dnsutils: %v\n%s\n%s", server, name, dns.TypeToString[qtype], ns, err, out, n.dnsLogs())
	}
	var rdata []string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 4 && !strings.HasPrefix(f[0], ";") {
			rdata = append(rdata, strings.Join(f[4:], " "))
		}
	}
	slices.Sort(rdata)
	return strings.Join(append([]string{status[1]}, rdata...), " ")
}

// dnsLogs is the end of the cache's and kubetree's logs, for a failure's message.
func (n *node) dnsLogs() string {
	var b strings.Builder
	for _, selector := range []string{"k8s-app=node-local-dns", "app.kubernetes.io/name=kubetree"} {
		out, err := n.kubectlRun("-n", "kube-system", "logs", "-l", selector, "--prefix", "--timestamps", "--tail", "40")
		fmt.Fprintf(&b, "kubectl logs -l %s (%v):\n%s\n", selector, err, out)
	}
	return b.String()
}

// debuggingPage runs the commands of the Kubernetes docs' "Debugging DNS Resolution" page in its
// dnsutils pod (node.sh deploy starts it): nslookup kubernetes.default finds the API server's
// Service, and the pod's resolv.conf names nameserver.
func (n *node) debuggingPage(t *testing.T, nameserver string) {
	t.Helper()
	n.waitReady(t, "default", "dnsutils")
	lookup, err := n.kubectlRun("exec", "dnsutils", "--", "nslookup", "kubernetes.default")
	if err != nil || !regexp.MustCompile(`(?m)^Name:\s+kubernetes\.default\.svc\.cluster\.local\nAddress: 10\.96\.0\.1$`).MatchString(lookup) {
		t.Errorf("kubectl exec dnsutils -- nslookup kubernetes.default: %v\n%s", err, lookup)
	}
	conf, err := n.kubectlRun("exec", "dnsutils", "--", "cat", "/etc/resolv.conf")
	if err != nil || !strings.Contains(conf, "nameserver "+nameserver+"\n") || !strings.Contains(conf, "search default.svc.cluster.local svc.cluster.local cluster.local") {
		t.Errorf("kubectl exec dnsutils -- cat /etc/resolv.conf: %v\n%s", err, conf)
	}
	report(t, "kubectl exec dnsutils -- nslookup kubernetes.default:\n%s", lookup)
}

// askWithSubnet asks server (over TCP, as the cache does) for name's A records with an EDNS0
// client-subnet option naming addr, from the node, and summarizes the reply.
func askWithSubnet(t *testing.T, server, addr, name string) string {
	t.Helper()
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 32, Address: net.ParseIP(addr).To4()})
	r, _, err := c.Exchange(m, server)
	if err != nil {
		t.Fatalf("%s at %s: %v", name, server, err)
	}
	return summarize(r)
}

// delta is how much each type's count grew from before to after, in all and by type ("A 1, AAAA 1").
func delta(before, after map[string]int) (int, string) {
	total := 0
	var byType []string
	for _, typ := range sortedKeys(after) {
		if d := after[typ] - before[typ]; d != 0 {
			total += d
			byType = append(byType, fmt.Sprintf("%s %d", typ, d))
		}
	}
	return total, strings.Join(byType, ", ")
}
