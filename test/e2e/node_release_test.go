package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
)

// nodeEnv is what hack/node.sh start wrote in DIR/env: KEY=VALUE lines (printf %q, which leaves
// our paths and addresses as they are).
func (n *node) nodeEnv(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && k == key {
			return v
		}
	}
	t.Fatalf("%s/env has no %s", n.dir, key)
	return ""
}

// releaseFile is a file of the release the node runs (make release; hack/node.sh's RELEASE).
func (n *node) releaseFile(t *testing.T, name string) string {
	return filepath.Join(n.nodeEnv(t, "RELEASE"), name)
}

// metricsOf is what a CoreDNS pod's prometheus (deploy/: :9153) exports, read from the node.
func metricsOf(t *testing.T, p api.Pod) []byte {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(p.Status.PodIP, metricsPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testReleasePulledByDigest: kubetree's pods run the release's image, which the node's containerd
// pulled from the node's registry by the digest the release's manifests name (nothing imported),
// and each says the release's version in coredns_kubetree_build_info.
func testReleasePulledByDigest(t *testing.T, n *node) {
	ref := n.nodeEnv(t, "KUBETREE_IMAGE")
	repo, digest, ok := strings.Cut(ref, "@")
	if !ok || !strings.HasPrefix(repo, n.nodeEnv(t, "REGISTRY")+"/") {
		t.Fatalf("the release names %q, not an image of the node's registry by digest", ref)
	}
	raw, err := os.ReadFile(n.releaseFile(t, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))

	pods := n.kubetreePods(t)
	if len(pods) == 0 {
		t.Fatal("no kubetree pods")
	}
	buildInfo := regexp.MustCompile(`(?m)^coredns_kubetree_build_info\{[^}]*\bversion="([^"]*)"[^}]*\} 1$`)
	for _, p := range pods {
		if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != ref {
			t.Errorf("%s runs %v, want %s", p.Name, p.Spec.Containers, ref)
		}
		if len(p.Status.ContainerStatuses) != 1 || !strings.HasSuffix(p.Status.ContainerStatuses[0].ImageID, "@"+digest) {
			t.Errorf("%s: the runtime reports image %+v, want the index %s", p.Name, p.Status.ContainerStatuses, digest)
		}
		if m := buildInfo.FindSubmatch(metricsOf(t, p)); m == nil || string(m[1]) != version {
			t.Errorf("%s: coredns_kubetree_build_info %q, want version %q", p.Name, m, version)
		}
	}

	// What the node's containerd holds: the image by digest, pulled; no kubetree image imported.
	ctr := exec.Command("ctr", "-a", n.nodeEnv(t, "CONTAINERD_ADDRESS"), "-n", "k8s.io", "images", "ls")
	out, err := ctr.CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, out)
	}
	var kubetree []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "kubetree/coredns") {
			kubetree = append(kubetree, l)
			if f := strings.Fields(l); !strings.HasPrefix(f[0], repo) {
				t.Errorf("containerd holds %s, which the registry did not serve", f[0])
			}
		}
	}
	if len(kubetree) == 0 || !strings.Contains(string(out), ref) {
		t.Errorf("containerd does not hold %s:\n%s", ref, out)
	}
	report(t, "kubetree %s from the node's registry, pulled by digest: %s; `ctr images ls` for it:\n%s", version, ref, strings.Join(kubetree, "\n"))
}
