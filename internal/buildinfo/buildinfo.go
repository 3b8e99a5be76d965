// Package buildinfo is what a binary says of the kubetree it was built from: its version and
// revision, stamped at build time (the Makefile's -ldflags -X; hack/version.sh), and the Go that
// compiled it. A build without the stamp says v0.0.0-dev and unknown.
package buildinfo

import "runtime"

// Set with -ldflags "-X github.com/kubetree/kubetree/internal/buildinfo.Version=... -X ...Revision=...".
var (
	// Version is the release (semantic versioning: vMAJOR.MINOR.PATCH), or the next one with
	// -dev between releases.
	Version = "v0.0.0-dev"
	// Revision is the commit, with -dirty when the tree had uncommitted changes.
	Revision = "unknown"
)

// GoVersion is the Go release the binary was compiled with.
func GoVersion() string { return runtime.Version() }
