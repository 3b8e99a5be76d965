package ops

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// cacheDaemonSet is what TestNodeLocalManifests reads of deploy/nodelocal/'s DaemonSet.
type cacheDaemonSet struct {
	Spec struct {
		Template struct {
			Spec struct {
				HostNetwork bool   `json:"hostNetwork"`
				DNSPolicy   string `json:"dnsPolicy"`
				Containers  []struct {
					Image         string `json:"image"`
					LivenessProbe struct {
						HTTPGet struct {
							Host string `json:"host"`
						} `json:"httpGet"`
					} `json:"livenessProbe"`
				} `json:"containers"`
				Volumes []struct {
					ConfigMap struct {
						Name string `json:"name"`
					} `json:"configMap"`
				} `json:"volumes"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// serverBlocks splits a Corefile into its server blocks: the block's first line (its zone) ->
// the trimmed lines inside it.
func serverBlocks(corefile string) map[string][]string {
	blocks := map[string][]string{}
	var zone string
	depth := 0
	for _, line := range strings.Split(corefile, "\n") {
		l := strings.TrimSpace(line)
		if l == "" {
			continue
		}
		if depth == 0 {
			zone = strings.TrimSpace(strings.TrimSuffix(l, "{"))
		} else if l != "}" {
			blocks[zone] = append(blocks[zone], l)
		}
		depth += strings.Count(l, "{") - strings.Count(l, "}")
	}
	return blocks
}

// TestNodeLocalManifests checks deploy/nodelocal/ against the topology deploy/README.md describes
// (TestNodeLocal runs it on a real node): the cache listens only on its link-local address, sends
// the cluster's zones to kubetree through kube-dns-upstream over TCP with the client's address,
// uncached, and the rest to the node's resolver, cached; kubetree's Corefile behind it is deploy/configmap.yaml's with
// the three lines the README shows.
func TestNodeLocalManifests(t *testing.T) {
	dir := filepath.Join(root, "deploy/nodelocal")
	cm := only(t, readObjects(t, filepath.Join(dir, "configmap.yaml")), "ConfigMap")
	cacheObjects := readObjects(t, filepath.Join(dir, "node-local-dns.yaml"))
	upstream := only(t, cacheObjects, "Service")
	behind := only(t, readObjects(t, filepath.Join(dir, "kubetree-configmap.yaml")), "ConfigMap")
	base := only(t, readObjects(t, filepath.Join(root, "deploy/configmap.yaml")), "ConfigMap")
	deployment := only(t, readObjects(t, filepath.Join(root, "deploy/deployment.yaml")), "Deployment")

	var ds cacheDaemonSet
	raw, err := os.ReadFile(filepath.Join(dir, "node-local-dns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1)
	if len(docs) != 2 || len(cacheObjects) != 2 || cacheObjects[0].Kind != "Service" || cacheObjects[1].Kind != "DaemonSet" {
		t.Fatalf("node-local-dns.yaml: want the Service, then the DaemonSet (its pods read the Service's address from their environment): %d objects", len(cacheObjects))
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &ds); err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("the DaemonSet has %d containers, want 1", len(pod.Containers))
	}
	localDNS := pod.Containers[0].LivenessProbe.HTTPGet.Host
	upstreamVar := "{$" + strings.ToUpper(strings.ReplaceAll(upstream.Metadata.Name, "-", "_")) + "_SERVICE_HOST}"

	t.Run("the cache runs in the node's network, on deploy/'s image", func(t *testing.T) {
		if !pod.HostNetwork || pod.DNSPolicy != "Default" {
			t.Errorf("hostNetwork %v, dnsPolicy %q: want the node's network and the node's resolver", pod.HostNetwork, pod.DNSPolicy)
		}
		if want := deployment.Spec.Template.Spec.Containers[0].Image; pod.Containers[0].Image != want {
			t.Errorf("image %q, want deploy/deployment.yaml's %q", pod.Containers[0].Image, want)
		}
		if len(pod.Volumes) != 1 || pod.Volumes[0].ConfigMap.Name != cm.Metadata.Name {
			t.Errorf("volumes %+v, want the ConfigMap %s", pod.Volumes, cm.Metadata.Name)
		}
		if !strings.HasPrefix(localDNS, "169.254.") {
			t.Errorf("the liveness probe asks %q, want the cache's link-local address", localDNS)
		}
	})

	t.Run("cluster zones to kubetree over TCP with the client's address and no cache, the rest to the node's resolver", func(t *testing.T) {
		blocks := serverBlocks(cm.Data["Corefile"])
		var zones []string
		for z := range blocks {
			zones = append(zones, z)
		}
		slices.Sort(zones)
		if want := []string{".:53", "cluster.local:53", "in-addr.arpa:53", "ip6.arpa:53"}; !slices.Equal(zones, want) {
			t.Fatalf("server blocks %v, want %v", zones, want)
		}
		for zone, lines := range blocks {
			has := func(l string) bool { return slices.Contains(lines, l) }
			cached := slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "cache") })
			if !has("bind " + localDNS) {
				t.Errorf("%s: want bind %s: %q", zone, localDNS, lines)
			}
			if zone == ".:53" {
				if !has("forward . /etc/resolv.conf") || !cached || slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "rewrite") }) {
					t.Errorf("%s: want forward . /etc/resolv.conf, a cache, and no client address to the outside: %q", zone, lines)
				}
				continue
			}
			if !has("forward . "+upstreamVar+" {") || !has("force_tcp") || !has("rewrite edns0 subnet set 32 128") {
				t.Errorf("%s: want forward . %s { force_tcp } and rewrite edns0 subnet set 32 128: %q", zone, upstreamVar, lines)
			}
			// kubetree answers each pod as itself (autopath; isolate; topology), and a cache keys
			// by name and type: it would hand one pod's answer to another (docs/isolation.md).
			if cached {
				t.Errorf("%s: a cache in a block of the cluster's zones hands one pod's answer to the next: %q", zone, lines)
			}
		}
		if got, want := upstream.Spec.Selector["k8s-app"], deployment.Spec.Template.Metadata.Labels["k8s-app"]; got != want || len(upstream.Spec.Selector) != 1 {
			t.Errorf("%s selects %v, want kubetree's pods (k8s-app: %s)", upstream.Metadata.Name, upstream.Spec.Selector, want)
		}
	})

	// What deploy/README.md says the kubetree side adds.
	added := []string{"autopath @kubetree", "pods verified", "client_subnet_from "}
	t.Run("kubetree's Corefile behind the cache is deploy/configmap.yaml's and three lines", func(t *testing.T) {
		var rest []string
		found := map[string]bool{}
		for _, l := range strings.Split(behind.Data["Corefile"], "\n") {
			switch trimmed := strings.TrimSpace(l); {
			case trimmed == added[0], strings.HasPrefix(trimmed, added[2]):
				found[trimmed] = true
			case trimmed == added[1]:
				found[trimmed] = true
				rest = append(rest, strings.Replace(l, "pods verified", "pods insecure", 1))
			default:
				rest = append(rest, l)
			}
		}
		if len(found) != 3 {
			t.Errorf("kubetree-configmap.yaml has %v of %q", found, added)
		}
		if got, want := strings.Join(rest, "\n"), base.Data["Corefile"]; got != want {
			t.Errorf("without those lines, kubetree-configmap.yaml's Corefile is\n%s\nwant deploy/configmap.yaml's\n%s", got, want)
		}
		if behind.Metadata.Name != base.Metadata.Name || behind.Metadata.Namespace != base.Metadata.Namespace {
			t.Errorf("kubetree-configmap.yaml is %s/%s, want deploy/configmap.yaml's %s/%s (it replaces it)",
				behind.Metadata.Namespace, behind.Metadata.Name, base.Metadata.Namespace, base.Metadata.Name)
		}
	})

	t.Run("deploy/README.md shows the lines on both sides", func(t *testing.T) {
		readme, err := os.ReadFile(filepath.Join(root, "deploy/README.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range append(added, "bind "+localDNS, "forward . "+upstreamVar+" {", "force_tcp", "rewrite edns0 subnet set 32 128") {
			if !strings.Contains(string(readme), l) {
				t.Errorf("deploy/README.md does not show %q", l)
			}
		}
	})
}
