// Command mkimage builds a one-layer container image from files on disk, with
// go-containerregistry, and writes it twice: as the docker archive (the `docker save` format)
// that `ctr -n k8s.io images import` reads, and optionally as an OCI image layout. It replaces
// `docker build` for images whose content is static binaries built here, or a root filesystem
// of Debian packages: no Docker engine, no base image, no registry.
//
//	mkimage -o coredns.tar -oci coredns.oci -tag kubetree/coredns:latest -user 65532:65532 \
//	    -file bin/coredns-static:/coredns:0755:cap_net_bind_service \
//	    -entrypoint /coredns -expose 53/tcp,53/udp,9153/tcp
//
// -platform linux/arm64 builds the image of another architecture (the binaries given must be
// of it: mkimage does not look inside them); a release makes one per platform and joins them in
// an image index (hack/tools/cmd/release). -label KEY=VALUE sets a config label. Either output
// may be left out, not both.
//
// A -file of the form SRC:DST[:MODE[:CAPS]] copies SRC to DST (owned by root, mode MODE,
// default 0755). CAPS is a comma-separated list of capability names given to the file as
// +ep, written as the security.capability extended attribute in the layer (a PAX
// SCHILY.xattr record, which containerd applies when it unpacks the layer): the same bytes
// `setcap cap_net_bind_service=+ep` writes. The layer also holds /etc/passwd and /etc/group
// with root and nonroot (65532), and /tmp, as distroless's static:nonroot does.
//
// A -dir of the form SRC:DST copies the tree under SRC to DST: directories, regular files
// and symbolic links with their modes (set-id bits too), every entry owned by root. It is how a
// root filesystem of Debian packages (hack/debroot.sh) becomes an image; -file entries are
// written over it.
//
// We write the layer's tar stream (the library cannot set an xattr); the library makes
// everything else: the gzip-compressed layer, its digests, the config, the manifest, both
// outputs. Each output is read back and checked with the library's validate.Image before
// mkimage exits 0.
//
// The output is reproducible: fixed timestamps, sorted entries, no host user names.
package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// options are mkimage's flags, parsed.
type options struct {
	archive, layout string
	tag             string
	trees           [][2]string
	files           []fileSpec
	runtime         runtimeConfig
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var o options
	var files, dirs multi
	flag.StringVar(&o.archive, "o", "", "output docker archive")
	flag.StringVar(&o.layout, "oci", "", "output OCI image layout directory (replaced if it exists)")
	flag.StringVar(&o.tag, "tag", "", "repository:tag, e.g. kubetree/coredns:latest (required)")
	flag.StringVar(&o.runtime.user, "user", "", "the image's user, e.g. 65532:65532")
	entrypoint := flag.String("entrypoint", "", "comma-separated entrypoint")
	cmd := flag.String("cmd", "", "comma-separated default arguments")
	expose := flag.String("expose", "", "comma-separated ports, e.g. 53/udp,9153/tcp")
	flag.Var(&files, "file", "SRC:DST[:MODE[:CAPS]] (repeatable)")
	flag.Var(&dirs, "dir", "SRC:DST, a whole tree (repeatable; before the -file entries)")
	platform := flag.String("platform", "linux/amd64", "OS/ARCH[/VARIANT] of the image")
	var labels multi
	flag.Var(&labels, "label", "KEY=VALUE, a config label (repeatable)")
	flag.Parse()
	if o.archive+o.layout == "" || o.tag == "" || len(files)+len(dirs) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	p, err := v1.ParsePlatform(*platform)
	if err != nil || p.OS == "" || p.Architecture == "" {
		fail(fmt.Errorf("-platform %q: want OS/ARCH[/VARIANT]", *platform))
	}
	o.runtime.platform = *p
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			fail(fmt.Errorf("-label %q: want KEY=VALUE", l))
		}
		if o.runtime.labels == nil {
			o.runtime.labels = map[string]string{}
		}
		o.runtime.labels[k] = v
	}
	o.runtime.entrypoint, o.runtime.cmd, o.runtime.expose = split(*entrypoint), split(*cmd), split(*expose)
	for _, f := range files {
		s, err := parseFile(f)
		if err != nil {
			fail(err)
		}
		o.files = append(o.files, s)
	}
	for _, d := range dirs {
		t, err := parseDir(d)
		if err != nil {
			fail(err)
		}
		o.trees = append(o.trees, t)
	}
	if err := run(o); err != nil {
		fail(err)
	}
}

// run builds the image, writes each output and checks what it wrote.
func run(o options) error {
	tag, err := name.NewTag(o.tag)
	if err != nil {
		return err
	}
	files, err := newLayer(o.trees, o.files)
	if err != nil {
		return err
	}
	img, err := buildImage(files, o.runtime)
	if err != nil {
		return err
	}
	if o.archive != "" {
		if err := writeArchive(o.archive, tag, img); err != nil {
			return err
		}
		if err := checkArchive(o.archive, tag, img); err != nil {
			return err
		}
	}
	if o.layout == "" {
		return nil
	}
	if err := writeLayout(o.layout, tag, img); err != nil {
		return err
	}
	return checkLayout(o.layout, tag, img)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mkimage:", err)
	os.Exit(1)
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func parseFile(v string) (fileSpec, error) {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 4 || parts[0] == "" || !path.IsAbs(parts[1]) {
		return fileSpec{}, fmt.Errorf("-file %q: want SRC:/DST[:MODE[:CAPS]]", v)
	}
	s := fileSpec{src: parts[0], dst: path.Clean(parts[1]), mode: 0o755}
	if len(parts) > 2 && parts[2] != "" {
		m, err := strconv.ParseInt(parts[2], 8, 32)
		if err != nil {
			return fileSpec{}, fmt.Errorf("-file %q: mode: %v", v, err)
		}
		s.mode = m
	}
	if len(parts) > 3 && parts[3] != "" {
		s.caps = strings.Split(parts[3], ",")
	}
	return s, nil
}

func parseDir(v string) ([2]string, error) {
	src, dst, ok := strings.Cut(v, ":")
	if !ok || src == "" || !path.IsAbs(dst) {
		return [2]string{}, fmt.Errorf("-dir %q: want SRC:/DST", v)
	}
	return [2]string{src, path.Clean(dst)}, nil
}
