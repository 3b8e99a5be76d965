package main

import (
	"errors"
	"flag"
	"os"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/generate/bin"
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
	return g.Generate()
}
