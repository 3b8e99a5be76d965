package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// The resolvers pods really use, each asked through its pod's own /etc/resolv.conf (kubelet's,
// or the same with the in-tree plugin's address), from the image hack/conformance.mk builds.
var podResolvers = []struct {
	name string
	ask  func(name string) []string // the command that resolves name, for A and AAAA
}{
	{"glibc getaddrinfo", func(name string) []string { return []string{"/usr/local/bin/gai-glibc", name} }},
	{"musl getaddrinfo", func(name string) []string { return []string{"/usr/local/bin/gai-musl", name} }},
	{"Go (pure)", func(name string) []string { return []string{"/usr/local/bin/dnsq", name} }},
	{"dig +search", func(name string) []string {
		// A and AAAA, each through the search list; dig retries a truncated answer over TCP.
		return []string{"/bin/sh", "-c", `for t in A AAAA; do dig +search +noall +comments +answer "$1" $t; done`, "sh", name}
	}},
}

// resolverCase is a name a pod in namespace baz asks, and what it must resolve to: addresses, or
// none (the name does not exist).
type resolverCase struct {
	name, asked string
	want        []string
}

// resolverTable asks every resolver of podResolvers every case, from a pod whose DNS is kubetree
// and from one whose DNS is the in-tree plugin, writes the table to _out/resolvers.md (it goes in
// hack/CONFORMANCE.md), and fails where a resolver's result is wrong or differs between the two.
func (n *node) resolverTable(t *testing.T, web, foo *api.Service) {
	v6 := k8stest.HeadlessService("baz", "v6only", k8stest.TCP("http", 80))
	n.service(t, v6)
	n.slice(t, k8stest.Slice("baz", "v6only", "v6only-1", discovery.AddressTypeIPv6,
		k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)), k8stest.Endpoint{Addrs: []string{"fd00:10::1"}}))
	n.service(t, k8stest.HeadlessService("baz", "big", k8stest.TCP("http", 80)))
	var big []k8stest.Endpoint
	var bigAddrs []string
	for i := range 100 {
		addr := fmt.Sprintf("10.100.0.%d", i+1)
		big = append(big, k8stest.Endpoint{Addrs: []string{addr}})
		bigAddrs = append(bigAddrs, addr)
	}
	n.slice(t, k8stest.Slice("baz", "big", "big-1", discovery.AddressTypeIPv4,
		k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)), big...))

	cases := []resolverCase{
		{"short name (search path)", "web", []string{web.Spec.ClusterIP}},
		{"svc.ns", "foo.bar", []string{foo.Spec.ClusterIP}},
		{"fully qualified", "web.baz.svc.cluster.local.", []string{web.Spec.ClusterIP}},
		{"no such name (NXDOMAIN through every search domain)", "nope", nil},
		{"AAAA-only service", "v6only", []string{"fd00:10::1"}},
		{"ExternalName", "ext", []string{"198.51.100.7"}},
		{"headless, 100 addresses (over 512 bytes: TC, then TCP)", "big", bigAddrs},
	}

	pods := map[string]string{"kubetree": "resolvers", "kubernetes": "resolvers-intree"}
	for plugin, name := range pods {
		pod := resolversPod(name)
		if plugin == "kubernetes" {
			pod.Spec.DNSPolicy, pod.Spec.DNSConfig = api.DNSNone, inTreeDNSConfig(n.clientConf, n.inTreeIP)
		}
		if _, err := n.client.CoreV1().Pods("baz").Create(bg, pod, meta.CreateOptions{}); err != nil {
			t.Fatalf("%v (is _out/images/resolvers.tar built? make node-images)", err)
		}
	}
	for _, name := range pods {
		n.waitReady(t, "baz", name)
	}
	// Both plugins know the fixtures before the table starts: an early miss would be cached.
	for plugin, pod := range pods {
		eventually(t, plugin+" serves the fixtures", 30*time.Second, func() bool {
			out, err := n.kubectlRun("-n", "baz", "exec", pod, "--", "/usr/local/bin/dnsq", "big")
			return err == nil && len(strings.Fields(out)) == 100
		})
	}

	var table strings.Builder
	fmt.Fprintf(&table, "| resolver | %s |\n|---|%s\n", strings.Join(caseNames(cases), " | "), strings.Repeat("---|", len(cases)))
	for _, r := range podResolvers {
		fmt.Fprintf(&table, "| %s |", r.name)
		for _, c := range cases {
			var got [2]resolved
			for i, plugin := range []string{"kubetree", "kubernetes"} {
				out, err := n.kubectlRun(append([]string{"-n", "baz", "exec", pods[plugin], "--"}, r.ask(c.asked)...)...)
				got[i] = parseResolved(r.name, out, err)
			}
			cell := got[0].String()
			if got[1].String() != cell {
				cell += " (in-tree: " + got[1].String() + ")"
				t.Errorf("%s, %s: kubetree %s, the in-tree plugin %s", r.name, c.name, got[0], got[1])
			}
			for i, plugin := range []string{"kubetree", "kubernetes"} {
				if why := got[i].wrong(r.name, c); why != "" {
					t.Errorf("%s, %s, %s: %s", r.name, c.name, plugin, why)
				}
			}
			fmt.Fprintf(&table, " %s |", cell)
		}
		table.WriteString("\n")
	}
	path := filepath.Join(env.root, "_out", "resolvers.md")
	if err := os.WriteFile(path, []byte(table.String()), 0o644); err != nil {
		t.Error(err)
	}
	report(t, "resolvers × cases, kubetree and the in-tree plugin (%s):\n%s", path, table.String())
}

func caseNames(cases []resolverCase) []string {
	var out []string
	for _, c := range cases {
		out = append(out, c.name)
	}
	return out
}

// resolved is what one resolver made of one name: its addresses, or why it has none.
type resolved struct {
	addrs    []string // sorted
	notFound string   // the resolver's word for "no such name" (EAI_NONAME, NXDOMAIN, ...)
	failure  string   // anything else: an error the resolver should not have met
}

// parseResolved reads a resolver's output.
func parseResolved(resolver, out string, err error) resolved {
	var r resolved
	if resolver == "dig +search" {
		statuses := map[string]bool{}
		for line := range strings.Lines(out) {
			if _, status, ok := strings.Cut(line, "status: "); ok {
				status, _, _ = strings.Cut(status, ",")
				statuses[status] = true
			}
			if f := strings.Fields(line); len(f) == 5 && (f[3] == "A" || f[3] == "AAAA") && !strings.HasPrefix(line, ";") {
				r.addrs = append(r.addrs, f[4])
			}
		}
		switch {
		case err != nil:
			r.failure = oneLine(out)
		case len(r.addrs) == 0 && statuses["NXDOMAIN"] && len(statuses) == 1:
			r.notFound = "NXDOMAIN"
		case len(r.addrs) == 0:
			r.failure = fmt.Sprint("no address, status ", statuses)
		}
		slices.Sort(r.addrs)
		return r
	}
	lines := strings.Fields(out)
	if err != nil {
		switch {
		case slices.Contains(lines, "EAI_NONAME"): // gai's stdout; its stderr says it in words
			r.notFound = "EAI_NONAME"
		case strings.Contains(out, "no such host"):
			r.notFound = "no such host"
		default:
			r.failure = oneLine(out)
		}
		return r
	}
	for _, l := range lines {
		if _, err := netip.ParseAddr(l); err == nil {
			r.addrs = append(r.addrs, l)
		}
	}
	slices.Sort(r.addrs)
	return r
}

// String is the table's cell: the addresses (a count past four), or the resolver's words.
func (r resolved) String() string {
	switch {
	case r.failure != "":
		return "failed: " + r.failure
	case r.notFound != "":
		return "not found (" + r.notFound + ")"
	case len(r.addrs) > 4:
		return fmt.Sprintf("%d addresses", len(r.addrs))
	}
	return strings.Join(r.addrs, " ")
}

// wrong says how r is not what c wants ("" when it is). musl before 1.2.4 does not ask again over
// TCP when an answer is truncated: it keeps the addresses that fitted, and says so in the table.
func (r resolved) wrong(resolver string, c resolverCase) string {
	switch {
	case r.failure != "":
		return r.String()
	case c.want == nil && r.notFound == "":
		return fmt.Sprintf("resolved %s, want no such name", r)
	case c.want == nil:
		return ""
	case resolver == "musl getaddrinfo" && len(c.want) > 20:
		if len(r.addrs) == 0 || len(r.addrs) > len(c.want) || !isSubset(r.addrs, c.want) {
			return fmt.Sprintf("%s, want some of the %d addresses", r, len(c.want))
		}
		return ""
	case !slices.Equal(r.addrs, sortedCopy(c.want)):
		return fmt.Sprintf("%s, want %v", r, c.want)
	}
	return ""
}

func isSubset(sub, of []string) bool {
	for _, s := range sub {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// resolversPod runs the resolvers image (restricted Pod Security), idle until asked by exec.
func resolversPod(name string) *api.Pod {
	p := dnsqPod(name)
	c := &p.Spec.Containers[0]
	c.Name, c.Image, c.Args = "resolvers", "kubetree/resolvers:1", nil
	return p
}

// slice creates an EndpointSlice on the node's API server.
func (n *node) slice(t *testing.T, s *discovery.EndpointSlice) {
	t.Helper()
	if _, err := n.client.DiscoveryV1().EndpointSlices(s.Namespace).Create(bg, s, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
