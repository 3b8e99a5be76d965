package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository's top, from this package's directory.
const repoRoot = "../../../.."

// imageFor is a random one-layer image whose config says platform.
func imageFor(t *testing.T, platform string) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestIndexHoldsEachPlatformOnce: the index lists every image under the platform its config says,
// carries the release's annotations, and refuses two images of one platform.
func TestIndexHoldsEachPlatformOnce(t *testing.T) {
	idx, err := buildIndex([]v1.Image{imageFor(t, "linux/amd64"), imageFor(t, "linux/arm64")},
		map[string]string{versionAnnotation: "v1.2.3", revisionAnnotation: ""})
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.String())
	}
	if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("index platforms %v, want linux/amd64 linux/arm64", platforms)
	}
	if m.Annotations[versionAnnotation] != "v1.2.3" || len(m.Annotations) != 1 {
		t.Errorf("index annotations %v, want only the version", m.Annotations)
	}
	if _, err := buildIndex([]v1.Image{imageFor(t, "linux/arm64"), imageFor(t, "linux/arm64")}, nil); err == nil {
		t.Error("two linux/arm64 images: no error")
	}
}

// TestRenderPinsEveryKubetreeImage renders the repository's own deploy/: every container that runs
// kubetree's image runs it by digest, the Helm values name it by tag and digest, and every other
// image and line is as it was.
func TestRenderPinsEveryKubetreeImage(t *testing.T) {
	ref, err := name.NewDigest("registry.example:5000/kubetree/coredns@sha256:" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "deploy")
	src := filepath.Join(repoRoot, "deploy")
	if _, err := render(src, out, ref, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	checkRendered(t, src, out, ref, "v1.2.3")
}

// TestRenderRefusesAnUnknownImageForm: a manifest naming kubetree's image some other way (another
// tag, quoted in a list) is an error, never left unpinned.
func TestRenderRefusesAnUnknownImageForm(t *testing.T) {
	ref, _ := name.NewDigest("r.example/kubetree/coredns@sha256:" + strings.Repeat("cd", 32))
	for _, text := range []string{
		"containers:\n- name: coredns\n  image: kubetree/coredns:v1\n",
		"args: [\"--image=kubetree/coredns:latest\"]\n",
	} {
		if _, _, err := pin(text, ref, "v1.2.3"); err == nil {
			t.Errorf("no error for\n%s", text)
		}
	}
}

// TestPushedIndexIsServedByDigest pushes an index to a registry (go-containerregistry's own, in
// process) and reads it back by the digest push returned, with both images.
func TestPushedIndexIsServedByDigest(t *testing.T) {
	idx, err := buildIndex([]v1.Image{imageFor(t, "linux/amd64"), imageFor(t, "linux/arm64")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image")
	tag, _ := name.NewTag("kubetree/coredns:v1.2.3")
	if err := writeIndexLayout(dir, tag, idx); err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(registry.New())
	defer s.Close()
	u, _ := url.Parse(s.URL)
	to, err := name.NewTag(u.Host + "/kubetree/coredns:v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := push(dir, to)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if ref.DigestStr() != want.String() {
		t.Errorf("push returned %s, the layout's index is %s", ref, want)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pulled.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if _, err := pulled.Image(d.Digest); err != nil {
			t.Errorf("%s's image %s: %v", d.Platform, d.Digest, err)
		}
	}
}

// TestSBOMListsEveryModuleOfTheBinary: the SBOM of this test's own binary lists each module
// `go version -m` reports for it, at the version it reports, and Go's standard library.
func TestSBOMListsEveryModuleOfTheBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bom, err := binarySBOM(self, "")
	if err != nil {
		t.Fatal(err)
	}
	checkSBOM(t, self, bom, "")
}

// TestRelease checks what `make release` made (make release-test points KUBETREE_RELEASE at it).
func TestRelease(t *testing.T) {
	dir := os.Getenv("KUBETREE_RELEASE")
	if dir == "" {
		t.Skip("KUBETREE_RELEASE is not set: make release-test")
	}
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(readFile(t, filepath.Join(dir, "VERSION"))))
	ref, err := name.NewDigest(strings.TrimSpace(string(readFile(t, filepath.Join(dir, "image.ref")))))
	if err != nil {
		t.Fatal(err)
	}

	platforms := releasePlatforms("KUBETREE_RELEASE_PLATFORMS", "linux/amd64 linux/arm64")
	kubectlPlatforms := releasePlatforms("KUBETREE_KUBECTL_PLATFORMS", allKubectlPlatforms)
	for _, image := range []struct{ binary, layout, ref string }{{"coredns", "image", "image.ref"}, {"dnsq", "dnsq-image", "dnsq.ref"}} {
		t.Run(image.layout+" holds "+strings.Join(platforms, " and ")+", each image the "+image.binary+" binary of its platform", func(t *testing.T) {
			checkReleasedImage(t, dir, image.layout, image.ref, image.binary, version, platforms)
		})
	}

	var binaries []string
	for _, p := range platforms {
		binaries = append(binaries, "coredns-"+strings.ReplaceAll(p, "/", "-"), "dnsq-"+strings.ReplaceAll(p, "/", "-"))
	}
	for _, bin := range binaries {
		bin := filepath.Join(dir, bin)
		t.Run("the SBOM of "+filepath.Base(bin)+" lists every module go version -m reports", func(t *testing.T) {
			var bom cdx.BOM
			if err := cdx.NewBOMDecoder(bytes.NewReader(readFile(t, bin+".cdx.json")), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
				t.Fatal(err)
			}
			checkSBOM(t, bin, &bom, version)
			if bom.Metadata.Component.Version != version {
				t.Errorf("the SBOM names version %q, want %q", bom.Metadata.Component.Version, version)
			}
		})
	}

	t.Run("every rendered manifest names the image by the release's digest", func(t *testing.T) {
		checkRendered(t, filepath.Join(repoRoot, "deploy"), filepath.Join(dir, "deploy"), ref, version)
	})

	dnsqRef := strings.TrimSpace(string(readFile(t, filepath.Join(dir, "dnsq.ref"))))
	for _, p := range kubectlPlatforms {
		goos, arch, _ := strings.Cut(p, "/")
		archive := "kubectl-kubetree_" + version + "_" + goos + "_" + arch + ".tar.gz"
		t.Run("the kubectl plugin's archive "+archive, func(t *testing.T) {
			bin := fileInArchive(t, readFile(t, filepath.Join(dir, "kubectl", archive)), "kubectl-kubetree")
			checkExecutable(t, archive, bin, goos, arch)
			if goos == runtime.GOOS && arch == runtime.GOARCH {
				checkDoctorsDefaultImage(t, bin, dnsqRef)
			}
		})
	}

	t.Run("the krew manifest names each platform's archive by its sha256", func(t *testing.T) {
		manifest := filepath.Join(dir, "kubectl", "kubetree.yaml")
		if strings.Join(kubectlPlatforms, " ") != allKubectlPlatforms {
			// A release of some platforms (make test's) cannot fill the manifest in: it has none.
			if _, err := os.Stat(manifest); err == nil {
				t.Errorf("a release of the kubectl plugin for %v has a krew manifest, which names archives it has not", kubectlPlatforms)
			}
			return
		}
		checkKrewManifest(t, dir, manifest, version)
	})

	t.Run("SHA256SUMS covers every file, and each sum is right", func(t *testing.T) {
		sums := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(readFile(t, filepath.Join(dir, "SHA256SUMS"))))
		for sc.Scan() {
			sum, file, ok := strings.Cut(sc.Text(), "  ")
			if !ok {
				t.Fatalf("SHA256SUMS: %q is not a sha256sum line", sc.Text())
			}
			sums[file] = sum
		}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() == "SHA256SUMS" {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			got := sha256.Sum256(readFile(t, p))
			if want, ok := sums[rel]; !ok {
				t.Errorf("SHA256SUMS lacks %s", rel)
			} else if hex.EncodeToString(got[:]) != want {
				t.Errorf("%s: sha256 %x, SHA256SUMS says %s", rel, got, want)
			}
			delete(sums, rel)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for f := range sums {
			t.Errorf("SHA256SUMS lists %s, which the release has not", f)
		}
	})
}

// allKubectlPlatforms are the platforms of plugins/kubetree.yaml, which a full release builds.
const allKubectlPlatforms = "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"

// releasePlatforms are the platforms the release was made for, as make tells the test in env
// (make test makes one for its machine's platform alone), sorted as the test lists them.
func releasePlatforms(env, all string) []string {
	v := os.Getenv(env)
	if v == "" {
		v = all
	}
	return strings.Fields(v)
}

// checkKrewManifest: the krew manifest names the release's version, and each platform's archive
// by the release's URI and its sha256.
func checkKrewManifest(t *testing.T, dir, file, version string) {
	t.Helper()
	var manifest struct {
		Spec struct {
			Version   string
			Platforms []struct {
				Selector struct{ MatchLabels map[string]string } `json:"selector"`
				URI      string                                  `json:"uri"`
				Sha256   string                                  `json:"sha256"`
				Bin      string                                  `json:"bin"`
			}
		}
	}
	if err := yaml.Unmarshal(readFile(t, file), &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Spec.Version != version || len(manifest.Spec.Platforms) == 0 {
		t.Fatalf("krew manifest: version %q, %d platforms; want %q and some", manifest.Spec.Version, len(manifest.Spec.Platforms), version)
	}
	for _, p := range manifest.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		archive := "kubectl-kubetree_" + version + "_" + goos + "_" + arch + ".tar.gz"
		if !strings.HasSuffix(p.URI, "/"+version+"/"+archive) {
			t.Errorf("%s/%s: uri %s, want the release's %s", goos, arch, p.URI, archive)
		}
		raw := readFile(t, filepath.Join(dir, "kubectl", archive))
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != p.Sha256 {
			t.Errorf("%s: sha256 %x, the manifest says %s", archive, sum, p.Sha256)
		}
		if p.Bin != "kubectl-kubetree" {
			t.Errorf("%s/%s: bin %q, want kubectl-kubetree", goos, arch, p.Bin)
		}
	}
}

// checkReleasedImage: the layout's index is the one refFile names by digest, carries the release's
// version, and holds one image for each platform of want whose /binary is the release's binary of
// that platform.
func checkReleasedImage(t *testing.T, dir, layout, refFile, binary, version string, want []string) {
	t.Helper()
	r, err := name.NewDigest(strings.TrimSpace(string(readFile(t, filepath.Join(dir, refFile)))))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := layoutIndex(filepath.Join(dir, layout))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d.String() != r.DigestStr() {
		t.Errorf("%s names %s, the index is %s", refFile, r.DigestStr(), d)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Annotations[versionAnnotation] != version {
		t.Errorf("the index's version annotation %q, want %q", m.Annotations[versionAnnotation], version)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Platform().String() != d.Platform.String() {
			t.Errorf("the index lists %s, the image's config says %s", d.Platform, cf.Platform())
		}
		if cf.Config.Labels["org.opencontainers.image.version"] != version {
			t.Errorf("%s: version label %q, want %q", d.Platform, cf.Config.Labels["org.opencontainers.image.version"], version)
		}
		inImage := fileInImage(t, img, binary)
		f, err := elf.NewFile(bytes.NewReader(inImage))
		if err != nil {
			t.Fatalf("%s: /%s is not an ELF file: %v", d.Platform, binary, err)
		}
		if want := machines[d.Platform.Architecture]; f.Machine != want || f.Class != elf.ELFCLASS64 {
			t.Errorf("%s: /%s is a %s %s ELF, want %s", d.Platform, binary, f.Class, f.Machine, want)
		}
		released := readFile(t, filepath.Join(dir, binary+"-"+d.Platform.OS+"-"+d.Platform.Architecture))
		if !bytes.Equal(inImage, released) {
			t.Errorf("%s: the image's /%s is not the release's binary", d.Platform, binary)
		}
	}
	sort.Strings(platforms)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(platforms, want) {
		t.Errorf("index platforms %v, want %v", platforms, want)
	}
}

// checkSBOM: bom lists each module `go version -m bin` reports (a replaced one as what replaced
// it, which is what was compiled in; one replaced by a directory of this repository at the
// release's version) at its version, and the standard library at the binary's Go.
func checkSBOM(t *testing.T, bin string, bom *cdx.BOM, release string) {
	t.Helper()
	listed := map[string]bool{}
	if bom.Components != nil {
		for _, c := range *bom.Components {
			listed[c.Name+"@"+c.Version] = true
		}
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", bin, err)
	}
	var goVersion string
	var deps []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && strings.HasSuffix(f[0], ":"):
			goVersion = f[1]
		case len(f) >= 3 && f[0] == "dep":
			deps = append(deps, f[1]+"@"+f[2])
		case len(f) >= 3 && f[0] == "=>" && len(deps) > 0:
			if !strings.HasPrefix(f[1], ".") && !strings.HasPrefix(f[1], "/") {
				deps[len(deps)-1] = f[1] + "@" + f[2]
			} else if release != "" {
				path, _, _ := strings.Cut(deps[len(deps)-1], "@")
				deps[len(deps)-1] = path + "@" + release
			}
		}
	}
	if goVersion == "" {
		t.Fatalf("go version -m %s names no Go version:\n%s", bin, out)
	}
	for _, d := range deps {
		if !listed[d] {
			t.Errorf("the SBOM does not list %s", d)
		}
	}
	if !listed["std@"+goVersion] {
		t.Errorf("the SBOM does not list the standard library at %s", goVersion)
	}
	if len(listed) != len(deps)+1 {
		t.Errorf("the SBOM lists %d components; go version -m reports %d modules and the standard library", len(listed), len(deps))
	}
}

// checkRendered: every container in out's manifests that runs kubetree's image (the one src's
// manifests name by tag) runs ref, the Helm values name ref's repository and version@digest, and
// nothing else changed.
func checkRendered(t *testing.T, src, out string, ref name.Digest, version string) {
	t.Helper()
	pinned := 0
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".yaml" {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		before, after := readFile(t, p), readFile(t, filepath.Join(out, rel))
		old := placeholderRepo + ":" + placeholderTag
		if !bytes.Contains(before, []byte(placeholderRepo)) {
			if !bytes.Equal(before, after) {
				t.Errorf("%s changed, though it does not name kubetree's image", rel)
			}
			return nil
		}
		for _, doc := range strings.Split(string(after), "\n---") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", rel, err)
			}
			for _, image := range imagesOf(obj) {
				if strings.Contains(image, "kubetree/coredns") {
					if image != ref.String() {
						t.Errorf("%s runs %s, want %s", rel, image, ref)
					}
					pinned++
				}
			}
			if img, ok := obj["image"].(map[string]any); ok && filepath.Base(rel) == "values.yaml" {
				if img["repository"] != ref.Context().String() || img["tag"] != version+"@"+ref.DigestStr() {
					t.Errorf("%s: image %v, want repository %s and tag %s@%s", rel, img, ref.Context(), version, ref.DigestStr())
				}
				pinned++
			}
		}
		if bytes.Contains(after, []byte(old)) {
			t.Errorf("%s still names %s", rel, old)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// deploy/deployment.yaml, deploy/nodelocal/node-local-dns.yaml, deploy/helm/values.yaml.
	if pinned < 3 {
		t.Errorf("%d manifests name kubetree's image; deploy/ has 3", pinned)
	}
}

// imagesOf is every container image a manifest's object names, at any depth.
func imagesOf(v any) []string {
	var images []string
	switch o := v.(type) {
	case map[string]any:
		for k, c := range o {
			if s, ok := c.(string); ok && k == "image" {
				images = append(images, s)
			}
			images = append(images, imagesOf(c)...)
		}
	case []any:
		for _, c := range o {
			images = append(images, imagesOf(c)...)
		}
	}
	return images
}

// fileInArchive is the content of a file of a .tar.gz.
func fileInArchive(t *testing.T, archive []byte, file string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the archive: %v", file, err)
		}
		if h.Name == file {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// checkExecutable: b is an executable of goos/arch (ELF for linux, Mach-O for darwin).
func checkExecutable(t *testing.T, what string, b []byte, goos, arch string) {
	t.Helper()
	switch goos {
	case "linux":
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: not an ELF file: %v", what, err)
		}
		if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; f.Machine != want {
			t.Errorf("%s: a %s ELF, want %s", what, f.Machine, want)
		}
	case "darwin":
		f, err := macho.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: not a Mach-O file: %v", what, err)
		}
		if want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[arch]; f.Cpu != want {
			t.Errorf("%s: a %s Mach-O, want %s", what, f.Cpu, want)
		}
	default:
		t.Errorf("%s: no check for %s", what, goos)
	}
}

// checkDoctorsDefaultImage: the released kubectl plugin's doctor asks through the release's own
// dnsq image, by digest, unless told otherwise.
func checkDoctorsDefaultImage(t *testing.T, plugin []byte, dnsqRef string) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "kubectl-kubetree")
	if err := os.WriteFile(exe, plugin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "doctor", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl-kubetree doctor --help: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `--image string`) || !strings.Contains(string(out), `(default "`+dnsqRef+`")`) {
		t.Errorf("kubectl-kubetree doctor's default --image is not the release's dnsq image %s:\n%s", dnsqRef, out)
	}
}

// fileInImage is the content of a file of img's one layer.
func fileInImage(t *testing.T, img v1.Image, file string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v (%d)", err, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("/%s not in the image's layer: %v", file, err)
		}
		if strings.TrimPrefix(h.Name, "/") == file {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPushedImageIsServedByDigest: a layout of one image (what mkimage -oci writes) is pushed as
// that image, and served under its digest.
func TestPushedImageIsServedByDigest(t *testing.T) {
	img := imageFor(t, "linux/amd64")
	dir := filepath.Join(t.TempDir(), "image")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(registry.New())
	defer s.Close()
	u, _ := url.Parse(s.URL)
	to, _ := name.NewTag(u.Host + "/coredns/coredns:v1.15.0")
	ref, err := push(dir, to)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if ref.DigestStr() != want.String() {
		t.Errorf("push returned %s, the image is %s", ref, want)
	}
	if _, err := remote.Image(ref); err != nil {
		t.Errorf("pulling %s: %v", ref, err)
	}
}
