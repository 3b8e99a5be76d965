package main

import (
	"archive/tar"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
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

// capabilityRecord is the PAX record that carries a file's security.capability extended
// attribute; containerd sets the attribute when it unpacks the layer.
const capabilityRecord = "SCHILY.xattr.security.capability"

// fileSpec is one -file: SRC copied to DST, owned by root, with MODE and file capabilities CAPS.
type fileSpec struct {
	src, dst string
	mode     int64
	caps     []string
}

// fileCapability is the security.capability value for caps as +ep: struct
// vfs_cap_data revision 2 (magic 0x02000000 | VFS_CAP_FLAGS_EFFECTIVE), then the permitted
// and inheritable words of the low and high 32 capabilities, little endian: the bytes
// `setcap CAPS=+ep` writes.
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

// entry is one file of the layer: its header, and its body either from a file (src) or given.
type entry struct {
	hdr  *tar.Header
	src  string
	body []byte
}

// layer is the image's one filesystem layer, kept as headers and source paths (not bytes),
// so that a 200 MB root filesystem is read from disk each time the layer is opened rather
// than held in memory.
type layer struct {
	entries map[string]entry
}

// newLayer is /etc/passwd and /etc/group (root and nonroot 65532) and /tmp, as distroless's
// static:nonroot has them, then each tree, then each file over them.
func newLayer(trees [][2]string, specs []fileSpec) (*layer, error) {
	l := &layer{entries: map[string]entry{}}
	l.dir("etc", 0o755)
	l.dir("tmp", 0o1777)
	l.given("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	l.given("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n"))
	for _, t := range trees {
		if err := l.addTree(t[0], strings.TrimPrefix(t[1], "/")); err != nil {
			return nil, err
		}
	}
	for _, s := range specs {
		if err := l.addFile(s); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *layer) dir(name string, mode int64) {
	l.entries[name] = entry{hdr: &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: epoch}}
}

func (l *layer) given(name string, mode int64, body []byte) {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: epoch}
	l.entries[name] = entry{hdr: h, body: body}
}

// addFile adds one -file, with its parent directories where the layer has none.
func (l *layer) addFile(s fileSpec) error {
	fi, err := os.Stat(s.src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("-file %s: not a regular file", s.src)
	}
	name := strings.TrimPrefix(s.dst, "/")
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if _, ok := l.entries[d]; !ok {
			l.dir(d, 0o755)
		}
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: s.mode, Size: fi.Size(), ModTime: epoch}
	if len(s.caps) > 0 {
		c, err := fileCapability(s.caps)
		if err != nil {
			return err
		}
		h.Format = tar.FormatPAX
		h.PAXRecords = map[string]string{capabilityRecord: string(c)}
	}
	l.entries[name] = entry{hdr: h, src: s.src}
	return nil
}

// addTree adds the tree under src, as entries named under dst ("" for the root): directories,
// regular files and symbolic links with their modes (set-id bits too), every entry owned by root.
func (l *layer) addTree(src, dst string) error {
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
		h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		e := entry{hdr: h}
		switch h.Typeflag {
		case tar.TypeDir:
			h.Name = name + "/"
		case tar.TypeSymlink:
			h.Name = name
		case tar.TypeReg:
			h.Name = name
			e.src = p
		default:
			return fmt.Errorf("%s: only directories, regular files and symbolic links", p)
		}
		l.entries[name] = e
		return nil
	})
}

// writeTo writes the layer as an uncompressed tar stream, entries sorted by name: the same
// inputs give the same bytes.
func (l *layer) writeTo(w io.Writer) error {
	names := make([]string, 0, len(l.entries))
	for n := range l.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := l.entries[n]
		if err := tw.WriteHeader(e.hdr); err != nil {
			return err
		}
		if err := e.writeBody(tw); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeBody copies exactly the size the header announced: a source that changed since it
// was listed is an error, not a corrupt layer.
func (e entry) writeBody(w io.Writer) error {
	if e.src == "" {
		_, err := w.Write(e.body)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(w, f, e.hdr.Size); err != nil {
		return fmt.Errorf("%s: %v", e.src, err)
	}
	if n, _ := f.Read(make([]byte, 1)); n != 0 {
		return fmt.Errorf("%s: grew while the layer was written", e.src)
	}
	return nil
}

// open is the layer's tarball.Opener: a fresh tar stream each time the library reads the
// layer (for its diff ID, its compressed form, each output).
func (l *layer) open() (io.ReadCloser, error) {
	r, w := io.Pipe()
	go func() { w.CloseWithError(l.writeTo(w)) }()
	return r, nil
}
