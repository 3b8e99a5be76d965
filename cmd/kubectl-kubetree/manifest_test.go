package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest (krew.googlecontainertools.github.com/v1alpha2)
// that installing the plugin depends on.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest: plugins/kubetree.yaml, filled in as hack/kubectl-release.sh fills it in, is a
// krew Plugin named kubetree (so `kubectl kubetree` runs bin kubectl-kubetree) whose platforms are
// those the script builds, each pointing at the archive the script makes for it, under the
// release's tag, with that archive's sha256.
func TestKrewManifest(t *testing.T) {
	template, err := os.ReadFile("../../plugins/kubetree.yaml")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../hack/kubectl-release.sh")
	if err != nil {
		t.Fatal(err)
	}
	platforms := regexp.MustCompile(`KUBECTL_RELEASE_PLATFORMS:-([^}]*)}`).FindSubmatch(script)
	if platforms == nil {
		t.Fatal("hack/kubectl-release.sh: no default KUBECTL_RELEASE_PLATFORMS")
	}
	if !strings.Contains(string(script), `kubectl-kubetree_${VERSION}_${os}_${arch}.tar.gz`) ||
		!strings.Contains(string(script), "kubectl-kubetree LICENSE NOTICE") {
		t.Fatal("hack/kubectl-release.sh no longer writes kubectl-kubetree_VERSION_OS_ARCH.tar.gz of kubectl-kubetree, LICENSE and NOTICE: update this test and the manifest")
	}

	const tag = "v1.2.3"
	rendered := strings.ReplaceAll(string(template), "{{ .TagName }}", tag)
	sums := map[string]string{}
	for i, p := range strings.Fields(string(platforms[1])) {
		sums[p] = fmt.Sprintf("%064x", i+1) // the archive's sha256, as the script computes it
		rendered = strings.ReplaceAll(rendered, "{{ sha256 "+p+" }}", sums[p])
	}
	if strings.Contains(rendered, "{{") {
		t.Fatalf("placeholders left after the script's substitutions:\n%s", rendered)
	}
	var m krewPlugin
	if err := yaml.Unmarshal([]byte(rendered), &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" {
		t.Errorf("apiVersion %q kind %q: not a krew Plugin", m.APIVersion, m.Kind)
	}
	if m.Metadata.Name != "kubetree" || m.Spec.Version != tag || m.Spec.ShortDescription == "" || m.Spec.Homepage == "" {
		t.Errorf("metadata.name %q, spec.version %q: want kubetree and the tag, with a short description and a homepage", m.Metadata.Name, m.Spec.Version)
	}
	var seen []string
	for _, p := range m.Spec.Platforms {
		os, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		platform := os + "/" + arch
		seen = append(seen, platform)
		wantURI := "https://github.com/kubetree/kubetree/releases/download/" + tag + "/kubectl-kubetree_" + tag + "_" + os + "_" + arch + ".tar.gz"
		if p.URI != wantURI {
			t.Errorf("%s: uri %s, want the release's archive %s", platform, p.URI, wantURI)
		}
		if p.Sha256 != sums[platform] {
			t.Errorf("%s: sha256 %q, want the sha256 of its archive", platform, p.Sha256)
		}
		if p.Bin != "kubectl-kubetree" {
			t.Errorf("%s: bin %q, want kubectl-kubetree", platform, p.Bin)
		}
		var from []string
		for _, f := range p.Files {
			from = append(from, f.From)
		}
		if slices.Sort(from); !slices.Equal(from, []string{"LICENSE", "NOTICE", "kubectl-kubetree"}) {
			t.Errorf("%s: files %v, want the archive's kubectl-kubetree, LICENSE and NOTICE", platform, from)
		}
	}
	want := strings.Fields(string(platforms[1]))
	slices.Sort(seen)
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("platforms %v, want those hack/kubectl-release.sh builds: %v", seen, want)
	}
}
