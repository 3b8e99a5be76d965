// Command release makes the parts of a kubetree release that need a library made for them
// (the Makefile's `release` target runs it; `make release VERSION=vX.Y.Z`):
//
//	release index -o DIR -name REF -version V -revision R LAYOUT...
//	    joins single-platform OCI image layouts (mkimage -platform) into one OCI image index,
//	    written as an OCI layout in DIR, and prints the index's digest
//	release sbom -o FILE -version V BINARY
//	    the CycloneDX SBOM (JSON) of the Go modules compiled into BINARY, read from its build
//	    information by CycloneDX's own Go module tooling
//	release render -image REPO@DIGEST -tag V -o DIR SRC
//	    copies the manifests under SRC (deploy/) to DIR with kubetree's image pinned by digest,
//	    the Helm values too; fails when a manifest names kubetree's image in a form it does not know
//	release push -layout DIR -to REPO:TAG [-ca FILE]
//	    pushes the layout's image index, and the images it holds (or the one image of a layout
//	    mkimage wrote), to a registry, and checks the registry serves it under its digest
//
// It is a module of its own, so that go-containerregistry and the SBOM tooling stay out of the
// pins the node's binaries are built from (as mkimage is).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	commands := map[string]func([]string) error{
		"index":  indexCommand,
		"sbom":   sbomCommand,
		"render": renderCommand,
		"push":   pushCommand,
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		usage()
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "release %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release index|sbom|render|push [flags] (see the package comment)")
	os.Exit(2)
}
