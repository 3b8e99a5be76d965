package kubetree_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAutoPath: the search path autopath tries for a query is the client pod's, as the in-tree
// plugin builds it, and there is none when the client is not one known pod.
func TestAutoPath(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local other.local 10.in-addr.arpa {\n\tpods verified\n}",
		k8stest.Namespace("baz"), k8stest.Pod("baz", "client", "10.244.0.5"), k8stest.Pod("baz", "twin-a", "10.244.0.6"), k8stest.Pod("baz", "twin-b", "10.244.0.6"))
	k := c.Plugin
	want := []string{"baz.svc.cluster.local.", "svc.cluster.local.", "cluster.local.", ""}
	if got := k.AutoPath(plugintest.From("10.244.0.5", "foo.bar.baz.svc.cluster.local.", nil)); !slices.Equal(got, want) {
		t.Errorf("search path %q, want %q", got, want)
	}
	wantOther := []string{"baz.svc.other.local.", "svc.other.local.", "other.local.", ""}
	if got := k.AutoPath(plugintest.From("10.244.0.5", "foo.baz.svc.other.local.", nil)); !slices.Equal(got, wantOther) {
		t.Errorf("search path in the second zone %q, want %q", got, wantOther)
	}
	for _, tc := range []struct{ rule, source, name string }{
		{"a client that is no pod", "10.244.9.9", "foo.baz.svc.cluster.local."},
		{"a client whose address two pods claim", "10.244.0.6", "foo.baz.svc.cluster.local."},
		{"a name outside our zones", "10.244.0.5", "example.org."},
		{"a reverse zone", "10.244.0.5", "5.0.244.10.in-addr.arpa."},
	} {
		if got := k.AutoPath(plugintest.From(tc.source, tc.name, nil)); got != nil {
			t.Errorf("%s: search path %q, want none", tc.rule, got)
		}
	}
	// The search path is made once per namespace: AutoPath allocates nothing of its own (the test
	// writer allocates the remote address it returns; a server's does not).
	state := plugintest.From("10.244.0.5", "foo.baz.svc.cluster.local.", nil)
	writer := testing.AllocsPerRun(100, func() { state.W.RemoteAddr() })
	if n := testing.AllocsPerRun(100, func() { k.AutoPath(state) }); n > writer {
		t.Errorf("AutoPath allocates %v times, the writer %v", n, writer)
	}
}

// TestAutoPathWithHostSearch: the host's search path comes after the cluster's.
func TestAutoPathWithHostSearch(t *testing.T) {
	k, a := plugintest.WiredWithHostSearch(t, "kubetree cluster.local {\n\tpods verified\n}", []string{"corp.example."})
	client, _ := k.Watch.PodStore.SlimPod(k8stest.Pod("baz", "client", "10.244.0.5"))
	a.ApplyPod(nil, client.(*object.StoredPod))
	want := []string{"baz.svc.cluster.local.", "svc.cluster.local.", "cluster.local.", "corp.example.", ""}
	if got := k.AutoPath(plugintest.From("10.244.0.5", "foo.baz.svc.cluster.local.", nil)); !slices.Equal(got, want) {
		t.Errorf("search path %q, want %q", got, want)
	}
}

// TestClientSubnet: behind a node-local cache every query comes from the cache's address; the
// client's own is in the EDNS0 client-subnet option, believed only from a source the Corefile
// trusts, and only when it names one address.
func TestClientSubnet(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from 169.254.20.10/32 fd00:cafe::/64\n}",
		k8stest.Namespace("baz"), k8stest.Namespace("prod"), k8stest.Pod("baz", "client", "10.244.0.5", "fd00::5"), k8stest.Pod("prod", "cache", "10.244.0.99"))
	k := c.Plugin
	search := func(source string, subnet *dns.EDNS0_SUBNET) string {
		p := k.AutoPath(plugintest.From(source, "foo.baz.svc.cluster.local.", subnet))
		if p == nil {
			return "none"
		}
		return p[0]
	}
	for _, tc := range []struct {
		rule   string
		source string
		subnet *dns.EDNS0_SUBNET
		want   string
	}{
		{"trusted source, a whole IPv4 address", "169.254.20.10", plugintest.ECS("10.244.0.5", 32), "baz.svc.cluster.local."},
		{"trusted IPv6 source, a whole IPv6 address", "fd00:cafe::1", plugintest.ECS("fd00::5", 128), "baz.svc.cluster.local."},
		{"trusted source, a network is no client", "169.254.20.10", plugintest.ECS("10.244.0.0", 24), "none"},
		{"trusted source, no option: the source itself", "169.254.20.10", nil, "none"},
		{"untrusted source: the option is ignored", "10.244.0.99", plugintest.ECS("10.244.0.5", 32), "prod.svc.cluster.local."},
		{"untrusted unknown source", "10.9.9.9", plugintest.ECS("10.244.0.5", 32), "none"},
		{"no option", "10.244.0.5", nil, "baz.svc.cluster.local."},
	} {
		if got := search(tc.source, tc.subnet); got != tc.want {
			t.Errorf("%s: first search path %s, want %s", tc.rule, got, tc.want)
		}
	}
}

// TestMetadata: every key the in-tree plugin publishes, under kubetree/.
func TestMetadata(t *testing.T) {
	client := k8stest.Pod("baz", "client", "10.244.0.5")
	client.ObjectMeta = meta.ObjectMeta{Namespace: "baz", Name: "client", Labels: map[string]string{"app": "shop", "tier": "front"}}
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n\tpods verified\n}", k8stest.Namespace("baz"), client)
	values := func(state request.Request) map[string]string {
		ctx := metadata.ContextWithMetadata(context.Background())
		ctx = c.Metadata(ctx, state)
		out := map[string]string{}
		for _, label := range metadata.Labels(ctx) {
			out[label] = metadata.ValueFunc(ctx, label)()
		}
		return out
	}
	for _, tc := range []struct {
		rule, source, name string
		want               map[string]string
	}{
		{"a pod asks for an SRV name", "10.244.0.5", "_http._tcp.web.prod.svc.cluster.local.", map[string]string{
			"kubetree/client-namespace": "baz", "kubetree/client-pod-name": "client",
			"kubetree/client-label/app": "shop", "kubetree/client-label/tier": "front",
			"kubetree/port-name": "http", "kubetree/protocol": "tcp", "kubetree/endpoint": "",
			"kubetree/service": "web", "kubetree/namespace": "prod", "kubetree/kind": "svc"}},
		{"an unknown client asks for an endpoint", "10.9.9.9", "db-0.DB.prod.svc.cluster.local.", map[string]string{
			"kubetree/port-name": "", "kubetree/protocol": "", "kubetree/endpoint": "db-0",
			"kubetree/service": "db", "kubetree/namespace": "prod", "kubetree/kind": "svc"}},
		{"a pod name", "10.9.9.9", "10-244-0-5.baz.pod.cluster.local.", map[string]string{
			"kubetree/port-name": "", "kubetree/protocol": "", "kubetree/endpoint": "",
			"kubetree/service": "10-244-0-5", "kubetree/namespace": "baz", "kubetree/kind": "pod"}},
		{"not a cluster name", "10.9.9.9", "x.y.cluster.local.", map[string]string{"kubetree/parse-error": "invalid query name"}},
		{"outside our zones, from a pod", "10.244.0.5", "example.org.", map[string]string{
			"kubetree/client-namespace": "baz", "kubetree/client-pod-name": "client",
			"kubetree/client-label/app": "shop", "kubetree/client-label/tier": "front"}},
	} {
		got := values(plugintest.From(tc.source, tc.name, nil))
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d keys %v, want %d %v", tc.rule, len(got), got, len(tc.want), tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", tc.rule, k, got[k], v)
			}
		}
	}
}

// TestSearchPathsForgetGoneNamespaces: autopath's search paths, kept per namespace, are swept of
// the namespaces that are gone. 2,000 namespaces, each created, asked from by a pod, and deleted in
// turn, leave at most kubetree.MinSearchesSweep namespaces' paths at any time (before the sweep: all 2,000),
// and the paths of a namespace that stays are kept, not made again.
func TestSearchPathsForgetGoneNamespaces(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local {\n\tpods verified\n}")
	pod := func(ns, addr string) *object.StoredPod {
		p, err := k.Watch.PodStore.SlimPod(k8stest.Pod(ns, "client", addr))
		if err != nil {
			t.Fatal(err)
		}
		return p.(*object.StoredPod)
	}
	held := func() int { return kubetree.SearchPathsHeld(k.Kubetree) }
	a.ApplyNamespace("stays", true)
	a.ApplyPod(nil, pod("stays", "10.244.0.5"))
	stays := k.AutoPath(plugintest.From("10.244.0.5", "web.stays.svc.cluster.local.", nil))

	const churn = 2000
	most := 0
	for i := range churn {
		ns := fmt.Sprintf("churn-%d", i)
		a.ApplyNamespace(ns, true)
		p := pod(ns, "10.244.1.1")
		a.ApplyPod(nil, p)
		if got := k.AutoPath(plugintest.From("10.244.1.1", "web."+ns+".svc.cluster.local.", nil)); len(got) == 0 || got[0] != ns+".svc.cluster.local." {
			t.Fatalf("%s: search path %q", ns, got)
		}
		a.ApplyPod(p, nil)
		a.ApplyNamespace(ns, false)
		most = max(most, held())
	}
	if most > kubetree.MinSearchesSweep {
		t.Errorf("after %d namespaces came and went, the search paths of %d namespaces were held at once, want at most %d", churn, most, kubetree.MinSearchesSweep)
	}
	if got := k.AutoPath(plugintest.From("10.244.0.5", "web.stays.svc.cluster.local.", nil)); !slices.Equal(got, stays) || &got[0] != &stays[0] {
		t.Errorf("the search path of a namespace that stays was swept or made again: %q", got)
	}
}
