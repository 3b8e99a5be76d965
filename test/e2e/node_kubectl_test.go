package e2e

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	rbac "k8s.io/api/rbac/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// testKubectlPlugin runs kubectl-kubetree (bin/kubectl-kubetree, make build) against the node:
// doctor against kubetree and against the in-tree plugin, explain and dump through the API
// server's port-forward, each kind of bad input, and doctor and explain with the DNS Deployment
// scaled to zero (restored after). It turns kubetree's explain option on (loopback, the default
// address), as docs/kubectl-plugin.md says to.
func testKubectlPlugin(t *testing.T, n *node) {
	plugin := env.root + "/bin/kubectl-kubetree"
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("%v: make build builds bin/kubectl-kubetree", err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(plugin, append([]string{"--kubeconfig", n.kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	// must runs the plugin and wants exit status 0; refused wants a non-zero status and each of
	// the phrases in the message.
	must := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("kubectl kubetree %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	refused := func(t *testing.T, args []string, phrases ...string) string {
		t.Helper()
		out, err := run(args...)
		if err == nil {
			t.Errorf("kubectl kubetree %s: exit status 0, want an error\n%s", strings.Join(args, " "), out)
		}
		for _, p := range phrases {
			if !strings.Contains(out, p) {
				t.Errorf("kubectl kubetree %s: want %q in\n%s", strings.Join(args, " "), p, out)
			}
		}
		return out
	}

	n.turnOnExplain(t)

	t.Run("doctor passes against kubetree", func(t *testing.T) {
		out := must(t, "doctor")
		report(t, "kubectl kubetree doctor, kubetree:\n%s", out)
	})
	t.Run("doctor passes against the in-tree plugin", func(t *testing.T) {
		out := must(t, "doctor", "--dns-service", inTreeNS+"/dns")
		report(t, "kubectl kubetree doctor --dns-service intree/dns, CoreDNS's kubernetes plugin:\n%s", out)
	})
	t.Run("doctor -o json", func(t *testing.T) {
		var r doctorReport
		if err := json.Unmarshal([]byte(must(t, "doctor", "-o", "json")), &r); err != nil || !r.Pass || len(r.Checks) < 15 {
			t.Errorf("doctor -o json: %v, pass %v, %d checks", err, r.Pass, len(r.Checks))
		}
	})

	t.Run("explain from every replica, with the source objects", func(t *testing.T) {
		out := must(t, "explain", "kubernetes.default.svc.cluster.local", "--from", "pod/client", "-n", "baz")
		for _, want := range []string{"2 agree", "A 10.96.0.1", "service", "Service   default     kubernetes"} {
			if !strings.Contains(out, want) {
				t.Errorf("explain: want %q in\n%s", want, out)
			}
		}
		report(t, "kubectl kubetree explain kubernetes.default.svc.cluster.local --from pod/client -n baz:\n%s", out)
		var res struct {
			Replicas []struct {
				Pod         string `json:"pod"`
				Explanation struct {
					Rcode  string `json:"rcode"`
					Client struct {
						Address string `json:"address"`
					} `json:"client"`
				} `json:"explanation"`
			} `json:"replicas"`
			Disagreements []string `json:"disagreements"`
		}
		if err := json.Unmarshal([]byte(must(t, "explain", "kubernetes.default.svc.cluster.local", "--all", "-o", "json")), &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Replicas) != 2 || len(res.Disagreements) != 0 || res.Replicas[0].Explanation.Rcode != "NOERROR" {
			t.Errorf("explain --all -o json: %+v, want 2 replicas answering NOERROR, agreeing", res)
		}
	})

	t.Run("dump", func(t *testing.T) {
		out := must(t, "dump", "-n", "default")
		if !strings.Contains(out, "kubernetes.default.svc.cluster.local.") || strings.Contains(out, ".baz.svc.") {
			t.Errorf("dump -n default: want default's names only\n%s", out)
		}
		lines := strings.Split(strings.TrimSpace(must(t, "dump", "--name", "*.kube-system.svc.cluster.local", "-o", "json")), "\n")
		for _, l := range lines {
			var name struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal([]byte(l), &name); err != nil || !strings.HasSuffix(name.Name, ".kube-system.svc.cluster.local.") {
				t.Errorf("dump --name -o json: line %q (%v)", l, err)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		refused(t, []string{"explain", "www.example.org"}, "outside every zone")
		refused(t, []string{"explain", "kubernetes.default.svc.cluster.local", "BOGUS"}, `unknown DNS type "BOGUS"`)
		refused(t, []string{"explain", "kubernetes.default.svc.cluster.local", "--from", "pod/nope", "-n", "baz"}, "pod nope not found in namespace baz")
		refused(t, []string{"explain", "kubernetes.default.svc.cluster.local", "--dns-service", inTreeNS + "/dns"}, "not kubetree")
		refused(t, []string{"dump", "--dns-service", inTreeNS + "/dns"}, "not kubetree")
		// A user who may read the DNS pods, but not port-forward to them.
		const user = "kubetree-reader"
		role := &rbac.Role{ObjectMeta: meta.ObjectMeta{Name: user, Namespace: "kube-system"}, Rules: []rbac.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"get", "list"}},
		}}
		if _, err := n.client.RbacV1().Roles("kube-system").Create(bg, role, meta.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbac.RoleBinding{ObjectMeta: meta.ObjectMeta{Name: user, Namespace: "kube-system"},
			RoleRef:  rbac.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
			Subjects: []rbac.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
		if _, err := n.client.RbacV1().RoleBindings("kube-system").Create(bg, binding, meta.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		out := refused(t, []string{"explain", "kubernetes.default.svc.cluster.local", "--as", user}, "RBAC forbids", `verb "create"`, `resource "pods/portforward"`)
		report(t, "kubectl kubetree explain --as %s (no pods/portforward): %s", user, strings.TrimSpace(out))
	})

	t.Run("explain --all shows a frozen replica's stale answer", func(t *testing.T) {
		out := n.frozenReplica(t, func(fresh, frozen api.Pod, born *api.Service, name string) string {
			out := must(t, "explain", name, "--all")
			// One against one: either may be named first.
			for _, want := range []string{
				"Replicas disagree: ",
				frozen.Name + " answers NXDOMAIN []",
				fresh.Name + " answers NOERROR [A " + born.Spec.ClusterIP + "] from Service " + born.Namespace + "/born@" + born.ResourceVersion,
			} {
				if !strings.Contains(out, want) {
					t.Errorf("explain --all: want %q in\n%s", want, out)
				}
			}
			return out
		})
		report(t, "kubectl kubetree explain --all, one replica's API connection frozen:\n%s", out)
	})

	t.Run("the DNS Deployment scaled to zero", func(t *testing.T) {
		pods := n.kubetreePods(t)
		n.scaleKubetree(t, 0)
		n.waitGone(t, pods...)
		defer n.scaleKubetree(t, 2)
		out := refused(t, []string{"doctor"}, "FAIL", "0 ready endpoints", "scaled to zero")
		report(t, "kubectl kubetree doctor, kubetree scaled to zero:\n%s", out)
		refused(t, []string{"explain", "kubernetes.default.svc.cluster.local"}, "scaled to zero")
	})
	n.twoReadyReplicas(t)
}

// turnOnExplain adds the explain option (loopback, its default address) to kubetree's Corefile
// and restarts the Deployment, which the kubectl plugin's explain and dump need.
func (n *node) turnOnExplain(t *testing.T) {
	t.Helper()
	n.addKubetreeOption(t, "explain")
}

// addKubetreeOption adds option (a line of the kubetree block) to kubetree's Corefile in
// kube-system/kubetree and restarts the Deployment, waiting for two running replicas.
func (n *node) addKubetreeOption(t *testing.T, option string) {
	t.Helper()
	cm, err := n.client.CoreV1().ConfigMaps("kube-system").Get(bg, "kubetree", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stanza := regexp.MustCompile(`(?m)^([ \t]*)kubetree [^\n]*\{$`)
	if !stanza.MatchString(cm.Data["Corefile"]) {
		t.Fatalf("no kubetree stanza in kube-system/kubetree's Corefile:\n%s", cm.Data["Corefile"])
	}
	cm.Data["Corefile"] = stanza.ReplaceAllString(cm.Data["Corefile"], "$0\n${1}    "+option)
	if _, err := n.client.CoreV1().ConfigMaps("kube-system").Update(bg, cm, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := n.kubectlRun("-n", "kube-system", "rollout", "restart", "deployment/kubetree"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := n.kubectlRun("-n", "kube-system", "rollout", "status", "deployment/kubetree", "--timeout=180s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The old replicas' lameduck: wait for exactly the two new ones.
	eventually(t, "two kubetree pods, running", 120*time.Second, func() bool {
		pods := n.kubetreePods(t)
		running := 0
		for _, p := range pods {
			if p.Status.Phase == api.PodRunning {
				running++
			}
		}
		return len(pods) == 2 && running == 2
	})
}

// frozenReplica freezes one kubetree replica's connection to the API server (the node drops
// every packet between that pod and the API server's port: its watches neither end nor
// advance), then
// creates Service born in a namespace of its own, waits until the other replica answers for it,
// and calls ask with both pods, the Service and its name. Afterwards it lifts the freeze and
// replaces the frozen pod, and waits for two ready replicas again.
func (n *node) frozenReplica(t *testing.T, ask func(fresh, frozen api.Pod, born *api.Service, name string) string) string {
	t.Helper()
	pods := n.kubetreePods(t)
	if len(pods) != 2 {
		t.Fatalf("want 2 kubetree pods, have %d", len(pods))
	}
	frozen, fresh := pods[0], pods[1]
	raw, err := os.ReadFile(n.dir + "/cp/ports")
	if err != nil {
		t.Fatal(err)
	}
	port := regexp.MustCompile(`(?m)^APISERVER_PORT=([0-9]+)$`).FindStringSubmatch(string(raw))
	if port == nil {
		t.Fatalf("no APISERVER_PORT in %s/cp/ports", n.dir)
	}
	// Both ways: dropping the pod's packets alone still lets the API server's data in.
	rules := [][]string{
		{"INPUT", "-p", "tcp", "-s", frozen.Status.PodIP, "--dport", port[1], "-j", "DROP"},
		{"OUTPUT", "-p", "tcp", "-d", frozen.Status.PodIP, "--sport", port[1], "-j", "DROP"},
	}
	for _, r := range rules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, r...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables -I %v: %v\n%s", r, err, out)
		}
	}
	lifted := false
	lift := func() {
		if lifted {
			return
		}
		lifted = true
		for _, r := range rules {
			if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).CombinedOutput(); err != nil {
				t.Errorf("iptables -D %v: %v\n%s", r, err, out)
			}
		}
	}
	defer lift()

	ns := "kubectl-frozen"
	if _, err := n.client.CoreV1().Namespaces().Create(bg, &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: ns}}, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	born := n.service(t, k8stest.ClusterIPService(ns, "born", nil, k8stest.TCP("http", 80)))
	name := "born." + ns + ".svc.cluster.local"
	var got string
	// A question that beats the Service's event is answered NXDOMAIN, which deploy/'s cache keeps
	// up to 30 s (seen under load): wait past that.
	eventually(t, fresh.Name+" answers "+name, 60*time.Second, func() bool {
		got = addressAt(fresh.Status.PodIP, name)
		return got == born.Spec.ClusterIP
	}, func() string { return got })
	out := ask(fresh, frozen, born, name)

	lift()
	if err := n.client.CoreV1().Pods("kube-system").Delete(bg, frozen.Name, meta.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitGone(t, frozen)
	n.twoReadyReplicas(t)
	return out
}

// addressAt is the first A record the DNS server at ip answers for name, asked from the node (or
// what went wrong).
func addressAt(ip, name string) string {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, err := dns.Exchange(m, net.JoinHostPort(ip, "53"))
	if err != nil {
		return err.Error()
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String()
		}
	}
	return dns.RcodeToString[r.Rcode]
}

// twoReadyReplicas waits until kube-system/kubetree has its two replicas ready again.
func (n *node) twoReadyReplicas(t *testing.T) {
	t.Helper()
	var ready int32
	eventually(t, "kubetree back at 2 ready replicas", 120*time.Second, func() bool {
		d, err := n.client.AppsV1().Deployments("kube-system").Get(bg, "kubetree", meta.GetOptions{})
		if err != nil {
			return false
		}
		ready = d.Status.ReadyReplicas
		return ready == 2
	}, func() string { return strconv.Itoa(int(ready)) + " ready" })
}

// scaleKubetree sets kube-system/kubetree's replicas.
func (n *node) scaleKubetree(t *testing.T, replicas int) {
	t.Helper()
	if out, err := n.kubectlRun("-n", "kube-system", "scale", "deployment/kubetree", "--replicas="+strconv.Itoa(replicas)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// testDoctorNodeLocal runs kubectl kubetree doctor on the NodeLocal node: it passes, with the
// cache's address as the pods' nameserver; and with the cache's upstream blocked (the node
// refusing the cache's packets to kubetree's pods, which stay ready), it fails and says so.
func testDoctorNodeLocal(t *testing.T, n *node) {
	plugin := env.root + "/bin/kubectl-kubetree"
	out, err := exec.Command(plugin, "--kubeconfig", n.kubeconfig, "doctor").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kubetree doctor: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "nameserver "+localDNS+", search ") {
		t.Errorf("doctor on the NodeLocal node: want the resolv.conf check to name %s\n%s", localDNS, out)
	}
	report(t, "kubectl kubetree doctor, behind NodeLocal DNSCache:\n%s", out)

	// The cache (host network) reaches kubetree's pods from the node itself: a reset for each of
	// its packets to their port 53, from this node's OUTPUT chain, blocks it; the pods' own
	// traffic, which the node forwards, passes.
	var rules [][]string
	for _, ip := range n.podIPs(t, "kube-system", "app.kubernetes.io/name=kubetree") {
		rules = append(rules, []string{"OUTPUT", "-p", "tcp", "-d", ip, "--dport", "53", "-j", "REJECT", "--reject-with", "tcp-reset"},
			[]string{"OUTPUT", "-p", "udp", "-d", ip, "--dport", "53", "-j", "REJECT"})
	}
	for _, r := range rules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, r...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables -I %v: %v\n%s", r, err, out)
		}
		defer func() {
			if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).CombinedOutput(); err != nil {
				t.Errorf("iptables -D %v: %v\n%s", r, err, out)
			}
		}()
	}
	out, err = exec.Command(plugin, "--kubeconfig", n.kubeconfig, "doctor", "--wait", "10s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the cache's upstream is blocked, or the cache is down") ||
		!strings.Contains(string(out), "2 ready endpoints") {
		t.Errorf("doctor with the cache's upstream blocked: %v, want a failure blaming the cache while kube-dns has its 2 endpoints\n%s", err, out)
	}
	report(t, "kubectl kubetree doctor, NodeLocal DNSCache's upstream blocked:\n%s", out)
}
