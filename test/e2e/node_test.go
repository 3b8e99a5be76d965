package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	apps "k8s.io/api/apps/v1"
	api "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	rbac "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestNode runs kubetree as the cluster DNS of a real node (hack/node.sh: containerd, kubelet,
// kube-proxy, bridge CNI, controller-manager, scheduler), deployed from deploy/ unedited, and
// resolves names from a client pod through its kubelet-written resolv.conf, beside CoreDNS's
// in-tree kubernetes plugin asked the same questions; then a rollout and PDB evictions with
// queries running. It needs root and starts and stops the node itself (about 2 min, 50 s of it
// waiting out the liveness probe's 60 s initial delay): KUBETREE_E2E_NODE=1 (`make e2e-node`,
// which `make test` runs).
func TestNode(t *testing.T) {
	if os.Getenv("KUBETREE_E2E_NODE") == "" {
		t.Skip("needs root and a node; run `make e2e-node` (sets KUBETREE_E2E_NODE=1)")
	}
	// Asked for, so never skipped: a machine that cannot run the node fails here with the reason
	// (node.sh start names what is missing: packages, br_netfilter, a node already running).
	if os.Geteuid() != 0 {
		t.Fatal("TestNode needs root (containerd, kubelet, iptables, a bridge): run `make e2e-node` as root")
	}
	n := startNode(t, direct)
	// CoreDNS's own kubernetes plugin beside kubetree, asked the same questions.
	n.deployInTree(t)

	hl := n.headless(t)
	foo := n.service(t, k8stest.ClusterIPService("bar", "foo", nil, k8stest.TCP("http", 80)))
	web := n.service(t, k8stest.ClusterIPService("baz", "web", nil, k8stest.TCP("http", 80)))
	n.service(t, k8stest.ExternalNameService("baz", "ext", "www.example.test"))

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"short service name", []string{"web"}, web.Spec.ClusterIP},
		{"service.namespace", []string{"foo.bar"}, foo.Spec.ClusterIP},
		{"kubernetes.default", []string{"kubernetes.default"}, "10.96.0.1"},
		{"headless pod by hostname", []string{"h1.hl"}, hl.ip},
		{"headless service", []string{"hl"}, hl.ip},
		{"SRV of the cluster DNS", []string{"-t", "srv", "_dns._udp.kube-dns.kube-system.svc.cluster.local"}, "0 100 53 kube-dns.kube-system.svc.cluster.local."},
		{"SRV of a headless service", []string{"-t", "srv", "_http._tcp.hl.baz.svc.cluster.local"}, "0 100 80 h1.hl.baz.svc.cluster.local."},
		{"external name through the upstream", []string{"ext"}, "198.51.100.7"},
		{"external name's CNAME", []string{"-t", "cname", "ext.baz.svc.cluster.local"}, "www.example.test."},
		{"name outside the cluster", []string{"api.example.test"}, "198.51.100.8"},
		{"pod PTR", []string{"-t", "ptr", hl.ip}, "h1.hl.baz.svc.cluster.local."},
		{"service PTR", []string{"-t", "ptr", web.Spec.ClusterIP}, "web.baz.svc.cluster.local."},
	}
	n.waitInTree(t)
	t.Run("kubetree's release pulled by digest from the node's registry", func(t *testing.T) { testReleasePulledByDigest(t, n) })
	// Both plugins learn the services above from their watches; the table starts once each
	// answers the last one created, so that it checks answers, not who caught up first.
	for _, pod := range []string{"client", inTreeClient} {
		var out string
		eventually(t, pod+"'s DNS answers ext", 30*time.Second, func() bool {
			out, _ = n.dnsqIn(pod, "-t", "cname", "ext.baz.svc.cluster.local")
			return strings.TrimSpace(out) == "www.example.test."
		}, func() string { return out })
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := n.dnsq(c.args...)
			if err != nil {
				t.Fatalf("dnsq %s: %v\n%s", strings.Join(c.args, " "), err, out)
			}
			got := strings.TrimSpace(out)
			if got != c.want {
				t.Errorf("dnsq %s = %q, want %q", strings.Join(c.args, " "), got, c.want)
			}
			// The in-tree plugin, asked from a pod with the same resolv.conf: the same answer.
			out, err = n.dnsqIn(inTreeClient, c.args...)
			if other := strings.TrimSpace(out); err != nil || other != got {
				t.Errorf("dnsq %s: the kubernetes plugin says %q (%v), kubetree %q", strings.Join(c.args, " "), other, err, got)
			}
		})
	}

	// NS and ns.dns.cluster.local name the Service in front of the DNS pods, whichever replica
	// answers (each is asked several times through the Service): kubetree as the in-tree plugin.
	t.Run("NS names the cluster DNS service from every replica", func(t *testing.T) {
		for _, s := range []struct{ plugin, pod, ns, svc string }{
			{"kubetree", "client", "kube-system", "kube-dns"},
			{"kubernetes", inTreeClient, inTreeNS, "dns"},
		} {
			svc, err := n.client.CoreV1().Services(s.ns).Get(bg, s.svc, meta.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"ns": s.svc + "." + s.ns + ".svc.cluster.local.", "a": svc.Spec.ClusterIP}
			for range 6 {
				for typ, name := range map[string]string{"ns": "cluster.local", "a": "ns.dns.cluster.local"} {
					out, err := n.dnsqIn(s.pod, "-t", typ, name)
					if got := strings.TrimSpace(out); err != nil || got != want[typ] {
						t.Errorf("%s: dnsq -t %s %s = %q (%v), want %q", s.plugin, typ, name, got, err, want[typ])
					}
				}
			}
		}
	})

	// How many questions one lookup of a name outside the cluster costs the cluster DNS: the
	// pod's resolver tries each search domain first (ndots:5), for A and AAAA. Counted at the
	// servers (coredns_dns_requests_total of every replica, before and after).
	t.Run("queries for one external name", func(t *testing.T) {
		counts := map[string]int{}
		for _, s := range []struct{ name, pod, ns, selector string }{
			{"kubetree", "client", "kube-system", "app.kubernetes.io/name=kubetree"},
			{"kubernetes", inTreeClient, inTreeNS, inTreeSelector},
		} {
			ips := n.podIPs(t, s.ns, s.selector)
			before := n.requests(t, metricsPort, ips)
			if out, err := n.dnsqIn(s.pod, "api.example.test"); err != nil || strings.TrimSpace(out) != "198.51.100.8" {
				t.Fatalf("%s: dnsq api.example.test = %v %q", s.name, err, out)
			}
			after := n.requests(t, metricsPort, ips)
			var byType []string
			for _, typ := range sortedKeys(after) {
				if d := after[typ] - before[typ]; d != 0 {
					counts[s.name] += d
					byType = append(byType, fmt.Sprintf("%s %d", typ, d))
				}
			}
			report(t, "%s: one lookup of api.example.test from a pod (ndots:5, 3 search domains) = %d queries at the DNS server (%s)",
				s.name, counts[s.name], strings.Join(byType, ", "))
		}
		if counts["kubetree"] == 0 || counts["kubetree"] != counts["kubernetes"] {
			t.Errorf("queries per external lookup: kubetree %d, kubernetes %d; want the same, non-zero", counts["kubetree"], counts["kubernetes"])
		}
	})

	t.Run("the docs' debugging page", func(t *testing.T) {
		n.debuggingPage(t, kubeDNSClusterIP)
		// nslookup's output, but for the server it names, is the in-tree plugin's too.
		server := regexp.MustCompile(`(?m)^(Server:\s.*|Address:\s.*#53)$`)
		ours, err := n.kubectlRun("exec", "dnsutils", "--", "nslookup", "kubernetes.default", kubeDNSClusterIP)
		if err != nil {
			t.Fatalf("%v\n%s", err, ours)
		}
		theirs, err := n.kubectlRun("exec", "dnsutils", "--", "nslookup", "kubernetes.default", n.inTreeIP)
		if err != nil || server.ReplaceAllString(ours, "") != server.ReplaceAllString(theirs, "") {
			t.Errorf("nslookup kubernetes.default: kubetree says\n%s\nthe kubernetes plugin (%v)\n%s", ours, err, theirs)
		}
		// Asked through resolv.conf, as the page does, nslookup also prints ";; Got recursion not
		// available": neither plugin sets RA. The headers of both plugins' answers are the same.
		kubetree, inTree := n.podIPs(t, "kube-system", "app.kubernetes.io/name=kubetree")[0], n.podIPs(t, inTreeNS, inTreeSelector)[0]
		for _, name := range []string{"kubernetes.default.default.svc.cluster.local.", "kubernetes.default.svc.cluster.local."} {
			a, b := header(t, kubetree, name), header(t, inTree, name)
			if a != b {
				t.Errorf("%s: kubetree answers with %s, the kubernetes plugin with %s", name, a, b)
			}
		}
	})

	t.Run("the resolvers pods use, kubetree beside the in-tree plugin", func(t *testing.T) {
		n.resolverTable(t, web, foo)
	})

	t.Run("new service resolvable", func(t *testing.T) {
		start := time.Now()
		late := n.service(t, k8stest.ClusterIPService("baz", "late", nil, k8stest.TCP("http", 80)))
		var out string
		eventually(t, "late to resolve", 60*time.Second, func() bool {
			out, _ = n.dnsq("late")
			return strings.TrimSpace(out) == late.Spec.ClusterIP
		}, func() string { return out })
		took := time.Since(start)
		eventually(t, "late to resolve through the kubernetes plugin", 60*time.Second, func() bool {
			out, _ = n.dnsqIn(inTreeClient, "late")
			return strings.TrimSpace(out) == late.Spec.ClusterIP
		}, func() string { return out })
		report(t, "service created -> resolved in a pod: %s (kubetree); %s (the kubernetes plugin, asked after)",
			took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	})

	// The kubelet's own count of probe results: every kubetree pod's liveness probe (60 s
	// initial delay) and readiness probe succeeded, and the liveness probe never failed. A
	// readiness failure in the first second is start-up (/ready says 503 until kubetree has
	// synced), so readiness is judged by its successes and the pods' Ready condition.
	t.Run("probes pass", func(t *testing.T) {
		var last string
		count := func(probe, result string) int {
			c := 0
			for _, l := range strings.Split(last, "\n") {
				if strings.Contains(l, `namespace="kube-system"`) && strings.Contains(l, `probe_type="`+probe+`"`) &&
					strings.Contains(l, `result="`+result+`"`) && !strings.HasSuffix(l, " 0") {
					c++
				}
			}
			return c
		}
		eventually(t, "a successful liveness probe of each kubetree pod", 120*time.Second, func() bool {
			last = n.probes(t)
			return count("Liveness", "successful") == 2
		}, func() string { return last })
		if count("Readiness", "successful") != 2 {
			t.Errorf("want successful readiness probes of both kubetree pods:\n%s", last)
		}
		if f := count("Liveness", "failed") + count("Liveness", "unknown"); f != 0 {
			t.Errorf("a liveness probe failed:\n%s", last)
		}
		pods, err := n.client.CoreV1().Pods("kube-system").List(bg, meta.ListOptions{LabelSelector: "app.kubernetes.io/name=kubetree"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready || p.Status.ContainerStatuses[0].RestartCount != 0 {
				t.Errorf("pod %s: want ready with no restarts: %+v", p.Name, p.Status.ContainerStatuses)
			}
		}
		report(t, "kubelet probe counts:\n%s", last)
	})

	t.Run("a kubetree pod killed, the other answers", func(t *testing.T) {
		pods, err := n.client.CoreV1().Pods("kube-system").List(bg, meta.ListOptions{LabelSelector: "app.kubernetes.io/name=kubetree"})
		if err != nil || len(pods.Items) != 2 {
			t.Fatalf("want 2 kubetree pods: %v %v", err, pods)
		}
		victim, survivor := pods.Items[0], pods.Items[1]
		if got := n.dnsEndpoints(t); got != victim.Status.PodIP+" "+survivor.Status.PodIP && got != survivor.Status.PodIP+" "+victim.Status.PodIP {
			t.Fatalf("kube-dns endpoints %q, want both pods %s and %s", got, victim.Status.PodIP, survivor.Status.PodIP)
		}
		zero := int64(0)
		if err := n.client.CoreV1().Pods("kube-system").Delete(bg, victim.Name, meta.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var gone time.Duration
		queries := 0
		for time.Since(start) < 10*time.Second {
			out, err := n.dnsq("web")
			queries++
			if err != nil || strings.TrimSpace(out) != web.Spec.ClusterIP {
				t.Fatalf("query %d, %s after deleting %s: %v %q", queries, time.Since(start).Round(time.Millisecond), victim.Name, err, out)
			}
			if gone == 0 && !strings.Contains(n.dnsEndpoints(t), victim.Status.PodIP) {
				gone = time.Since(start)
			}
		}
		if gone == 0 {
			t.Fatalf("%s (%s) still a kube-dns endpoint 10 s after its deletion", victim.Name, victim.Status.PodIP)
		}
		report(t, "%d queries answered in the 10 s after deleting %s; its address left kube-dns's endpoints within %s",
			queries, victim.Name, gone.Round(time.Millisecond))
		// The Deployment replaces it; both answer again.
		var eps string
		eventually(t, "a replacement kubetree pod behind kube-dns", 60*time.Second, func() bool {
			eps = n.dnsEndpoints(t)
			return len(strings.Fields(eps)) == 2 && !strings.Contains(eps, victim.Status.PodIP)
		}, func() string { return eps })
		if out, err := n.dnsq("foo.bar"); err != nil || strings.TrimSpace(out) != foo.Spec.ClusterIP {
			t.Errorf("after the replacement: dnsq foo.bar = %v %q", err, out)
		}
	})

	// deploy/README.md: a rollout keeps one replica serving (maxUnavailable 1, maxSurge 1), and
	// the old pods answer through health's lameduck while they leave kube-dns's endpoints.
	t.Run("rollout restart, answers continue", func(t *testing.T) {
		old := n.kubetreePods(t)
		q := n.queries("web", web.Spec.ClusterIP)
		start := time.Now()
		if out, err := n.kubectlRun("-n", "kube-system", "rollout", "restart", "deployment/kubetree"); err != nil {
			q.stop()
			t.Fatalf("rollout restart: %v\n%s", err, out)
		}
		out, err := n.kubectlRun("-n", "kube-system", "rollout", "status", "deployment/kubetree", "--timeout=180s")
		took := time.Since(start)
		if err != nil {
			q.stop()
			t.Fatalf("rollout status: %v\n%s", err, out)
		}
		// Queries go on until the old pods have exited (lameduck 5 s, out of the endpoints).
		n.waitGone(t, old...)
		ok, failed := q.stop()
		report(t, "rollout restart of 2 replicas: complete in %s, old pods exited %s after the restart; %d queries answered, %d failed",
			took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), ok, len(failed))
		if len(failed) > 0 || ok == 0 {
			t.Errorf("during the rollout, %d answered, %d failed:\n%s", ok, len(failed), strings.Join(failed, "\n"))
		}
	})

	// deploy/poddisruptionbudget.yaml, minAvailable 1: while one replica is gone (evicted, its
	// replacement not yet ready) the Eviction API refuses to take the other; once the
	// replacement is ready, it allows it (what kubectl drain retries for).
	t.Run("PDB refuses an eviction while one replica is unavailable", func(t *testing.T) {
		var pdb *policy.PodDisruptionBudget
		getPDB := func() *policy.PodDisruptionBudget {
			p, err := n.client.PolicyV1().PodDisruptionBudgets("kube-system").Get(bg, "kubetree", meta.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		eventually(t, "PDB kubetree: 2 healthy, 1 disruption allowed", 60*time.Second, func() bool {
			pdb = getPDB()
			return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 2 && pdb.Status.DisruptionsAllowed == 1
		}, func() string { return fmt.Sprintf("%+v", pdb.Status) })
		pods := n.kubetreePods(t)
		if len(pods) != 2 {
			t.Fatalf("want 2 kubetree pods, have %d", len(pods))
		}
		evict := func(name string) error {
			return n.client.CoreV1().Pods("kube-system").EvictV1(bg, &policy.Eviction{ObjectMeta: meta.ObjectMeta{Name: name, Namespace: "kube-system"}})
		}
		q := n.queries("web", web.Spec.ClusterIP)
		start := time.Now()
		if err := evict(pods[0].Name); err != nil {
			q.stop()
			t.Fatalf("evicting %s with 2 healthy replicas: %v", pods[0].Name, err)
		}
		err := evict(pods[1].Name)
		pdb = getPDB()
		if err == nil || !apierrors.IsTooManyRequests(err) {
			t.Errorf("evicting %s while %s is evicted: want 429 Too Many Requests (the PDB), got %v", pods[1].Name, pods[0].Name, err)
		}
		report(t, "eviction of %s (2 healthy): allowed; of %s right after: refused (%v); PDB then: currentHealthy %d, desiredHealthy %d, disruptionsAllowed %d",
			pods[0].Name, pods[1].Name, err, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy, pdb.Status.DisruptionsAllowed)
		var lastErr error
		eventually(t, "the eviction of "+pods[1].Name+" to be allowed", 120*time.Second, func() bool {
			if lastErr = evict(pods[1].Name); lastErr != nil && !apierrors.IsTooManyRequests(lastErr) {
				t.Fatalf("evicting %s: %v", pods[1].Name, lastErr)
			}
			if lastErr != nil {
				time.Sleep(250 * time.Millisecond)
			}
			return lastErr == nil
		}, func() string { return fmt.Sprint(lastErr) })
		allowed := time.Since(start)
		var eps string
		eventually(t, "two new kubetree pods behind kube-dns", 120*time.Second, func() bool {
			eps = n.dnsEndpoints(t)
			return len(strings.Fields(eps)) == 2 && !strings.Contains(eps, pods[0].Status.PodIP) && !strings.Contains(eps, pods[1].Status.PodIP)
		}, func() string { return eps })
		n.waitGone(t, pods...)
		ok, failed := q.stop()
		report(t, "second eviction allowed %s after the first (a replacement ready); both replaced and exited after %s; %d queries answered, %d failed",
			allowed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), ok, len(failed))
		if len(failed) > 0 || ok == 0 {
			t.Errorf("during the evictions, %d answered, %d failed:\n%s", ok, len(failed), strings.Join(failed, "\n"))
		}
	})

	t.Run("kubectl kubetree", func(t *testing.T) { testKubectlPlugin(t, n) })

	// docs/migrating.md, from the in-tree plugin and back, with queries running (last: it
	// changes the cluster DNS Deployment, and leaves it as deploy/ made it).
	t.Run("migration from the in-tree plugin and back, zero failed queries", func(t *testing.T) {
		testMigration(t, n, []string{
			"a:web=" + web.Spec.ClusterIP,
			"a:foo.bar=" + foo.Spec.ClusterIP,
			"a:hl=" + hl.ip,
			"a:h1.hl=" + hl.ip,
			"srv:_http._tcp.hl.baz.svc.cluster.local=0 100 80 h1.hl.baz.svc.cluster.local.",
			"cname:ext.baz.svc.cluster.local=www.example.test.",
			"a:ext=198.51.100.7",
			"a:api.example.test=198.51.100.8",
		})
	})
}

// queryLoop asks one name from baz/client again and again until stopped.
type queryLoop struct {
	stopc, done chan struct{}
	ok          int // written by the loop, read after done
	failed      []string
}

// queries starts asking name (want: its answer) in a loop.
func (n *node) queries(name, want string) *queryLoop {
	q := &queryLoop{stopc: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(q.done)
		for {
			select {
			case <-q.stopc:
				return
			default:
			}
			out, err := n.dnsq(name)
			if got := strings.TrimSpace(out); err != nil || got != want {
				q.failed = append(q.failed, fmt.Sprintf("%s: %v %q", time.Since(start).Round(time.Millisecond), err, got))
			} else {
				q.ok++
			}
		}
	}()
	return q
}

// stop ends the loop and says how many queries were answered, and how the others failed.
func (q *queryLoop) stop() (int, []string) {
	close(q.stopc)
	<-q.done
	return q.ok, q.failed
}

// kubetreePods is the kubetree pods that are not being deleted.
func (n *node) kubetreePods(t *testing.T) []api.Pod {
	t.Helper()
	return n.livePods(t, "app.kubernetes.io/name=kubetree")
}

// livePods is the pods of kube-system with the labels of selector that are not being deleted.
func (n *node) livePods(t *testing.T, selector string) []api.Pod {
	t.Helper()
	l, err := n.client.CoreV1().Pods("kube-system").List(bg, meta.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var pods []api.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

// waitGone waits until pods no longer exist (terminated, lameduck over).
func (n *node) waitGone(t *testing.T, pods ...api.Pod) {
	t.Helper()
	for _, p := range pods {
		eventually(t, "pod "+p.Name+" to exit", 90*time.Second, func() bool {
			_, err := n.client.CoreV1().Pods(p.Namespace).Get(bg, p.Name, meta.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	}
}

func (n *node) kubectlRun(args ...string) (string, error) {
	out, err := exec.Command(n.kubectl, append([]string{"--kubeconfig", n.kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// The in-tree plugin's deployment: namespace, the client pod that asks it, its pods' labels.
const (
	inTreeNS       = "intree"
	inTreeClient   = "client-intree"
	inTreeSelector = "app=coredns-intree"
)

// deployInTree runs CoreDNS's own kubernetes plugin in namespace intree: the same image as
// kubetree, deploy/deployment.yaml and deploy/configmap.yaml with the directive renamed back to
// kubernetes, one replica, behind Service intree/dns, with the RBAC CoreDNS's own ClusterRole
// grants (list and watch on endpointslices, services, namespaces, pods). Its client,
// baz/client-intree, gets baz/client's resolv.conf (the kubelet's) with intree/dns's ClusterIP
// as the nameserver. waitInTree waits for both.
func (n *node) deployInTree(t *testing.T) {
	t.Helper()
	front := k8stest.ClusterIPService(inTreeNS, "dns", nil, k8stest.UDP("dns", 53), k8stest.TCP("dns-tcp", 53))
	front.Spec.Selector = map[string]string{"app": "coredns-intree"}
	svc := n.service(t, front)
	c := n.client
	sa := &api.ServiceAccount{ObjectMeta: meta.ObjectMeta{Name: "coredns"}}
	if _, err := c.CoreV1().ServiceAccounts(inTreeNS).Create(bg, sa, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbac.ClusterRole{
		ObjectMeta: meta.ObjectMeta{Name: "test:coredns-intree"},
		Rules: []rbac.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "namespaces", "pods"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	if _, err := c.RbacV1().ClusterRoles().Create(bg, role, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbac.ClusterRoleBinding{
		ObjectMeta: meta.ObjectMeta{Name: role.Name},
		RoleRef:    rbac.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbac.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: inTreeNS}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(bg, binding, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var cm api.ConfigMap
	decodeManifest(t, "deploy/configmap.yaml", &cm)
	directive := regexp.MustCompile(`(?m)^(\s*)kubetree(\s)`)
	if k := len(directive.FindAllString(cm.Data["Corefile"], -1)); k != 1 {
		t.Fatalf("deploy/configmap.yaml: want one kubetree directive, found %d:\n%s", k, cm.Data["Corefile"])
	}
	cm.ObjectMeta = meta.ObjectMeta{Name: "coredns"}
	cm.Data["Corefile"] = directive.ReplaceAllString(cm.Data["Corefile"], "${1}kubernetes${2}")
	if _, err := c.CoreV1().ConfigMaps(inTreeNS).Create(bg, &cm, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The release's deployment.yaml (deploy/'s, the image pinned by digest): the same image as kubetree.
	var d apps.Deployment
	decodeManifest(t, n.releaseFile(t, "deploy/deployment.yaml"), &d)
	labels := map[string]string{"app": "coredns-intree"}
	one := int32(1)
	d.ObjectMeta = meta.ObjectMeta{Name: "coredns"}
	d.Spec.Replicas = &one
	d.Spec.Selector = &meta.LabelSelector{MatchLabels: labels}
	d.Spec.Template.Labels = labels
	spec := &d.Spec.Template.Spec
	spec.ServiceAccountName = sa.Name
	spec.PriorityClassName = "" // system-cluster-critical belongs to kube-system
	spec.Affinity = nil
	if len(spec.Volumes) != 1 || spec.Volumes[0].ConfigMap == nil {
		t.Fatalf("deploy/deployment.yaml: want one ConfigMap volume: %+v", spec.Volumes)
	}
	spec.Volumes[0].ConfigMap.Name = cm.Name
	if _, err := c.AppsV1().Deployments(inTreeNS).Create(bg, &d, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The kubelet's resolv.conf for baz/client, with the in-tree plugin's address instead.
	conf, err := n.dnsqIn("client", "-t", "conf")
	if err != nil {
		t.Fatalf("reading baz/client's resolv.conf: %v\n%s", err, conf)
	}
	pod := dnsqPod(inTreeClient)
	pod.Spec.DNSPolicy = api.DNSNone
	pod.Spec.DNSConfig = inTreeDNSConfig(conf, svc.Spec.ClusterIP)
	if _, err := c.CoreV1().Pods("baz").Create(bg, pod, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.inTreeIP, n.clientConf = svc.Spec.ClusterIP, conf
}

// inTreeDNSConfig is the DNS config of a pod whose resolv.conf is conf (the kubelet's for baz/client)
// but for its nameserver, the in-tree plugin's address.
func inTreeDNSConfig(conf, nameserver string) *api.PodDNSConfig {
	dnsConfig := &api.PodDNSConfig{Nameservers: []string{nameserver}}
	for _, l := range strings.Split(conf, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 1 && f[0] == "search":
			dnsConfig.Searches = f[1:]
		case len(f) > 1 && f[0] == "options":
			for _, o := range f[1:] {
				name, value, ok := strings.Cut(o, ":")
				opt := api.PodDNSConfigOption{Name: name}
				if ok {
					opt.Value = &value
				}
				dnsConfig.Options = append(dnsConfig.Options, opt)
			}
		}
	}
	return dnsConfig
}

// waitInTree waits for deployInTree's CoreDNS and client, and checks that the client's
// resolv.conf is baz/client's but for the nameserver.
func (n *node) waitInTree(t *testing.T) {
	t.Helper()
	var d *apps.Deployment
	eventually(t, "the in-tree CoreDNS ready", 120*time.Second, func() bool {
		var err error
		d, err = n.client.AppsV1().Deployments(inTreeNS).Get(bg, "coredns", meta.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 1
	}, func() string { return fmt.Sprintf("%+v", d.Status) })
	n.waitReady(t, "baz", inTreeClient)
	conf, err := n.dnsqIn(inTreeClient, "-t", "conf")
	if err != nil {
		t.Fatalf("reading %s's resolv.conf: %v\n%s", inTreeClient, err, conf)
	}
	want := strings.Replace(n.clientConf, "nameserver 10.96.0.10", "nameserver "+n.inTreeIP, 1)
	if strings.TrimSpace(conf) != strings.TrimSpace(want) {
		t.Fatalf("%s's resolv.conf:\n%s\nwant baz/client's with nameserver %s:\n%s", inTreeClient, conf, n.inTreeIP, want)
	}
	report(t, "the kubernetes plugin at %s; both clients' resolv.conf: %q", n.inTreeIP, strings.TrimSpace(n.clientConf))
}

// decodeManifest reads one object from a YAML file of the repository (or at an absolute path).
func decodeManifest(t *testing.T, path string, into runtime.Object) {
	t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(env.root, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// header is the rcode and flags of ip's answer to an A question for name, asked from the node.
func header(t *testing.T, ip, name string) string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	r, err := dns.Exchange(m, net.JoinHostPort(ip, "53"))
	if err != nil {
		t.Fatalf("%s at %s: %v", name, ip, err)
	}
	return fmt.Sprintf("%s aa=%v ra=%v rd=%v tc=%v", dns.RcodeToString[r.Rcode], r.Authoritative, r.RecursionAvailable, r.RecursionDesired, r.Truncated)
}

// podIPs is the addresses of the running pods matching selector in ns.
func (n *node) podIPs(t *testing.T, ns, selector string) []string {
	t.Helper()
	l, err := n.client.CoreV1().Pods(ns).List(bg, meta.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	if len(ips) == 0 {
		t.Fatalf("no running pod in %s matches %s", ns, selector)
	}
	return ips
}

// metricsPort is where kubetree's pods (deploy/: prometheus :9153) export their metrics.
const metricsPort = "9153"

// requests is coredns_dns_requests_total by query type, summed over the CoreDNS servers at ips
// (their prometheus on port, reachable from the node), read until two scrapes agree.
func (n *node) requests(t *testing.T, port string, ips []string) map[string]int {
	return n.counter(t, "coredns_dns_requests_total", port, ips)
}

// counter is the counter name by query type (its type label; "other" without one), summed over
// the CoreDNS servers at ips, read until two scrapes agree.
func (n *node) counter(t *testing.T, name, port string, ips []string) map[string]int {
	t.Helper()
	scrape := func() map[string]int {
		sum := map[string]int{}
		c := &http.Client{Timeout: 5 * time.Second}
		for _, ip := range ips {
			resp, err := c.Get("http://" + net.JoinHostPort(ip, port) + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
					continue
				}
				typ := "other"
				if _, rest, ok := strings.Cut(l, `type="`); ok {
					typ, _, _ = strings.Cut(rest, `"`)
				}
				v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("%s: %q: %v", ip, l, err)
				}
				sum[typ] += int(v)
			}
		}
		return sum
	}
	last := scrape()
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		now := scrape()
		if fmt.Sprint(now) == fmt.Sprint(last) {
			return now
		}
		last = now
	}
	t.Fatalf("%s still moving: %v", name, last)
	return nil
}

func sortedKeys(m map[string]int) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// probes is the kubelet's prober_probe_total lines (its port answers only on the bridge).
func (n *node) probes(t *testing.T) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	resp, err := c.Get("https://10.244.0.1:10250/metrics/probes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "prober_probe_total{") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// dnsEndpoints is the ready addresses behind kube-system/kube-dns, sorted, space-separated.
func (n *node) dnsEndpoints(t *testing.T) string {
	t.Helper()
	l, err := n.client.DiscoveryV1().EndpointSlices("kube-system").List(bg, meta.ListOptions{LabelSelector: "kubernetes.io/service-name=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				ips = append(ips, e.Addresses...)
			}
		}
	}
	sort.Strings(ips)
	return strings.Join(ips, " ")
}

// node is a running hack/node.sh node with kubetree deployed and the client pod baz/client.
type node struct {
	dir        string
	kubeconfig string
	kubectl    string
	client     kubernetes.Interface
	inTreeIP   string // ClusterIP of intree/dns, the in-tree plugin (deployInTree)
	clientConf string // baz/client's resolv.conf, as the kubelet wrote it
}

// The node's modes (hack/node.sh): pods ask kubetree directly, or NodeLocal DNSCache in front of it.
const (
	direct    = "direct"
	nodeLocal = "nodelocal"
)

// startNode starts a node in mode (direct or nodeLocal), deploys kubetree and waits for the client
// pod; the node stops when the test ends.
func startNode(t *testing.T, mode string) *node {
	// A fresh cluster each run (etcd data survives a stop), at a short path: containerd's
	// socket lives in it.
	dir := os.Getenv("KUBETREE_NODE_DIR")
	if dir == "" {
		d, err := os.MkdirTemp("/tmp", "ktnode-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	script := env.root + "/hack/node.sh"
	run := func(verb string) (string, error) {
		var out bytes.Buffer
		cmd := exec.Command(script, verb, dir)
		cmd.Env = append(os.Environ(), "KUBETREE_NODELOCAL=0")
		if mode == nodeLocal {
			cmd.Env = append(cmd.Env, "KUBETREE_NODELOCAL=1") // the last one counts
		}
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	start := time.Now()
	if out, err := run("start"); err != nil {
		run("stop")
		t.Fatalf("node.sh start: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := run("stop"); err != nil {
			t.Errorf("node.sh stop: %v\n%s", err, out)
		}
	})
	up := time.Since(start)
	if out, err := run("deploy"); err != nil {
		t.Fatalf("node.sh deploy: %v\n%s", err, out)
	}
	report(t, "node up in %s (%s), kubetree deployed and the client pod ready %s later", up.Round(time.Millisecond), mode, (time.Since(start) - up).Round(time.Millisecond))
	n := &node{dir: dir, kubeconfig: dir + "/cp/kubeconfig", kubectl: env.root + "/bin/kubectl"}
	cfg, err := clientcmd.BuildConfigFromFlags("", n.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	n.client = kubernetes.NewForConfigOrDie(cfg)
	return n
}

// dnsq runs /dnsq ARGS in baz/client: the pod's own resolv.conf, written by the kubelet.
func (n *node) dnsq(args ...string) (string, error) { return n.dnsqIn("client", args...) }

// dnsqIn runs /dnsq ARGS in pod baz/POD.
func (n *node) dnsqIn(pod string, args ...string) (string, error) {
	return n.kubectlRun(append([]string{"-n", "baz", "exec", pod, "--", "/dnsq"}, args...)...)
}

// service creates svc (and its namespace, if missing).
func (n *node) service(t *testing.T, svc *api.Service) *api.Service {
	t.Helper()
	ns := svc.Namespace
	if _, err := n.client.CoreV1().Namespaces().Get(bg, ns, meta.GetOptions{}); err != nil {
		if _, err := n.client.CoreV1().Namespaces().Create(bg, k8stest.Namespace(ns), meta.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := n.client.CoreV1().Services(ns).Create(bg, svc, meta.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type headlessPod struct{ ip string }

// headless makes baz/hl, a headless service with port http, and its pod h1 (hostname h1,
// subdomain hl), and waits until the pod is ready.
func (n *node) headless(t *testing.T) headlessPod {
	t.Helper()
	ip := n.headlessService(t, "baz", dnsqPod("h1"))
	var out string
	eventually(t, "h1.hl to resolve", 45*time.Second, func() bool {
		out, _ = n.dnsq("h1.hl")
		return strings.TrimSpace(out) == ip
	}, func() string { return fmt.Sprintf("got %q, want %s", out, ip) })
	return headlessPod{ip: ip}
}

// headlessService makes ns/hl, a headless service with port http, and pod h1 in it (hostname
// h1, subdomain hl), and waits until the EndpointSlice holds the pod, whose address it returns.
func (n *node) headlessService(t *testing.T, ns string, pod *api.Pod) string {
	t.Helper()
	svc := k8stest.HeadlessService(ns, "hl", k8stest.TCP("http", 80))
	svc.Spec.Selector = map[string]string{"app": "hl"}
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
	n.service(t, svc)
	pod.Labels = map[string]string{"app": "hl"}
	pod.Spec.Hostname, pod.Spec.Subdomain = "h1", "hl"
	if _, err := n.client.CoreV1().Pods(ns).Create(bg, pod, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip := n.waitReady(t, ns, pod.Name)
	// Ask only once the EndpointSlice holds the pod: an early NXDOMAIN would be cached.
	eventually(t, "the EndpointSlice of hl to hold h1", 30*time.Second, func() bool {
		l, err := n.client.DiscoveryV1().EndpointSlices(ns).List(bg, meta.ListOptions{LabelSelector: "kubernetes.io/service-name=hl"})
		if err != nil {
			return false
		}
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if e.Hostname != nil && *e.Hostname == "h1" && len(e.Addresses) > 0 && e.Addresses[0] == ip {
					return true
				}
			}
		}
		return false
	})
	return ip
}

// dnsqPod is a pod running the dnsq image (restricted Pod Security), idle until asked by exec.
func dnsqPod(name string) *api.Pod {
	pod := &api.Pod{
		ObjectMeta: meta.ObjectMeta{Name: name},
		Spec: api.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []api.Container{{
				Name: "dnsq", Image: "kubetree/dnsq:1", ImagePullPolicy: api.PullNever,
				Args: []string{"-t", "sleep"},
			}},
		},
	}
	restrict(&pod.Spec)
	return pod
}

// restrict makes a pod pass the restricted Pod Security Standard (namespace baz enforces it):
// a non-root user, the runtime's seccomp profile, no privilege escalation, no capabilities and
// a read-only root.
func restrict(spec *api.PodSpec) {
	no, yes, uid := false, true, int64(65532)
	spec.SecurityContext = &api.PodSecurityContext{
		RunAsNonRoot: &yes, RunAsUser: &uid,
		SeccompProfile: &api.SeccompProfile{Type: api.SeccompProfileTypeRuntimeDefault},
	}
	for i := range spec.Containers {
		spec.Containers[i].SecurityContext = &api.SecurityContext{
			AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities: &api.Capabilities{Drop: []api.Capability{"ALL"}},
		}
	}
}

// waitReady waits for pod ns/name to be Ready and returns its address.
func (n *node) waitReady(t *testing.T, ns, name string) string {
	t.Helper()
	var ip string
	eventually(t, "pod "+ns+"/"+name+" ready", 60*time.Second, func() bool {
		p, err := n.client.CoreV1().Pods(ns).Get(bg, name, meta.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == api.PodReady && c.Status == api.ConditionTrue {
				ip = p.Status.PodIP
				return true
			}
		}
		return false
	})
	return ip
}
