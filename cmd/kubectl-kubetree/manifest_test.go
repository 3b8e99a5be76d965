package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
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

// TestKrewManifest: plugins/kubetree.yaml is a template in krew-release-bot's form, and filled in
// by hack/krew-manifest.sh (as hack/kubectl-release.sh fills it in for a release) it is a krew
// Plugin named kubetree (so `kubectl kubetree` runs bin kubectl-kubetree) whose platforms are those
// the release script builds, each pointing at the archive the script makes for it, under the
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
	// The platforms a release builds unless KUBECTL_RELEASE_PLATFORMS says fewer: the manifest's.
	platforms := regexp.MustCompile(`(?m)^ALL_PLATFORMS="([^"]*)"`).FindSubmatch(script)
	if platforms == nil || !strings.Contains(string(script), `${KUBECTL_RELEASE_PLATFORMS:-$ALL_PLATFORMS}`) {
		t.Fatal("hack/kubectl-release.sh: no ALL_PLATFORMS, the default of KUBECTL_RELEASE_PLATFORMS")
	}
	if !strings.Contains(string(script), `kubectl-kubetree_${VERSION}_${os}_${arch}.tar.gz`) ||
		!strings.Contains(string(script), "kubectl-kubetree LICENSE NOTICE") ||
		!strings.Contains(string(script), `krew-manifest.sh" "$OUT" "$VERSION"`) {
		t.Fatal("hack/kubectl-release.sh no longer writes kubectl-kubetree_VERSION_OS_ARCH.tar.gz of kubectl-kubetree, LICENSE and NOTICE with hack/krew-manifest.sh's manifest: update this test and the manifest")
	}
	// krew-release-bot knows two placeholders: {{ .TagName }}, and {{addURIAndSha "URL" .TagName }}
	// alone on a line at a four-space indent (it writes the sha256 line at four spaces).
	for i, line := range strings.Split(string(template), "\n") {
		if strings.HasPrefix(line, "#") || !strings.Contains(line, "{{") {
			continue
		}
		rest := strings.ReplaceAll(line, "{{ .TagName }}", "")
		if strings.Contains(rest, "{{") && !regexp.MustCompile(`^    \{\{addURIAndSha "[^"]+" \.TagName \}\}$`).MatchString(rest) {
			t.Errorf("plugins/kubetree.yaml:%d: %q is not a placeholder krew-release-bot fills in", i+1, line)
		}
	}

	const tag = "v1.2.3"
	out := t.TempDir()
	sums := map[string]string{}
	for _, p := range strings.Fields(string(platforms[1])) {
		archive := filepath.Join(out, "kubectl-kubetree_"+tag+"_"+strings.ReplaceAll(p, "/", "_")+".tar.gz")
		if err := os.WriteFile(archive, []byte("the archive of "+p), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("the archive of " + p))
		sums[p] = hex.EncodeToString(sum[:])
	}
	if msg, err := exec.Command("../../hack/krew-manifest.sh", out, tag).CombinedOutput(); err != nil {
		t.Fatalf("hack/krew-manifest.sh: %v\n%s", err, msg)
	}
	rendered, err := os.ReadFile(filepath.Join(out, "kubetree.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m krewPlugin
	if err := yaml.Unmarshal(rendered, &m); err != nil {
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
