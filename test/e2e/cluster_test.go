package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestCluster brings up the kubeadm cluster (hack/kubeadm-cluster.sh, `make cluster`: kubeadm init
// and join, the control plane as static pods, kube-proxy and CoreDNS as kubeadm deploys them, every
// image from our registry) and checks it is the cluster issue 38 asks for: every node Ready, kubelets
// and kubeadm at the pinned version, and a pod on each node resolving through kubeadm's CoreDNS
// (a Service, an SRV record, a name outside the cluster through the stand-in upstream); then
// kubectl kubetree doctor from every node, docs/migrating.md's migration and way back, its kubeadm
// upgrade, and the doctor again. It needs root and starts and stops the cluster itself:
// KUBETREE_E2E_CLUSTER=1 (make e2e-cluster, in make test).
func TestCluster(t *testing.T) {
	if os.Getenv("KUBETREE_E2E_CLUSTER") == "" {
		t.Skip("needs root and starts a kubeadm cluster; run with KUBETREE_E2E_CLUSTER=1 (after make cluster-images)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("TestCluster needs root (namespaces, a bridge, containerd, kubelets)")
	}
	c := startCluster(t)

	// The version every node runs is the one kubeadm was built at (hack/tools pins it).
	kubeadm, err := exec.Command(env.root+"/bin/kubeadm", "version", "-o", "short").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(kubeadm))
	nodes, err := c.client.CoreV1().Nodes().List(bg, meta.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != c.nodes {
		t.Fatalf("%d nodes, want %d", len(nodes.Items), c.nodes)
	}
	cidrs := map[string]bool{}
	for _, n := range nodes.Items {
		if !nodeReady(n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
		if n.Status.NodeInfo.KubeletVersion != version {
			t.Errorf("node %s runs kubelet %s, kubeadm is %s", n.Name, n.Status.NodeInfo.KubeletVersion, version)
		}
		if n.Spec.PodCIDR == "" || cidrs[n.Spec.PodCIDR] {
			t.Errorf("node %s has podCIDR %q: each node needs its own", n.Name, n.Spec.PodCIDR)
		}
		cidrs[n.Spec.PodCIDR] = true
	}
	report(t, "%d nodes ready", len(nodes.Items))
	report(t, "kubeadm %s", version)

	t.Run("a node reaches the registry and the upstream on the host, nothing else", func(t *testing.T) {
		// A listener of the host's on every address, as any service of this machine's may be.
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
		host := c.env["REGISTRY"][:strings.LastIndex(c.env["REGISTRY"], ":")]
		reach := func(port string) bool {
			// From node 1's network namespace, as its kubelet and pods would connect.
			return exec.Command("nsenter", "--net="+c.dir+"/ns/ktc-1.net", "timeout", "3", "bash", "-c",
				"echo > /dev/tcp/"+host+"/"+port).Run() == nil
		}
		if port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port); reach(port) {
			t.Errorf("node ktc-1 connects to the host's %s:%s: only the registry and the upstream may be reached", host, port)
		}
		for _, port := range []string{c.env["REGISTRY"][len(host)+1:], "53"} {
			if !reach(port) {
				t.Errorf("node ktc-1 cannot connect to the host's %s:%s", host, port)
			}
		}
	})

	// kubeadm's CoreDNS addon, from our registry at the version kubeadm pins.
	dns, err := c.client.AppsV1().Deployments("kube-system").Get(bg, "coredns", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kubeadm's own list of the images it deploys (`kubeadm config images list`, kept by the script).
	images, err := os.ReadFile(c.dir + "/kubeadm/images")
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, img := range strings.Fields(string(images)) {
		if strings.HasPrefix(img, c.env["IMAGE_REPOSITORY"]+"/coredns:") {
			want = img
		}
	}
	if img := dns.Spec.Template.Spec.Containers[0].Image; want == "" || img != want {
		t.Errorf("kubeadm's CoreDNS Deployment runs %s, want %q (kubeadm config images list:\n%s)", img, want, images)
	}
	if dns.Status.ReadyReplicas == 0 || dns.Status.ReadyReplicas != dns.Status.Replicas {
		t.Errorf("kubeadm's CoreDNS: %d of %d replicas ready", dns.Status.ReadyReplicas, dns.Status.Replicas)
	}

	// A client pod on each node (the control plane's taint tolerated), asking through its
	// kubelet-written resolv.conf: kube-dns's ClusterIP, kubeadm's CoreDNS behind it.
	names := c.startClients(t, nodes.Items)
	for _, n := range nodes.Items {
		t.Run("from "+n.Name, func(t *testing.T) {
			pod := "dnsq-" + n.Name
			c.waitReady(t, "clients", pod)
			conf, err := c.kubectlRun("-n", "clients", "exec", pod, "--", "/dnsq", "-t", "conf")
			if err != nil || !strings.Contains(conf, "nameserver "+c.env["CLUSTER_DNS"]) {
				t.Errorf("the pod's resolv.conf does not name the cluster DNS %s (%v):\n%s", c.env["CLUSTER_DNS"], err, conf)
			}
			for _, q := range []struct {
				args []string
				want string
			}{
				{[]string{"kubernetes.default"}, firstAddress(t, c.env["SERVICE_CIDR"])},
				{[]string{"-t", "srv", "_dns._udp.kube-dns.kube-system.svc.cluster.local"}, "0 100 53 kube-dns.kube-system.svc.cluster.local."},
				{[]string{"api.example.test"}, "198.51.100.8"},
			} {
				out, err := c.kubectlRun(append([]string{"-n", "clients", "exec", pod, "--", "/dnsq"}, q.args...)...)
				if got := strings.TrimSpace(out); err != nil || got != q.want {
					t.Errorf("dnsq %s on %s = %q (%v), want %q", strings.Join(q.args, " "), n.Name, got, err, q.want)
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	t.Run("kubectl kubetree doctor from every node, kubeadm's CoreDNS serving", func(t *testing.T) {
		c.doctorFromEveryNode(t, names, "before the migration")
	})
	t.Run("migration by docs/migrating.md and back, lookups from every node", func(t *testing.T) {
		testClusterMigration(t, c, names)
	})
	t.Run("kubectl kubetree doctor from every node, kubetree serving", func(t *testing.T) {
		c.doctorFromEveryNode(t, names, "after the migration")
	})
	c.writeResults(t)
}

// writeResults writes the run's lookups through each switch to _out/TestCluster.md, in the form of
// test/e2e/testdata/TestCluster.md, where a run that the docs quote is kept.
func (c *cluster) writeResults(t *testing.T) {
	var s strings.Builder
	rev, _ := exec.Command("git", "-C", env.root, "rev-parse", "--short", "HEAD").Output()
	fmt.Fprintf(&s, "# TestCluster: lookups through the migration, the rollouts and the kubeadm upgrade\n\n")
	fmt.Fprintf(&s, "## The migration and the upgrade\n\nTestCluster (`make e2e-cluster`), %s, build %s, %d cores: a kubeadm cluster of %d nodes, "+
		"kube-proxy %s, a pod on each node asking without pause over UDP and TCP in turn.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), strings.TrimSpace(string(rev)), runtime.NumCPU(), c.nodes, c.env["PROXY_MODE"])
	fmt.Fprintf(&s, "| switch | lookups | failed | answered only after the resolver's retry | p50 | p99 |\n")
	fmt.Fprintf(&s, "| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range c.results {
		fmt.Fprintf(&s, "| %s | %s | %d | %d | %.1f ms | %.1f ms |\n", r.row, thousands(r.Queries), r.Failed, r.Retried, r.P50, r.P99)
	}
	if c.upgrade != "" {
		fmt.Fprintf(&s, "\nThe upgrade (docs/migrating.md's blocks `test:upgrade` and `test:upgrade-node`): %s\n", c.upgrade)
	}
	if err := os.WriteFile(env.root+"/_out/TestCluster.md", []byte(s.String()), 0o644); err != nil {
		t.Error(err)
	}
}

// thousands writes n with a comma between digit groups, as the docs do.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// cluster is a kubeadm cluster that hack/kubeadm-cluster.sh brought up.
type cluster struct {
	*node
	nodes     int
	env       map[string]string
	dnsqImage string // the release's dnsq image in the cluster's registry, by digest
	results   []clusterResult
	upgrade   string // what the doc's kubeadm upgrade did
}

// clusterResult is the lookups of the client pods through one switch of the cluster DNS.
type clusterResult struct {
	row string
	loopSummary
}

// startCluster brings the cluster up in a fresh directory and takes it down when the test ends.
func startCluster(t *testing.T) *cluster {
	d, err := os.MkdirTemp("/tmp", "ktc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	run := func(verb string) (string, error) {
		var out bytes.Buffer
		cmd := exec.Command(env.root+"/hack/kubeadm-cluster.sh", verb, d)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	start := time.Now()
	if out, err := run("up"); err != nil {
		run("down")
		t.Fatalf("kubeadm-cluster.sh up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := run("down"); err != nil {
			t.Errorf("kubeadm-cluster.sh down: %v\n%s", err, out)
		}
	})
	e := readEnv(d + "/env")
	report(t, "cluster up in %s (kube-proxy %s)", time.Since(start).Round(time.Second), e["PROXY_MODE"])
	n := &node{dir: d, kubeconfig: e["KUBECONFIG"], kubectl: env.root + "/bin/kubectl"}
	cfg, err := clientcmd.BuildConfigFromFlags("", n.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	n.client = kubernetes.NewForConfigOrDie(cfg)
	c := &cluster{node: n, env: e}
	if c.nodes, err = strconv.Atoi(e["NODES"]); err != nil {
		t.Fatalf("%s/env: NODES=%q", d, e["NODES"])
	}
	c.dnsqImage = c.pushDNSQ(t)
	return c
}

// startClients makes namespace clients and a client pod dnsq-NODE (the release's dnsq image) on
// each node, and returns the nodes' names; the pods may not be ready yet.
func (c *cluster) startClients(t *testing.T, nodes []api.Node) []string {
	t.Helper()
	if _, err := c.client.CoreV1().Namespaces().Create(bg, &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: "clients"}}, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
		if _, err := c.client.CoreV1().Pods("clients").Create(bg, c.dnsqPod("dnsq-"+n.Name, n.Name), meta.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// firstAddress is the address after a prefix's own (a Service range's first, the kubernetes Service's).
func firstAddress(t *testing.T, prefix string) string {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		t.Fatalf("service range %q: %v", prefix, err)
	}
	return p.Masked().Addr().Next().String()
}

func nodeReady(n api.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}

// doctorFromEveryNode runs kubectl kubetree doctor with its client pods on each node at once
// (the release's dnsq image, pulled by digest from the cluster's registry), and fails on a failed check.
func (c *cluster) doctorFromEveryNode(t *testing.T, nodes []string, when string) {
	t.Helper()
	type result struct {
		node string
		out  []byte
		err  error
	}
	results := make(chan result, len(nodes))
	for _, n := range nodes {
		go func() {
			out, err := exec.Command(env.root+"/bin/kubectl-kubetree", "--kubeconfig", c.kubeconfig, "doctor",
				"--node", n, "--image", c.dnsqImage, "-o", "json").CombinedOutput()
			results <- result{n, out, err}
		}()
	}
	for range nodes {
		r := <-results
		var rep doctorReport
		if err := json.Unmarshal(r.out, &rep); err != nil || len(rep.Checks) == 0 {
			t.Errorf("kubectl kubetree doctor --node %s %s: %v\n%s", r.node, when, r.err, r.out)
			continue
		}
		passed := 0
		for _, ch := range rep.Checks {
			if ch.Pass || ch.Info {
				passed++
			}
		}
		report(t, "kubectl kubetree doctor from %s %s: %d of %d checks passed", r.node, when, passed, len(rep.Checks))
		if !rep.Pass || r.err != nil {
			t.Errorf("kubectl kubetree doctor --node %s %s: %v\n%s", r.node, when, r.err, r.out)
		}
	}
}
