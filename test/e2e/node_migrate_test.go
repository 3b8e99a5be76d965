package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testMigration follows docs/migrating.md on the node: the cluster DNS Deployment starts as
// kubeadm leaves it (CoreDNS as released, its own image pulled from the node's registry, the
// in-tree kubernetes plugin in ConfigMap coredns: deploy/'s Corefile with the directive renamed);
// it is switched to kubetree by one rolling update of image and ConfigMap (step 5), and back by
// `kubectl rollout undo` (section 5), while baz/client asks every case without pause over UDP
// and TCP. Not one query may fail through either switch.
func testMigration(t *testing.T, n *node, cases []string) {
	const deployment = "deployment/kubetree"
	stock := n.pushImage(t, filepath.Join(env.root, "_out/images/coredns-stock.oci"), "coredns/coredns:v1.15.0")
	release := n.nodeEnv(t, "KUBETREE_IMAGE")

	var cm api.ConfigMap
	decodeManifest(t, "deploy/configmap.yaml", &cm)
	kubetreeCorefile := cm.Data["Corefile"]
	directive := regexp.MustCompile(`(?m)^(\s*)kubetree(\s)`)
	for name, corefile := range map[string]string{
		"coredns":          directive.ReplaceAllString(kubetreeCorefile, "${1}kubernetes${2}"),
		"coredns-kubetree": kubetreeCorefile,
	} {
		c := &api.ConfigMap{ObjectMeta: meta.ObjectMeta{Name: name, Namespace: "kube-system"}, Data: map[string]string{"Corefile": corefile}}
		if _, err := n.client.CoreV1().ConfigMaps("kube-system").Create(bg, c, meta.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// patch is a JSON patch of the Deployment's pod template, as docs/migrating.md writes it, and
	// its rolling update to the end (the old pods exited).
	patch := func(ops string) {
		t.Helper()
		old := n.kubetreePods(t)
		if out, err := n.kubectlRun("-n", "kube-system", "patch", deployment, "--type=json", "-p", ops); err != nil {
			t.Fatalf("kubectl patch: %v\n%s", err, out)
		}
		n.rollOutDNS(t, deployment, old)
	}

	// Before: the in-tree plugin, from CoreDNS's own image, as a cluster runs it today.
	patch(fmt.Sprintf(`[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": %q},
		{"op": "replace", "path": "/spec/template/spec/volumes/0/configMap/name", "value": "coredns"},
		{"op": "remove", "path": "/spec/template/spec/containers/0/env"}]`, stock))
	n.servedBy(t, "kubernetes", stock)

	t.Run("to kubetree by one rolling update (docs/migrating.md, step 5)", func(t *testing.T) {
		q := n.startLoop(t, "baz", "client", cases)
		patch(fmt.Sprintf(`[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": %q},
			{"op": "replace", "path": "/spec/template/spec/volumes/0/configMap/name", "value": "coredns-kubetree"},
			{"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [{"name": "GOMEMLIMIT", "value": "150MiB"}]}]`, release))
		q.check(t, "the switch to kubetree")
		n.servedBy(t, "kubetree", release)
	})
	t.Run("back by rollout undo (docs/migrating.md, section 5)", func(t *testing.T) {
		q := n.startLoop(t, "baz", "client", cases)
		old := n.kubetreePods(t)
		if out, err := n.kubectlRun("-n", "kube-system", "rollout", "undo", deployment); err != nil {
			t.Fatalf("rollout undo: %v\n%s", err, out)
		}
		n.rollOutDNS(t, deployment, old)
		q.check(t, "the rollback to the in-tree plugin")
		n.servedBy(t, "kubernetes", stock)
	})
	// Leave the node as deploy/ made it, for what runs after.
	old := n.kubetreePods(t)
	if out, err := n.kubectlRun("-n", "kube-system", "rollout", "undo", deployment); err != nil {
		t.Fatalf("rollout undo: %v\n%s", err, out)
	}
	n.rollOutDNS(t, deployment, old)
	n.servedBy(t, "kubetree", release)
}

// pushImage pushes the image of an OCI layout to the node's registry as repoTag and returns its
// reference by digest.
func (n *node) pushImage(t *testing.T, layout, repoTag string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(env.root, "bin/release"), "push", "-layout", layout,
		"-to", n.nodeEnv(t, "REGISTRY")+"/"+repoTag, "-ca", filepath.Join(n.dir, "cp/pki/ca.crt")).CombinedOutput()
	if err != nil {
		t.Fatalf("pushing %s (make node-images builds it): %v\n%s", layout, err, out)
	}
	return strings.TrimSpace(string(out))
}

// rollOutDNS waits for the Deployment's rollout and for the pods it replaced to have exited.
func (n *node) rollOutDNS(t *testing.T, deployment string, old []api.Pod) {
	t.Helper()
	if out, err := n.kubectlRun("-n", "kube-system", "rollout", "status", deployment, "--timeout=180s"); err != nil {
		t.Fatalf("rollout status: %v\n%s", err, out)
	}
	n.waitGone(t, old...)
}

// servedBy checks that every pod of the cluster DNS runs image and serves with plugin.
func (n *node) servedBy(t *testing.T, plugin, image string) {
	t.Helper()
	servedBy(t, n.kubetreePods(t), plugin, image)
}

// servedBy checks that each of pods runs image and serves with plugin (CoreDNS's
// coredns_plugin_enabled names the plugins of each server block; deploy/'s and kubeadm's have
// one, ".:53").
func servedBy(t *testing.T, pods []api.Pod, plugin, image string) {
	t.Helper()
	if len(pods) == 0 {
		t.Errorf("no DNS pods to serve with %s", plugin)
	}
	enabled := regexp.MustCompile(`(?m)^coredns_plugin_enabled\{name="` + plugin + `",server="dns://:53",[^}]*\} 1$`)
	for _, p := range pods {
		if p.Spec.Containers[0].Image != image {
			t.Errorf("%s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, image)
		}
		b := metricsOf(t, p)
		if !enabled.Match(b) {
			t.Errorf("%s does not serve with %s: %s", p.Name, plugin, regexp.MustCompile(`(?m)^coredns_plugin_enabled.*$`).FindAll(b, -1))
		}
	}
}

// migrationLoop is `dnsq -t loop` running in a pod; closing its stdin ends it.
type migrationLoop struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout bytes.Buffer
	stderr bytes.Buffer
}

// startLoop starts pod ns/pod (the dnsq image) asking every case (TYPE:NAME=WANT, dnsq's loop)
// without pause; flags are dnsq's (-client).
func (n *node) startLoop(t *testing.T, ns, pod string, cases []string, flags ...string) *migrationLoop {
	t.Helper()
	l := &migrationLoop{}
	args := append([]string{"--kubeconfig", n.kubeconfig, "-n", ns, "exec", "-i", pod, "--", "/dnsq"}, flags...)
	args = append(append(args, "-t", "loop"), cases...)
	l.cmd = exec.Command(n.kubectl, args...)
	l.cmd.Stdout, l.cmd.Stderr = &l.stdout, &l.stderr
	var err error
	if l.stdin, err = l.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The loop has begun once it asks: a second is many queries.
	time.Sleep(time.Second)
	return l
}

// loopSummary is what `dnsq -t loop` prints when it ends (hack/tools/cmd/dnsq/loop.go).
type loopSummary struct {
	Queries, UDP, TCP, Failed, Retried int
	Failures, Retries                  []string
	P50                                float64   `json:"p50_ms"`
	P99                                float64   `json:"p99_ms"`
	Max                                float64   `json:"max_ms"`
	Took                               []float64 `json:"took_ms"`
}

// stop ends the loop and returns its summary.
func (l *migrationLoop) stop(t *testing.T) loopSummary {
	t.Helper()
	l.stdin.Close()
	if err := l.cmd.Wait(); err != nil {
		t.Fatalf("dnsq -t loop: %v\n%s%s", err, l.stdout.String(), l.stderr.String())
	}
	var s loopSummary
	if err := json.Unmarshal(l.stdout.Bytes(), &s); err != nil {
		t.Fatalf("dnsq -t loop's summary: %v\n%s", err, l.stdout.String())
	}
	return s
}

// check ends the loop and fails the test on a single failed query, after reporting the count,
// the failures and the latency percentiles.
func (l *migrationLoop) check(t *testing.T, what string) {
	t.Helper()
	s := l.stop(t)
	report(t, "%s: %d queries (%d UDP, %d TCP), %d failed, %d answered only after the resolver's retry; latency p50 %.1f ms, p99 %.1f ms, max %.1f ms%s",
		what, s.Queries, s.UDP, s.TCP, s.Failed, s.Retried, s.P50, s.P99, s.Max, strings.Join(append([]string{""}, s.Retries...), "\n  retried: "))
	if s.Failed > 0 || s.UDP == 0 || s.TCP == 0 {
		t.Errorf("through %s, %d of %d queries failed (UDP %d, TCP %d):\n%s", what, s.Failed, s.Queries, s.UDP, s.TCP, strings.Join(s.Failures, "\n"))
	}
}
