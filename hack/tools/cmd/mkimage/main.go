// Command mkimage writes a one-layer container image as a docker archive (the `docker save`
// format: manifest.json, the config blob and an uncompressed layer tar), which
// `ctr -n k8s.io images import` reads. It replaces `docker build` for images whose content is
// a few static binaries built here: no Docker engine, no base image, no registry.
//
//	mkimage -o coredns.tar -tag kubetree/coredns:latest -user 65532:65532 \
//	    -file bin/coredns-static:/coredns:0755:cap_net_bind_service \
//	    -entrypoint /coredns -expose 53/tcp,53/udp,9153/tcp
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
// The output is reproducible: fixed timestamps, sorted entries, no host user names.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// epoch is every entry's modification time, so that the same inputs make the same image.
var epoch = time.Unix(0, 0).UTC()

// capNumbers are the capabilities a file may be given (linux/capability.h).
var capNumbers = map[string]uint{
	"cap_chown":            0,
	"cap_dac_override":     1,
	"cap_net_bind_service": 10,
	"cap_net_raw":          13,
}

type fileSpec struct {
	src, dst string
	mode     int64
	caps     []string
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var files, dirs multi
	out := flag.String("o", "", "output docker archive (required)")
	tag := flag.String("tag", "", "repository:tag, e.g. kubetree/coredns:latest (required)")
	user := flag.String("user", "", "the image's user, e.g. 65532:65532")
	entrypoint := flag.String("entrypoint", "", "comma-separated entrypoint")
	cmd := flag.String("cmd", "", "comma-separated default arguments")
	expose := flag.String("expose", "", "comma-separated ports, e.g. 53/udp,9153/tcp")
	flag.Var(&files, "file", "SRC:DST[:MODE[:CAPS]] (repeatable)")
	flag.Var(&dirs, "dir", "SRC:DST, a whole tree (repeatable; before the -file entries)")
	flag.Parse()
	if *out == "" || *tag == "" || len(files)+len(dirs) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	specs := make([]fileSpec, 0, len(files))
	for _, f := range files {
		s, err := parseFile(f)
		if err != nil {
			fail(err)
		}
		specs = append(specs, s)
	}
	trees := make([][2]string, 0, len(dirs))
	for _, d := range dirs {
		src, dst, ok := strings.Cut(d, ":")
		if !ok || src == "" || !path.IsAbs(dst) {
			fail(fmt.Errorf("-dir %q: want SRC:/DST", d))
		}
		trees = append(trees, [2]string{src, path.Clean(dst)})
	}
	layer, err := buildLayer(trees, specs)
	if err != nil {
		fail(err)
	}
	cfg := imageConfig(layer, *user, split(*entrypoint), split(*cmd), split(*expose))
	if err := writeArchive(*out, *tag, cfg, layer); err != nil {
		fail(err)
	}
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

// fileCapability is the security.capability value for caps as +ep: struct
// vfs_cap_data revision 2 (magic 0x02000000 | VFS_CAP_FLAGS_EFFECTIVE), then the permitted
// and inheritable words of the low and high 32 capabilities, little endian.
func fileCapability(caps []string) ([]byte, error) {
	var permitted uint64
	for _, c := range caps {
		n, ok := capNumbers[strings.ToLower(c)]
		if !ok {
			return nil, fmt.Errorf("unknown capability %q", c)
		}
		permitted |= 1 << n
	}
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|0x000001)
	binary.LittleEndian.PutUint32(b[4:], uint32(permitted))
	binary.LittleEndian.PutUint32(b[12:], uint32(permitted>>32))
	return b, nil
}

type entry struct {
	hdr  *tar.Header
	body []byte
}

func buildLayer(trees [][2]string, specs []fileSpec) ([]byte, error) {
	entries := map[string]entry{}
	dir := func(name string, mode int64) {
		entries[name] = entry{hdr: &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}}
	}
	file := func(name string, mode int64, body []byte) *tar.Header {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))}
		entries[name] = entry{hdr: h, body: body}
		return h
	}
	dir("etc", 0o755)
	dir("tmp", 0o1777)
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n"))
	for _, t := range trees {
		if err := addTree(entries, t[0], strings.TrimPrefix(t[1], "/")); err != nil {
			return nil, err
		}
	}
	for _, s := range specs {
		body, err := os.ReadFile(s.src)
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(s.dst, "/")
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				dir(d, 0o755)
			}
		}
		h := file(name, s.mode, body)
		if len(s.caps) > 0 {
			c, err := fileCapability(s.caps)
			if err != nil {
				return nil, err
			}
			h.Format = tar.FormatPAX
			h.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(c)}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := entries[n]
		e.hdr.ModTime = epoch
		if err := tw.WriteHeader(e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addTree adds the tree under src, as entries named under dst ("" for the root).
func addTree(entries map[string]entry, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := path.Join(dst, filepath.ToSlash(rel))
		if name == "." || name == "" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		var body []byte
		switch h.Typeflag {
		case tar.TypeDir:
			h.Name = name + "/"
		case tar.TypeSymlink:
			h.Name = name
		case tar.TypeReg:
			h.Name = name
			if body, err = os.ReadFile(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: only directories, regular files and symbolic links", p)
		}
		entries[name] = entry{hdr: h, body: body}
		return nil
	})
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func imageConfig(layer []byte, user string, entrypoint, cmd, expose []string) []byte {
	ports := map[string]struct{}{}
	for _, p := range expose {
		ports[p] = struct{}{}
	}
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"User":         user,
			"Entrypoint":   entrypoint,
			"Cmd":          cmd,
			"ExposedPorts": ports,
			"Env":          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		},
		"rootfs": map[string]any{
			"type":     "layers",
			"diff_ids": []string{"sha256:" + digest(layer)},
		},
		"history": []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "hack/tools/cmd/mkimage"}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		fail(err)
	}
	return b
}

func writeArchive(out, tag string, cfg, layer []byte) error {
	cfgName := digest(cfg) + ".json"
	layerName := digest(layer) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   cfgName,
		"RepoTags": []string{tag},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	put := func(name string, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := io.Copy(tw, bytes.NewReader(body))
		return err
	}
	err = put(cfgName, cfg)
	if err == nil {
		err = put(layerName, layer)
	}
	if err == nil {
		err = put("manifest.json", manifest)
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}
