// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at
// the version pinned in this module's go.mod. It exists so that the local
// control plane (hack/cluster.sh) can be built from source with `go build`.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
