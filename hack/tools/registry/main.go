// The node's registry: CNCF Distribution's registry command with the filesystem storage driver
// only. Distribution's own main package also links the Azure, GCS and S3 drivers and their SDKs,
// which a registry serving a node's disk never uses and which were most of its build.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
