package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// netBindService is what `setcap cap_net_bind_service=+ep FILE` writes as FILE's
// security.capability: vfs_cap_data revision 2 with the effective flag, bit 10 permitted.
var netBindService = []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// fixture is a small root filesystem and a "coredns" to be given cap_net_bind_service, and the
// options hack/node.mk and hack/conformance.mk pass for such an image.
func fixture(t *testing.T, dir string) options {
	t.Helper()
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(rootfs, "bin/dash"), "#!dash\n", 0o755)
	write(t, filepath.Join(rootfs, "usr/bin/su"), "#!su\n", 0o755|os.ModeSetuid)
	if err := os.Symlink("dash", filepath.Join(rootfs, "bin/sh")); err != nil {
		t.Fatal(err)
	}
	coredns := filepath.Join(dir, "coredns-static")
	write(t, coredns, "static coredns\n", 0o700)
	return options{
		archive: filepath.Join(dir, "coredns.tar"),
		layout:  filepath.Join(dir, "coredns.oci"),
		tag:     "kubetree/coredns:latest",
		trees:   [][2]string{{rootfs, "/"}},
		files:   []fileSpec{{src: coredns, dst: "/coredns", mode: 0o755, caps: []string{"cap_net_bind_service"}}},
		runtime: runtimeConfig{user: "65532:65532", entrypoint: []string{"/coredns"}, expose: []string{"53/tcp", "53/udp", "9153/tcp"},
			platform: v1.Platform{OS: "linux", Architecture: "amd64"}},
	}
}

// build is one mkimage run on the fixture.
func build(t *testing.T, dir string) options {
	t.Helper()
	o := fixture(t, dir)
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	return o
}

func write(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask, set-id bits too
		t.Fatal(err)
	}
}

// files reads img's one layer as a runtime unpacks it: header and body by path.
func files(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want one", len(layers), err)
	}
	r, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	headers, bodies := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return headers, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		headers["/"+h.Name] = h
		if bodies["/"+h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDockerArchive: the archive ctr imports holds one image under exactly the name given, that
// the library's validation passes, with the runtime config asked for and every file: /coredns
// with its file capability, the tree with its modes and links, owned by root.
func TestDockerArchive(t *testing.T) {
	b := build(t, t.TempDir())

	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(b.archive) })
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{b.tag}) {
		t.Errorf("manifest.json: %+v; want one image tagged only %s", manifest, b.tag)
	}
	img, err := tarball.ImageFromPath(b.archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Errorf("validate.Image: %v", err)
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/coredns"}) || len(c.Cmd) != 0 ||
		!slices.Equal(c.Env, []string{defaultPath}) || len(c.Labels) != 0 {
		t.Errorf("config: user %q entrypoint %q cmd %q env %q labels %v", c.User, c.Entrypoint, c.Cmd, c.Env, c.Labels)
	}
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if !slices.Equal(ports, []string{"53/tcp", "53/udp", "9153/tcp"}) {
		t.Errorf("exposed ports %v", ports)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || !cfg.Created.Equal(epoch) {
		t.Errorf("config: os %q architecture %q created %v", cfg.OS, cfg.Architecture, cfg.Created)
	}

	headers, bodies := files(t, img)
	coredns := headers["/coredns"]
	if coredns == nil {
		t.Fatal("no /coredns in the layer")
	}
	if got := []byte(coredns.PAXRecords[capabilityRecord]); !bytes.Equal(got, netBindService) {
		t.Errorf("/coredns security.capability %x, want cap_net_bind_service=+ep %x", got, netBindService)
	}
	if coredns.Mode != 0o755 || string(bodies["/coredns"]) != "static coredns\n" {
		t.Errorf("/coredns mode %o body %q", coredns.Mode, bodies["/coredns"])
	}
	for _, want := range []struct {
		path     string
		typeflag byte
		mode     int64
		link     string
	}{
		{"/bin/", tar.TypeDir, 0o755, ""},
		{"/bin/dash", tar.TypeReg, 0o755, ""},
		{"/bin/sh", tar.TypeSymlink, 0o777, "dash"},
		{"/usr/bin/su", tar.TypeReg, 0o4755, ""},
		{"/etc/passwd", tar.TypeReg, 0o644, ""},
		{"/tmp/", tar.TypeDir, 0o1777, ""},
	} {
		h := headers[want.path]
		if h == nil {
			t.Errorf("no %s in the layer", want.path)
			continue
		}
		if h.Typeflag != want.typeflag || h.Mode&0o7777 != want.mode || h.Linkname != want.link {
			t.Errorf("%s: type %c mode %o link %q; want %c %o %q", want.path, h.Typeflag, h.Mode, h.Linkname, want.typeflag, want.mode, want.link)
		}
	}
	for p, h := range headers {
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: owner %d:%d (%q:%q), mtime %v; want root's, no names, the epoch", p, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		if p != "/coredns" && h.PAXRecords[capabilityRecord] != "" {
			t.Errorf("%s has a file capability; only /coredns was given one", p)
		}
	}
	if !bytes.Contains(bodies["/etc/passwd"], []byte("nonroot:x:65532:65532:")) {
		t.Errorf("/etc/passwd has no nonroot 65532: %q", bodies["/etc/passwd"])
	}
}

// TestOCILayout: the layout holds the same image (same manifest the library computed, same
// config), OCI media types throughout, named by its ref.name annotation, valid.
func TestOCILayout(t *testing.T) {
	b := build(t, t.TempDir())

	img, d := layoutImage(t, b.layout)
	if d.MediaType != types.OCIManifestSchema1 || d.Annotations[refNameAnnotation] != b.tag {
		t.Errorf("index.json: %s named %q; want %s named %q", d.MediaType, d.Annotations[refNameAnnotation], types.OCIManifestSchema1, b.tag)
	}
	if err := validate.Image(img); err != nil {
		t.Errorf("validate.Image: %v", err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.Config.MediaType != types.OCIConfigJSON || len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest media types: config %s, layers %v", manifest.Config.MediaType, manifest.Layers)
	}

	archived, err := tarball.ImageFromPath(b.archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameImage("layout and archive", archived, img); err != nil {
		t.Error(err)
	}
	headers, _ := files(t, img)
	if got := []byte(headers["/coredns"].PAXRecords[capabilityRecord]); !bytes.Equal(got, netBindService) {
		t.Errorf("/coredns security.capability in the layout %x, want %x", got, netBindService)
	}
}

// TestAnotherPlatform: an image of another architecture, layout only, says that platform and its
// labels in its config, which is what an image index and a node's runtime match on.
func TestAnotherPlatform(t *testing.T) {
	o := fixture(t, t.TempDir())
	o.archive = ""
	o.runtime.platform = v1.Platform{OS: "linux", Architecture: "arm64"}
	o.runtime.labels = map[string]string{"org.opencontainers.image.version": "v1.2.3"}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	if tars, _ := filepath.Glob(filepath.Join(filepath.Dir(o.layout), "*.tar")); len(tars) > 0 {
		t.Errorf("archives were written, none was asked for: %v", tars)
	}
	img, _ := layoutImage(t, o.layout)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" || cf.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("config: %s/%s, labels %v; want linux/arm64 with the version label", cf.OS, cf.Architecture, cf.Config.Labels)
	}
}

// layoutImage is the one image of an OCI layout mkimage wrote, and its entry in index.json.
func layoutImage(t *testing.T, dir string) (v1.Image, v1.Descriptor) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	index, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(m.Manifests))
	}
	img, err := p.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img, m.Manifests[0]
}

// TestReproducible: the same inputs make the same archive and the same layout, byte for byte,
// and a second run over an existing layout replaces it.
func TestReproducible(t *testing.T) {
	o := build(t, t.TempDir())
	archive, index := digestOf(t, o.archive), readFile(t, filepath.Join(o.layout, "index.json"))
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	if got := digestOf(t, o.archive); got != archive {
		t.Errorf("archive %x, then %x", archive, got)
	}
	if got := readFile(t, filepath.Join(o.layout, "index.json")); !bytes.Equal(got, index) {
		t.Errorf("index.json\n%s\nthen\n%s", index, got)
	}
}

// TestInputsChecked: a -file source that is not a regular file, an unknown capability or a
// name no runtime would look up stops mkimage before it writes anything.
func TestInputsChecked(t *testing.T) {
	dir := t.TempDir()
	file := fileSpec{src: "mkimage_test.go", dst: "/x", mode: 0o755}
	for _, tc := range []struct {
		name string
		tag  string
		file fileSpec
	}{
		{"directory as -file", "kubetree/x:1", fileSpec{src: dir, dst: "/x", mode: 0o755}},
		{"unknown capability", "kubetree/x:1", fileSpec{src: file.src, dst: "/x", mode: 0o755, caps: []string{"cap_sys_admin"}}},
		{"upper-case repository", "Kubetree/X:1", file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "out.tar")
			err := run(options{archive: out, tag: tc.tag, files: []fileSpec{tc.file}})
			if err == nil {
				t.Fatal("run succeeded")
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("%s was written after %v", out, err)
			}
		})
	}
}

func digestOf(t *testing.T, path string) [32]byte {
	t.Helper()
	return sha256.Sum256(readFile(t, path))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
