package e2e

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	rbac "k8s.io/api/rbac/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestKubectlExplainFrozenReplica: two kubetree replicas of the same cluster, one of whose
// connections to the API server freezes (the freeze proxy, and every new connection into a black
// hole). A service created meanwhile exists for the other replica only: `kubectl kubetree explain
// --all` names the frozen replica, its stale answer and the newer object the other answered from.
// The replicas' explain endpoints are given with --endpoint: no kubelet runs here to port-forward
// to (TestNode's "kubectl kubetree" port-forwards).
func TestKubectlExplainFrozenReplica(t *testing.T) {
	plugin := env.root + "/bin/kubectl-kubetree"
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("%v: make build builds bin/kubectl-kubetree", err)
	}
	ns := newNamespace(t, "kubectl-frozen")
	createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	addrs := freePorts(t, 2)
	fresh := startCoreDNS(t, "namespaces "+ns, "explain "+addrs[0])
	second := newAPIServer(t)
	proxy := k8stest.NewProxy(t, second.url[len("https://"):])
	frozen := startCoreDNS(t, "namespaces "+ns, "kubeconfig "+kubeconfigFor(t, "https://"+proxy.Addr()), "explain "+addrs[1])
	for _, c := range []*coreDNS{fresh, frozen} {
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitRcode(t, svcName(ns, "web"), dns.TypeA, dns.RcodeSuccess)
	}

	// A listener that never accepts: a connection to it is made by the kernel and then hears nothing.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	proxy.Switch(hole.Addr().String())
	proxy.Freeze()
	born := createService(t, k8stest.ClusterIPService(ns, "born", nil, k8stest.TCP("http", 80)))
	fresh.waitRcode(t, svcName(ns, "born"), dns.TypeA, dns.RcodeSuccess)

	args := []string{"explain", svcName(ns, "born"), "--all", "--endpoint", "fresh=http://" + addrs[0], "--endpoint", "frozen=http://" + addrs[1]}
	out, err := exec.Command(plugin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kubetree %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	report(t, "kubectl kubetree explain %s --all, one replica's API connection frozen:\n%s", svcName(ns, "born"), out)
	for _, want := range []string{
		"Replicas disagree: frozen answers NXDOMAIN []; fresh answers NOERROR [A " + born.Spec.ClusterIP + "] from Service " + ns + "/born@" + born.ResourceVersion,
		"no-such-service",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}

	out, err = exec.Command(plugin, append(args, "-o", "json")...).Output()
	var res struct {
		Replicas []struct {
			Pod         string `json:"pod"`
			Explanation struct {
				Rcode  string `json:"rcode"`
				Reason string `json:"reason"`
			} `json:"explanation"`
		} `json:"replicas"`
		Disagreements []string `json:"disagreements"`
	}
	if err != nil || json.Unmarshal(out, &res) != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(res.Disagreements) != 1 || len(res.Replicas) != 2 || res.Replicas[1].Explanation.Reason != "no-such-service" {
		t.Errorf("-o json: %+v, want one disagreement, the frozen replica's no-such-service", res)
	}
}

// TestKubectlBadInput: against the real API server, each input kubectl kubetree refuses before
// it port-forwards gets its reason and a non-zero exit status: a DNS Service that does not exist,
// one with no running pod, a replica that is not one of its pods, an unknown type, a --from pod
// that does not exist, and a user whom RBAC does not let port-forward. (A DNS without the explain
// endpoint needs a kubelet to port-forward to: TestNode's "kubectl kubetree".)
func TestKubectlBadInput(t *testing.T) {
	plugin := env.root + "/bin/kubectl-kubetree"
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("%v: make build builds bin/kubectl-kubetree", err)
	}
	ns := newNamespace(t, "kubectl-bad")
	front := k8stest.ClusterIPService(ns, "dns", nil, k8stest.UDP("dns", 53))
	front.Spec.Selector = map[string]string{"app": "dns"}
	createService(t, front)
	dnsService := ns + "/dns"
	refused := func(t *testing.T, args []string, phrases ...string) {
		t.Helper()
		out, err := exec.Command(plugin, append([]string{"--kubeconfig", env.vars["KUBECONFIG"]}, args...)...).CombinedOutput()
		if err == nil {
			t.Errorf("kubectl kubetree %s: exit status 0, want an error\n%s", strings.Join(args, " "), out)
		}
		for _, p := range phrases {
			if !strings.Contains(string(out), p) {
				t.Errorf("kubectl kubetree %s: want %q in\n%s", strings.Join(args, " "), p, out)
			}
		}
	}
	name := "kubernetes.default.svc.cluster.local"
	refused(t, []string{"explain", name, "--dns-service", "nowhere/dns"}, "no Service nowhere/dns", "--dns-service")
	refused(t, []string{"dump", "--dns-service", "nowhere/dns"}, "no Service nowhere/dns")
	refused(t, []string{"doctor", "--dns-service", "nowhere/dns"}, "no Service nowhere/dns")
	refused(t, []string{"explain", name, "--dns-service", dnsService}, "no running DNS pod", "scaled to zero")

	runningPod(t, ns, "dns-1", map[string]string{"app": "dns"}, "127.0.0.51")
	refused(t, []string{"explain", name, "--dns-service", dnsService, "--replica", "dns-2"}, "--replica dns-2 is not a running DNS pod; they are: dns-1")
	refused(t, []string{"explain", name, "BOGUS", "--dns-service", dnsService}, `unknown DNS type "BOGUS"`)
	refused(t, []string{"explain", "a..b", "--dns-service", dnsService}, "not a domain name")
	refused(t, []string{"explain", name, "--from", "pod/nope", "-n", ns, "--dns-service", dnsService}, "pod nope not found in namespace "+ns)
	refused(t, []string{"explain", name, "-o", "wide", "--dns-service", dnsService}, "the formats are json and yaml")

	// A user who may read the DNS Service and its pods, but not port-forward to them.
	const user = "kubetree-reader"
	role := &rbac.Role{ObjectMeta: meta.ObjectMeta{Name: user, Namespace: ns}, Rules: []rbac.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"get", "list"}},
	}}
	if _, err := env.client.RbacV1().Roles(ns).Create(bg, role, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbac.RoleBinding{ObjectMeta: meta.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:  rbac.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects: []rbac.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	if _, err := env.client.RbacV1().RoleBindings(ns).Create(bg, binding, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused(t, []string{"explain", name, "--dns-service", dnsService, "--as", user},
		"RBAC forbids it: you may not create pods/portforward in namespace "+ns, `verb "create"`, `resource "pods/portforward"`)
	refused(t, []string{"doctor", "--as", user}, "RBAC forbids it: you may not create namespaces cluster-wide")
}

// doctorReport is what `kubectl kubetree doctor -o json` prints (cmd/kubectl-kubetree/internal/doctor,
// Report), as far as the tests read it.
type doctorReport struct {
	Pass   bool `json:"pass"`
	Checks []struct {
		Section string `json:"section"`
		Pass    bool   `json:"pass"`
		Info    bool   `json:"info"` // a measurement, never a failure
	} `json:"checks"`
}
