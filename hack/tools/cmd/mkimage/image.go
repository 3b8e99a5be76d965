package main

import (
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// defaultPath is the image's PATH: where Debian (-dir) and our static files put programs.
const defaultPath = "PATH=/usr/local/bin:/usr/bin:/bin"

// refNameAnnotation names an image in an OCI layout's index.json (image-spec annotations.md).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// createdBy is the history entry of the image's one layer.
const createdBy = "hack/tools/cmd/mkimage"

// runtimeConfig is what a runtime reads from the image besides its files.
type runtimeConfig struct {
	user                    string
	entrypoint, cmd, expose []string
	// platform is the OS and architecture of the image's binaries: what a runtime (and an
	// image index) matches the node against.
	platform v1.Platform
	// labels are the config's labels, e.g. the OCI version and revision annotations' keys.
	labels map[string]string
}

// buildImage is one layer on an empty OCI image, with the config the library writes.
func buildImage(files *layer, rc runtimeConfig) (v1.Image, error) {
	// Compressed once and kept: the digest, the layout and the archive all read the same bytes.
	l, err := tarball.LayerFromOpener(files.open, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	var ports map[string]struct{}
	if len(rc.expose) > 0 {
		ports = map[string]struct{}{}
		for _, p := range rc.expose {
			ports[p] = struct{}{}
		}
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: rc.platform.Architecture,
		OS:           rc.platform.OS,
		Variant:      rc.platform.Variant,
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			User:         rc.user,
			Entrypoint:   rc.entrypoint,
			Cmd:          rc.cmd,
			ExposedPorts: ports,
			Env:          []string{defaultPath},
			Labels:       rc.labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:   l,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: createdBy},
	})
}

// writeArchive writes img as the docker archive (`docker save` format) that
// `ctr -n k8s.io images import` reads, tagged exactly as given: the runtime normalizes
// kubetree/coredns:latest to docker.io/kubetree/coredns:latest as it does an image name in a
// pod spec.
func writeArchive(out string, tag name.Tag, img v1.Image) error {
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = tarball.Write(tag, img, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// writeLayout writes img as an OCI image layout holding only it, named by the ref.name
// annotation. A layout left by an earlier run is replaced, never appended to.
func writeLayout(dir string, tag name.Tag, img v1.Image) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err == nil {
		err = p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: tag.String()}))
	}
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// checkArchive reads the archive back as a runtime would and validates the image in it
// (digests and sizes of the config and layer, diff IDs, manifest); it must be the image built.
func checkArchive(out string, tag name.Tag, built v1.Image) error {
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		return err
	}
	if err := validate.Image(img); err != nil {
		return fmt.Errorf("%s: %v", out, err)
	}
	return sameImage(out, built, img)
}

// checkLayout reads the layout back and validates its one image, which must be the image built.
func checkLayout(dir string, tag name.Tag, built v1.Image) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	index, err := p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := index.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations[refNameAnnotation] != tag.String() {
		return fmt.Errorf("%s: index.json lists %v, want only %s", dir, m.Manifests, tag)
	}
	img, err := p.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	if err := validate.Image(img); err != nil {
		return fmt.Errorf("%s: %v", dir, err)
	}
	return sameImage(dir, built, img)
}

// sameImage: what was read back has built's config (so its diff IDs) byte for byte.
func sameImage(where string, built, read v1.Image) error {
	want, err := built.ConfigName()
	if err != nil {
		return err
	}
	got, err := read.ConfigName()
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s: config %s, built %s", where, got, want)
	}
	return nil
}
