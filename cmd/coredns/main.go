// Command coredns is CoreDNS with every standard plugin and kubetree, which runs in the slot of the
// in-tree kubernetes plugin: after cache, before forward; kubetree_external runs in k8s_external's.
package main

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every standard plugin, kubernetes included
	"github.com/coredns/coredns/coremain"

	_ "github.com/kubetree/kubetree"
	_ "github.com/kubetree/kubetree/external"
)

func init() {
	at := slices.Index(dnsserver.Directives, "kubernetes")
	dnsserver.Directives = slices.Insert(dnsserver.Directives, at, "kubetree")
	at = slices.Index(dnsserver.Directives, "k8s_external")
	dnsserver.Directives = slices.Insert(dnsserver.Directives, at, "kubetree_external")
}

func main() {
	coremain.Run()
}
