// Package repo holds the checks of the repository as a whole: every figure of the docs against its
// source (docs_test.go), and the layers' imports (layers_test.go). They read the repository's files
// from its root.
package repo

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if err := os.Chdir("../.."); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
