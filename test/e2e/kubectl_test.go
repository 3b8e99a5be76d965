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
