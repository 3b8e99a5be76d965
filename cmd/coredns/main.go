// Command coredns is CoreDNS with every standard plugin and kubetree, which runs in the slot of the
// in-tree kubernetes plugin: after cache, before forward; kubetree_external runs in k8s_external's.
package main

import (
	_ "github.com/coredns/coredns/core/plugin" // every standard plugin, kubernetes included
	"github.com/coredns/coredns/coremain"

	_ "github.com/kubetree/kubetree/cmd/coredns/internal/slot"
)

func main() {
	coremain.Run()
}
