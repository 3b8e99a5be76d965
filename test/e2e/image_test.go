package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// netBindService is the security.capability value of cap_net_bind_service=+ep, as setcap writes it:
// struct vfs_cap_data, revision 2 with the effective bit, CAP_NET_BIND_SERVICE (10) permitted.
var netBindService = []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// image is what a runtime reads of a docker archive: its tags, its config, and its files.
type image struct {
	tags   []string
	config struct {
		Config struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			ExposedPorts map[string]struct{}
		} `json:"config"`
	}
	files map[string]*tar.Header
	data  map[string][]byte
}

func readImage(t *testing.T, path string) *image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (make node-images builds it)", err)
	}
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		entries[h.Name] = b
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, entries["manifest.json"])
	}
	img := &image{tags: manifest[0].RepoTags, files: map[string]*tar.Header{}, data: map[string][]byte{}}
	if err := json.Unmarshal(entries[manifest[0].Config], &img.config); err != nil {
		t.Fatal(err)
	}
	for _, l := range manifest[0].Layers {
		lr := tar.NewReader(uncompressed(t, entries[l]))
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := "/" + strings.TrimPrefix(h.Name, "./")
			img.files[name] = h
			img.data[name], _ = io.ReadAll(lr)
		}
	}
	return img
}

// uncompressed is a layer as a runtime unpacks it: a docker archive may hold it as written
// (docker save) or gzip-compressed (mkimage, through go-containerregistry).
func uncompressed(t *testing.T, layer []byte) io.Reader {
	t.Helper()
	if !bytes.HasPrefix(layer, []byte{0x1f, 0x8b}) {
		return bytes.NewReader(layer)
	}
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	return zr
}

// dockerfile reads the instructions of deploy/Dockerfile's final stage that a runtime sees.
func dockerfile(t *testing.T) (user string, entrypoint []string, expose []string, caps string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "USER":
			user = f[1]
		case f[0] == "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "ENTRYPOINT"))), &entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT: %v", err)
			}
		case f[0] == "EXPOSE":
			for _, p := range f[1:] {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				expose = append(expose, p)
			}
		}
		if m := regexp.MustCompile(`setcap (\S+) `).FindStringSubmatch(line); m != nil {
			caps = m[1]
		}
	}
	return user, entrypoint, expose, caps
}

// TestImage: the image deploy/ points at, built without Docker (make node-images), is what
// deploy/Dockerfile describes and what a runtime needs: tagged as deployment.yaml names it, the
// Dockerfile's user, entrypoint and ports, /coredns static with cap_net_bind_service=+ep; and the
// binary in it starts with deploy/'s Corefile and answers.
func TestImage(t *testing.T) {
	img := readImage(t, filepath.Join(env.root, "_out", "images", "coredns.tar"))

	deployment, err := os.ReadFile(filepath.Join(env.root, "deploy", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`image:\s*(\S+)`).FindSubmatch(deployment)
	if m == nil || !slices.Contains(img.tags, string(m[1])) {
		t.Errorf("the image is tagged %v; deploy/deployment.yaml runs %q", img.tags, m)
	}

	user, entrypoint, expose, caps := dockerfile(t)
	cfg := img.config.Config
	if cfg.User != user || !slices.Equal(cfg.Entrypoint, entrypoint) || len(cfg.Cmd) != 0 {
		t.Errorf("image user %q entrypoint %q cmd %q; the Dockerfile says %q %q and no cmd", cfg.User, cfg.Entrypoint, cfg.Cmd, user, entrypoint)
	}
	var ports []string
	for p := range cfg.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	slices.Sort(expose)
	if !slices.Equal(ports, expose) {
		t.Errorf("image exposes %v; the Dockerfile %v", ports, expose)
	}
	if caps != "cap_net_bind_service=+ep" {
		t.Errorf("the Dockerfile's setcap gives %q; this test knows the bytes of cap_net_bind_service=+ep", caps)
	}

	bin := img.files[entrypoint[0]]
	if bin == nil {
		t.Fatalf("no %s in the image", entrypoint[0])
	}
	if got := []byte(bin.PAXRecords["SCHILY.xattr.security.capability"]); !bytes.Equal(got, netBindService) {
		t.Errorf("%s's security.capability is %x, want cap_net_bind_service=+ep (%x)", entrypoint[0], got, netBindService)
	}
	if bin.Mode&0o111 == 0 || bin.Mode&0o6000 != 0 {
		t.Errorf("%s has mode %o: want executable, neither setuid nor setgid", entrypoint[0], bin.Mode)
	}
	if bytes.Contains(img.data[entrypoint[0]], []byte("/lib64/ld-linux")) {
		t.Errorf("%s asks for a dynamic loader; the image has none: it must be static", entrypoint[0])
	}

	// The binary itself, run as the image would run it, with the shipped Corefile.
	path := filepath.Join(t.TempDir(), "coredns")
	if err := os.WriteFile(path, img.data[entrypoint[0]], 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(env.root, "deploy", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm api.ConfigMap
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&cm); err != nil || cm.Data["Corefile"] == "" {
		t.Fatalf("deploy/configmap.yaml: %v, Corefile %q", err, cm.Data["Corefile"])
	}
	kubernetes, err := env.client.CoreV1().Services("default").Get(bg, "kubernetes", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := startShippedCorefileWith(t, path, cm.Data["Corefile"], env.vars["KUBECONFIG"])
	eventually(t, "ready", 30*time.Second, c.isReady)
	c.waitAnswer(t, "kubernetes.default.svc.cluster.local.", dns.TypeA, kubernetes.Spec.ClusterIP)
	c.waitAnswer(t, "www.example.org.", dns.TypeA, "192.0.2.1")
}

// TestBuildInfo: the CoreDNS the tests run was stamped by the Makefile with what hack/version.sh
// says; coredns_kubetree_build_info carries it, and the first log line of kubetree names it.
func TestBuildInfo(t *testing.T) {
	out, err := exec.Command(filepath.Join(env.root, "hack", "version.sh")).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 2 {
		t.Fatalf("hack/version.sh: %q, %v", out, err)
	}
	version, revision := f[0], strings.TrimSuffix(f[1], "-dirty")
	c := startCoreDNS(t)
	eventually(t, "ready", 30*time.Second, c.isReady)
	var line string
	for l := range strings.Lines(c.scrape()) {
		if strings.HasPrefix(l, "coredns_kubetree_build_info{") {
			line = strings.TrimSpace(l)
		}
	}
	for _, want := range []string{`version="` + version + `"`, `revision="` + revision, `goversion="go`} {
		if !strings.Contains(line, want) {
			t.Errorf("coredns_kubetree_build_info: %q, want %s", line, want)
		}
	}
	if !strings.HasSuffix(line, " 1") {
		t.Errorf("coredns_kubetree_build_info: %q, want the value 1", line)
	}
	if !strings.Contains(c.out.String(), "[INFO] plugin/kubetree: "+version+", revision "+revision) {
		t.Errorf("no log line names %s, revision %s:\n%s", version, revision, c.out.String())
	}
}
