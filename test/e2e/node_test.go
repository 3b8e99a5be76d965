package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestNode runs kubetree as the cluster DNS of a real node (hack/node.sh: containerd, kubelet,
// kube-proxy, bridge CNI, controller-manager, scheduler), deployed from deploy/ unedited, and
// resolves names from a client pod through its kubelet-written resolv.conf. It needs root and
// starts and stops the node itself (about 100 s, most of it waiting out the liveness probe's
// 60 s initial delay): KUBETREE_E2E_NODE=1 (`make e2e-node`).
func TestNode(t *testing.T) {
	if os.Getenv("KUBETREE_E2E_NODE") == "" {
		t.Skip("needs root and a node; run `make e2e-node` (sets KUBETREE_E2E_NODE=1)")
	}
	n := startNode(t)

	hl := n.headless(t)
	foo := n.service(t, "bar", clusterIPService("foo"))
	web := n.service(t, "baz", clusterIPService("web"))
	n.service(t, "baz", &api.Service{
		ObjectMeta: meta.ObjectMeta{Name: "ext"},
		Spec:       api.ServiceSpec{Type: api.ServiceTypeExternalName, ExternalName: "www.example.test"},
	})

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
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := n.dnsq(c.args...)
			if err != nil {
				t.Fatalf("dnsq %s: %v\n%s", strings.Join(c.args, " "), err, out)
			}
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("dnsq %s = %q, want %q", strings.Join(c.args, " "), got, c.want)
			}
		})
	}

	t.Run("new service resolvable", func(t *testing.T) {
		start := time.Now()
		late := n.service(t, "baz", clusterIPService("late"))
		var out string
		eventually(t, "late to resolve", 60*time.Second, func() bool {
			out, _ = n.dnsq("late")
			return strings.TrimSpace(out) == late.Spec.ClusterIP
		}, func() string { return out })
		report(t, "service created -> resolved in a pod: %s", time.Since(start).Round(time.Millisecond))
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
}

func startNode(t *testing.T) *node {
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
	report(t, "node up in %s, kubetree deployed and the client pod ready %s later", up.Round(time.Millisecond), (time.Since(start) - up).Round(time.Millisecond))
	n := &node{dir: dir, kubeconfig: dir + "/cp/kubeconfig", kubectl: env.root + "/bin/kubectl"}
	cfg, err := clientcmd.BuildConfigFromFlags("", n.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	n.client = kubernetes.NewForConfigOrDie(cfg)
	return n
}

// dnsq runs /dnsq ARGS in baz/client: the pod's own resolv.conf, written by the kubelet.
func (n *node) dnsq(args ...string) (string, error) {
	cmd := exec.Command(n.kubectl, append([]string{"--kubeconfig", n.kubeconfig, "-n", "baz", "exec", "client", "--", "/dnsq"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func clusterIPService(name string) *api.Service {
	return &api.Service{
		ObjectMeta: meta.ObjectMeta{Name: name},
		Spec:       api.ServiceSpec{Ports: []api.ServicePort{{Name: "http", Port: 80, Protocol: api.ProtocolTCP}}},
	}
}

// service creates svc in ns (and ns, if missing).
func (n *node) service(t *testing.T, ns string, svc *api.Service) *api.Service {
	t.Helper()
	if _, err := n.client.CoreV1().Namespaces().Get(bg, ns, meta.GetOptions{}); err != nil {
		if _, err := n.client.CoreV1().Namespaces().Create(bg, &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: ns}}, meta.CreateOptions{}); err != nil {
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
	svc := clusterIPService("hl")
	svc.Spec.ClusterIP = api.ClusterIPNone
	svc.Spec.Selector = map[string]string{"app": "hl"}
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
	n.service(t, "baz", svc)
	no, yes, uid := false, true, int64(65532)
	pod := &api.Pod{
		ObjectMeta: meta.ObjectMeta{Name: "h1", Labels: map[string]string{"app": "hl"}},
		Spec: api.PodSpec{
			Hostname: "h1", Subdomain: "hl",
			TerminationGracePeriodSeconds: new(int64),
			SecurityContext: &api.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid,
				SeccompProfile: &api.SeccompProfile{Type: api.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []api.Container{{
				Name: "dnsq", Image: "kubetree/dnsq:1", ImagePullPolicy: api.PullNever,
				Args: []string{"-t", "sleep"},
				SecurityContext: &api.SecurityContext{
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &api.Capabilities{Drop: []api.Capability{"ALL"}},
				},
			}},
		},
	}
	if _, err := n.client.CoreV1().Pods("baz").Create(bg, pod, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	eventually(t, "pod baz/h1 ready", 60*time.Second, func() bool {
		p, err := n.client.CoreV1().Pods("baz").Get(bg, "h1", meta.GetOptions{})
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
	// Ask only once the EndpointSlice holds the pod: an early NXDOMAIN would be cached.
	eventually(t, "the EndpointSlice of hl to hold h1", 30*time.Second, func() bool {
		l, err := n.client.DiscoveryV1().EndpointSlices("baz").List(bg, meta.ListOptions{LabelSelector: "kubernetes.io/service-name=hl"})
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
	var out string
	eventually(t, "h1.hl to resolve", 45*time.Second, func() bool {
		out, _ = n.dnsq("h1.hl")
		return strings.TrimSpace(out) == ip
	}, func() string { return fmt.Sprintf("got %q, want %s", out, ip) })
	return headlessPod{ip: ip}
}
