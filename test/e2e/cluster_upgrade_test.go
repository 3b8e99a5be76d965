package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// upgradeAfterMigration: what kubeadm's upgrade does to a cluster whose DNS has been migrated to
// kubetree in place (kubeadm reconciles its DNS add-on, the Deployment `coredns`, its ConfigMap,
// the Service and the role, in the upgrade's addon/coredns phase). First the upgrade as operators
// type it, `kubeadm upgrade apply VERSION --yes`, on the control-plane node; then
// docs/migrating.md's section 6 as written (blocks `test:upgrade` on the control-plane node,
// `test:upgrade-node` on each other node) while a pod on every node asks: kubetree must still
// serve, every object of its DNS as it was, and no lookup may fail. The version is kubeadm's own:
// an upgrade to the version the cluster runs re-applies everything an upgrade applies.
func (c *cluster) upgradeAfterMigration(t *testing.T, release string, clients, cases []string) {
	out, err := exec.Command(env.root+"/bin/kubeadm", "version", "-o", "short").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(out))
	apply, node := docBlocks(t, "docs/migrating.md", "upgrade"), docBlocks(t, "docs/migrating.md", "upgrade-node")
	if len(apply) == 0 || len(node) == 0 {
		t.Fatalf("docs/migrating.md marks %d blocks test:upgrade and %d test:upgrade-node", len(apply), len(node))
	}

	before := c.dnsObjects(t)
	plain, err := c.kubeadm(t, 1, "upgrade", "apply", version, "--yes")
	outcome := "succeeded"
	if err != nil {
		outcome = fmt.Sprintf("failed (%v): %s", err, errorLines(plain))
	}
	changed := changedObjects(before, c.dnsObjects(t))
	report(t, "kubeadm upgrade: `kubeadm upgrade apply %s --yes` %s; DNS objects changed: %s", version, outcome, orNone(changed))
	servedBy(t, c.dnsPods(t), "kubetree", release)
	if err == nil || len(changed) > 0 {
		t.Errorf("kubeadm upgrade apply without the doc's flags: %s, changed %s; docs/migrating.md says it stops at its preflight's CoreDNS checks, changing nothing", outcome, orNone(changed))
	}

	// The clients ask through the doc's upgrade from loops that are their pods' main processes:
	// the API server's restart ends kubectl exec sessions.
	loops := make([]*podLoop, len(clients))
	for i, node := range clients {
		loops[i] = c.startPodLoop(t, "clients", node, cases)
	}
	path := func(n int) string {
		return "PATH=" + c.kubeadmOn(t, n) + ":" + filepath.Join(env.root, "bin") + ":" + os.Getenv("PATH")
	}
	pods := c.dnsPods(t)
	start := time.Now()
	for _, b := range apply {
		c.runDoc(t, t.TempDir(), b, path(1), "KUBERNETES_VERSION="+version)
	}
	applied := time.Since(start)
	for n := 2; n <= c.nodes; n++ {
		for _, b := range node {
			c.runDoc(t, t.TempDir(), b, path(n))
		}
	}
	changed, restarted := changedObjects(before, c.dnsObjects(t)), c.restarted(pods)
	var all loopSummary
	for i, l := range loops {
		s := l.end(t)
		report(t, "kubeadm upgrade by the doc, from %s: lookups %d failed %d retried %d%s", clients[i], s.Queries, s.Failed, s.Retried,
			strings.Join(append([]string{""}, append(s.Failures, s.Retries...)...), "\n  "))
		all.merge(s)
	}
	report(t, "kubeadm upgrade: by docs/migrating.md (apply on the control plane in %.0f s, node on %d other nodes): DNS objects changed: %s; DNS pods replaced or restarted: %s; %s",
		applied.Seconds(), c.nodes-1, orNone(changed), orNone(restarted), all)
	c.results = append(c.results, clusterResult{"section 6's kubeadm upgrade", all})
	c.upgrade = fmt.Sprintf("`kubeadm upgrade apply` on the control plane took %.0f s; DNS objects changed: %s; DNS pods replaced or restarted: %s.",
		applied.Seconds(), orNone(changed), orNone(restarted))
	if all.Failed > 0 || all.UDP == 0 || all.TCP == 0 {
		t.Errorf("through the doc's upgrade, %d of %d lookups failed (UDP %d, TCP %d):\n%s", all.Failed, all.Queries, all.UDP, all.TCP, strings.Join(all.Failures, "\n"))
	}
	servedBy(t, c.dnsPods(t), "kubetree", release)
	for _, client := range clients {
		out, err := c.kubectlRun("-n", "clients", "exec", "dnsq-"+client, "--", "/dnsq", "kubernetes.default")
		if got := strings.TrimSpace(out); err != nil || got != firstAddress(t, c.env["SERVICE_CIDR"]) {
			t.Errorf("kubernetes.default from dnsq-%s after the upgrade = %q (%v)", client, got, err)
		}
	}
	if len(restarted) > 0 {
		t.Errorf("the doc's upgrade replaced or restarted DNS pods %v", restarted)
	}
	if len(changed) > 0 {
		t.Errorf("the doc's upgrade changed the DNS's %s", strings.Join(changed, ", "))
	}
}

// restarted names those of pods that are gone or whose first container restarted since.
func (c *cluster) restarted(pods []api.Pod) []string {
	var names []string
	for _, p := range pods {
		cur, err := c.client.CoreV1().Pods(p.Namespace).Get(bg, p.Name, meta.GetOptions{})
		if err != nil || cur.Status.ContainerStatuses[0].RestartCount > p.Status.ContainerStatuses[0].RestartCount {
			names = append(names, p.Name)
		}
	}
	return names
}

// kubeadm runs kubeadm in node n (hack/kubeadm-cluster.sh kubeadm) and returns its output.
func (c *cluster) kubeadm(t *testing.T, n int, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(c.kubeadmOn(t, n), "kubeadm"), args...).CombinedOutput()
	return string(out), err
}

// kubeadmOn is a directory holding a `kubeadm` that runs in node n, as an operator's kubeadm runs
// on that node: put first on PATH, the doc's commands run there as written.
func (c *cluster) kubeadmOn(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nexec %q kubeadm %q %d \"$@\"\n", env.root+"/hack/kubeadm-cluster.sh", c.dir, n)
	if err := os.WriteFile(filepath.Join(dir, "kubeadm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dnsObjects describes each object kubeadm's DNS add-on owns, and the ConfigMap the migration
// added, by name: an upgrade that touches one changes its description.
func (c *cluster) dnsObjects(t *testing.T) map[string]string {
	t.Helper()
	objects := map[string]string{}
	d, err := c.client.AppsV1().Deployments("kube-system").Get(bg, "coredns", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	objects["Deployment coredns"] = fmt.Sprintf("image %s, config %s, replicas %d", pod.Containers[0].Image, pod.Volumes[0].ConfigMap.Name, *d.Spec.Replicas)
	for _, name := range []string{"coredns", "coredns-kubetree"} {
		cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(bg, name, meta.GetOptions{})
		if err != nil {
			objects["ConfigMap "+name] = err.Error()
			continue
		}
		objects["ConfigMap "+name] = fmt.Sprintf("Corefile %x", sha256.Sum256([]byte(cm.Data["Corefile"])))
	}
	role, err := c.client.RbacV1().ClusterRoles().Get(bg, "system:coredns", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objects["ClusterRole system:coredns"] = fmt.Sprint(role.Rules)
	svc, err := c.client.CoreV1().Services("kube-system").Get(bg, "kube-dns", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objects["Service kube-dns"] = fmt.Sprint(svc.Spec.ClusterIPs, svc.Spec.Ports)
	return objects
}

// changedObjects names the objects whose description differs, with the new one.
func changedObjects(before, after map[string]string) []string {
	var changed []string
	for name, b := range before {
		if a := after[name]; a != b {
			changed = append(changed, fmt.Sprintf("%s (now %s)", name, a))
		}
	}
	slices.Sort(changed)
	return changed
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, "; ")
}

// errorLines is kubeadm's error lines ([ERROR ...] and error: ...), joined by " | ".
func errorLines(text string) string {
	var lines []string
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "[ERROR") || strings.HasPrefix(line, "error:") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, " | ")
}

// podLoop is a `dnsq -t loop` that is a pod's main process, on one node: unlike a kubectl exec
// session, it outlives the API server's restart. It stops once the Service named stop resolves
// in its namespace, and prints its summary to its log.
type podLoop struct {
	c             *cluster
	ns, pod, stop string
}

func (c *cluster) startPodLoop(t *testing.T, ns, node string, cases []string) *podLoop {
	t.Helper()
	l := &podLoop{c: c, ns: ns, pod: "loop-" + node, stop: "stop-loop-" + node}
	pod := c.dnsqPod(l.pod, node)
	pod.Spec.RestartPolicy = api.RestartPolicyNever
	// A lookup over TCP is a connection or two, and each closed one holds its port for 60 s
	// (TIME_WAIT): at this loop's pace over minutes, the default 28,000 ports ran out ("cannot
	// assign requested address"). A safe sysctl, namespaced to the pod.
	pod.Spec.SecurityContext.Sysctls = []api.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: "1024 65535"}}
	pod.Spec.Containers[0].Args = append([]string{"-t", "loop", "-until", l.stop}, cases...)
	if _, err := c.client.CoreV1().Pods(ns).Create(bg, pod, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitReady(t, ns, l.pod)
	return l
}

// end stops the loop, waits for its pod to finish, and returns the summary from its log.
func (l *podLoop) end(t *testing.T) loopSummary {
	t.Helper()
	l.c.service(t, k8stest.ClusterIPService(l.ns, l.stop, nil, k8stest.TCP("stop", 80)))
	eventually(t, l.pod+" to finish", 2*time.Minute, func() bool {
		p, err := l.c.client.CoreV1().Pods(l.ns).Get(bg, l.pod, meta.GetOptions{})
		return err == nil && (p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed)
	})
	out, err := l.c.kubectlRun("-n", l.ns, "logs", l.pod)
	var s loopSummary
	if err != nil || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("the summary of %s: %v\n%s", l.pod, err, out)
	}
	return s
}
