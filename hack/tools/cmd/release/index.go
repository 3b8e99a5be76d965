package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// The OCI annotations an index and a layout carry (image-spec annotations.md).
const (
	refNameAnnotation  = "org.opencontainers.image.ref.name"
	versionAnnotation  = "org.opencontainers.image.version"
	revisionAnnotation = "org.opencontainers.image.revision"
)

func indexCommand(args []string) error {
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	out := fs.String("o", "", "output OCI layout directory (replaced)")
	ref := fs.String("name", "", "the index's name in the layout, e.g. kubetree/coredns:v0.1.0")
	version := fs.String("version", "", "the release's version (annotation)")
	revision := fs.String("revision", "", "the release's commit (annotation)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *ref == "" || fs.NArg() == 0 {
		return errors.New("want -o DIR -name REF and one layout or more")
	}
	tag, err := name.NewTag(*ref)
	if err != nil {
		return err
	}
	var images []v1.Image
	for _, dir := range fs.Args() {
		img, err := onlyImage(dir)
		if err != nil {
			return err
		}
		images = append(images, img)
	}
	idx, err := buildIndex(images, map[string]string{versionAnnotation: *version, revisionAnnotation: *revision})
	if err != nil {
		return err
	}
	if err := writeIndexLayout(*out, tag, idx); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}

// onlyImage is the one image of a single-image OCI layout (what mkimage -oci writes).
func onlyImage(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s: %d manifests, want one image", dir, len(m.Manifests))
	}
	return p.Image(m.Manifests[0].Digest)
}

// buildIndex is an OCI image index of images, each under the platform its own config says, so
// that a runtime picks the one for its node; two images of one platform are refused.
func buildIndex(images []v1.Image, annotations map[string]string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		p := cf.Platform()
		if p == nil || p.OS == "" || p.Architecture == "" {
			return nil, errors.New("an image's config names no platform")
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("two images for %s", p)
		}
		seen[p.String()] = true
		mt, err := img.MediaType()
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: mt, Platform: p},
		})
	}
	set := map[string]string{}
	for k, v := range annotations {
		if v != "" {
			set[k] = v
		}
	}
	if len(set) > 0 {
		idx = mutate.Annotations(idx, set).(v1.ImageIndex)
	}
	if err := validate.Index(idx); err != nil {
		return nil, err
	}
	return idx, nil
}

// writeIndexLayout writes idx as an OCI layout whose index.json names it by tag; a layout left
// by an earlier run is replaced, never appended to.
func writeIndexLayout(dir string, tag name.Tag, idx v1.ImageIndex) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err == nil {
		err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: tag.String()}))
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

// layoutIndex is the image index a layout written by writeIndexLayout holds.
func layoutIndex(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	outer, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s: want one image index in index.json, found %d entries", dir, len(m.Manifests))
	}
	return outer.ImageIndex(m.Manifests[0].Digest)
}
