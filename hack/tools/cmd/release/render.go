package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// placeholderImage is the image deploy/'s manifests name: the local build, by tag.
const (
	placeholderRepo = "kubetree/coredns"
	placeholderTag  = "latest"
)

var (
	// imageLine is a container's image: line naming the placeholder.
	imageLine = regexp.MustCompile(`^(\s*(?:-\s+)?image:\s*)"?` + regexp.QuoteMeta(placeholderRepo+":"+placeholderTag) + `"?(\s*)$`)
	// The Helm values' image block (deploy/helm/values.yaml): repository and tag, two spaces in.
	valuesRepo = regexp.MustCompile(`^(  repository:\s*)` + regexp.QuoteMeta(placeholderRepo) + `(\s*)$`)
	valuesTag  = regexp.MustCompile(`^(  tag:\s*)"?` + regexp.QuoteMeta(placeholderTag) + `"?(\s*)$`)
)

func renderCommand(args []string) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	image := fs.String("image", "", "REPO@sha256:DIGEST, the pushed image index")
	tag := fs.String("tag", "", "the release's version, kept beside the digest in the Helm values")
	out := fs.String("o", "", "output directory (replaced)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *image == "" || *tag == "" || *out == "" || fs.NArg() != 1 {
		return errors.New("want -image REPO@DIGEST -tag V -o DIR SRC")
	}
	ref, err := name.NewDigest(*image, name.StrictValidation)
	if err != nil {
		return err
	}
	n, err := render(fs.Arg(0), *out, ref, *tag)
	if err != nil {
		return err
	}
	fmt.Printf("%d manifests name %s\n", n, ref)
	return nil
}

// render copies the YAML files under src to out with the placeholder image replaced by ref,
// and returns how many files name it. A line that still names the placeholder's repository
// after that is an image form render does not know: an error, not a manifest left unpinned.
func render(src, out string, ref name.Digest, version string) (int, error) {
	tmp := out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return 0, err
	}
	pinned := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".yaml" {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text, n, err := pin(string(raw), ref, version)
		if err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		if n > 0 {
			pinned++
		}
		dst := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, []byte(text), 0o644)
	})
	if err == nil && pinned == 0 {
		err = fmt.Errorf("no manifest under %s names %s:%s", src, placeholderRepo, placeholderTag)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return 0, err
	}
	if err := os.RemoveAll(out); err != nil {
		return 0, err
	}
	return pinned, os.Rename(tmp, out)
}

// pin rewrites one file's lines: a container's image, or the Helm values' repository and tag
// (the chart writes "repository:tag", so the tag carries the digest: "v0.1.0@sha256:...").
func pin(text string, ref name.Digest, version string) (string, int, error) {
	lines := strings.Split(text, "\n")
	n := 0
	repoBlock := false // inside the top-level block whose repository is the placeholder's
	for i, l := range lines {
		if l != "" && l[0] != ' ' && l[0] != '#' {
			repoBlock = false
		}
		switch {
		case imageLine.MatchString(l):
			lines[i] = imageLine.ReplaceAllString(l, "${1}"+ref.String()+"${2}")
		case valuesRepo.MatchString(l):
			lines[i] = valuesRepo.ReplaceAllString(l, "${1}"+ref.Context().String()+"${2}")
			repoBlock = true
		case repoBlock && valuesTag.MatchString(l):
			lines[i] = valuesTag.ReplaceAllString(l, `${1}"`+version+"@"+ref.DigestStr()+`"${2}`)
		default:
			code, _, _ := strings.Cut(l, "#")
			if strings.Contains(code, placeholderRepo) {
				return "", 0, fmt.Errorf("line %d names %s in a form render does not know: %q", i+1, placeholderRepo, l)
			}
			continue
		}
		n++
	}
	return strings.Join(lines, "\n"), n, nil
}
