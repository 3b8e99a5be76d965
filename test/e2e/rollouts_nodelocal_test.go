package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeLocalAddress is NodeLocal DNSCache's address on every node (deploy/nodelocal/).
const nodeLocalAddress = "169.254.20.10"

// nodeLocalClient is the client pod of node on NodeLocal DNSCache: the resolver of the pods of a
// cluster whose kubelets' clusterDNS is the cache's address.
func nodeLocalClient(node string) string { return "dnsq-local-" + node }

// startNodeLocal runs NodeLocal DNSCache as deploy/nodelocal/ ships it on every node (its ConfigMap,
// the kube-dns-upstream Service and the DaemonSet, with image as the cache), the cache's address
// and NOTRACK rules on every node (hack/kubeadm-cluster.sh nodelocal), and a client pod on each
// node that asks the cache: dnsPolicy None with the kubelet's search path and the cache's address,
// as a kubelet whose clusterDNS is 169.254.20.10 gives every pod.
func (b *rolloutBench) startNodeLocal(t *testing.T, image string) {
	t.Helper()
	b.clusterScript(t, "nodelocal")
	dir := t.TempDir()
	for _, f := range []string{"configmap.yaml", "node-local-dns.yaml"} {
		y, err := os.ReadFile(filepath.Join(env.root, "deploy/nodelocal", f))
		if err != nil {
			t.Fatal(err)
		}
		y = bytes.ReplaceAll(y, []byte("image: kubetree/coredns:latest"), []byte("image: "+image))
		if err := os.WriteFile(filepath.Join(dir, f), y, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b.kubectl(t, "apply", "-f", dir)
	b.kubectl(t, "-n", "kube-system", "rollout", "status", "daemonset/node-local-dns", "--timeout=5m")
	ndots := "5"
	for _, n := range b.clients {
		pod := b.c.dnsqPod(nodeLocalClient(n), n)
		pod.Spec.DNSPolicy = api.DNSNone
		pod.Spec.DNSConfig = &api.PodDNSConfig{
			Nameservers: []string{nodeLocalAddress},
			Searches:    []string{"clients.svc.cluster.local", "svc.cluster.local", "cluster.local"},
			Options:     []api.PodDNSConfigOption{{Name: "ndots", Value: &ndots}},
		}
		if _, err := b.c.client.CoreV1().Pods("clients").Create(bg, pod, meta.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range b.clients {
		b.c.waitReady(t, "clients", nodeLocalClient(n))
	}
}
