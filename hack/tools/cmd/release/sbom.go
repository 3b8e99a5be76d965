package main

import (
	"debug/buildinfo"
	"errors"
	"flag"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/generate/bin"
	"github.com/package-url/packageurl-go"
	"github.com/rs/zerolog"
)

func sbomCommand(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	out := fs.String("o", "", "output file (CycloneDX JSON)")
	version := fs.String("version", "", "the main module's version (a release build's is not in its build information)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() != 1 {
		return errors.New("want -o FILE BINARY")
	}
	bom, err := binarySBOM(fs.Arg(0), *version)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	err = cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// binarySBOM is the CycloneDX bill of materials of the Go modules compiled into the binary at
// path, the standard library among them (a scanner matches Go's own CVEs against it), as
// cyclonedx-gomod's "bin" mode makes it.
func binarySBOM(path, version string) (*cdx.BOM, error) {
	// Warnings and errors only: its debug lines (a line per module) are no one's business.
	logger := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.WarnLevel)
	opts := []bin.Option{bin.WithIncludeStdlib(true), bin.WithLogger(logger)}
	if version != "" {
		opts = append(opts, bin.WithVersionOverride(version))
	}
	g, err := bin.NewGenerator(path, opts...)
	if err != nil {
		return nil, err
	}
	bom, err := g.Generate()
	if err != nil {
		return nil, err
	}
	return bom, addLocalModules(bom, path, version)
}

// addLocalModules names the modules the build replaced by a directory (cmd/coredns takes the
// plugin's module from ../..) by their module path: cyclonedx-gomod lists such a module under the
// directory ("../..@(devel)"), which no scanner can match. Such a module is this repository's
// own, so its version is the release's.
func addLocalModules(bom *cdx.BOM, path, version string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return err
	}
	if bom.Components == nil {
		bom.Components = &[]cdx.Component{}
	}
	for _, d := range info.Deps {
		if d.Replace == nil || !(strings.HasPrefix(d.Replace.Path, ".") || filepath.IsAbs(d.Replace.Path)) {
			continue
		}
		v := version
		if v == "" {
			v = d.Version
		}
		// As cyclonedx-gomod writes the others': the reference with the module's type, the
		// package URL with the binary's platform too.
		ref := packageURL(d.Path, v, nil)
		purl := packageURL(d.Path, v, platformOf(info))
		named := cdx.Component{
			BOMRef:     ref,
			Type:       cdx.ComponentTypeLibrary,
			Name:       d.Path,
			Version:    v,
			PackageURL: purl,
			Scope:      cdx.ScopeRequired,
			Properties: &[]cdx.Property{{Name: "cdx:gomod:build:replaced-by", Value: d.Replace.Path}},
		}
		found := false
		for i, c := range *bom.Components {
			if c.Name == d.Replace.Path || c.Name == d.Path {
				renameRef(bom, c.BOMRef, ref)
				(*bom.Components)[i] = named
				found = true
			}
		}
		if !found {
			*bom.Components = append(*bom.Components, named)
		}
	}
	return nil
}

// renameRef makes the dependency graph and the compositions name to where they name from.
func renameRef(bom *cdx.BOM, from, to string) {
	if bom.Dependencies != nil {
		for i, d := range *bom.Dependencies {
			if d.Ref == from {
				(*bom.Dependencies)[i].Ref = to
			}
			if d.Dependencies != nil {
				for j, r := range *d.Dependencies {
					if r == from {
						(*d.Dependencies)[j] = to
					}
				}
			}
		}
	}
	if bom.Compositions != nil {
		for _, c := range *bom.Compositions {
			for _, refs := range []*[]cdx.BOMReference{c.Assemblies, c.Dependencies} {
				if refs == nil {
					continue
				}
				for j, r := range *refs {
					if string(r) == from {
						(*refs)[j] = cdx.BOMReference(to)
					}
				}
			}
		}
	}
}

// packageURL is a Go module's package URL (pkg:golang/NAMESPACE/NAME@VERSION?QUALIFIERS).
func packageURL(module, version string, platform packageurl.Qualifiers) string {
	q := append(platform, packageurl.Qualifier{Key: "type", Value: "module"})
	return packageurl.NewPackageURL(packageurl.TypeGolang, path.Dir(module), path.Base(module), version, q, "").ToString()
}

// platformOf is the binary's GOARCH and GOOS as package URL qualifiers.
func platformOf(info *debug.BuildInfo) packageurl.Qualifiers {
	var q packageurl.Qualifiers
	for _, key := range []string{"GOARCH", "GOOS"} {
		for _, s := range info.Settings {
			if s.Key == key {
				q = append(q, packageurl.Qualifier{Key: strings.ToLower(key), Value: s.Value})
			}
		}
	}
	return q
}
