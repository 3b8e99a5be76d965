// Package slot puts kubetree's directives in the slots of the in-tree plugins they replace:
// kubetree before kubernetes (after cache, before forward), kubetree_external before k8s_external.
// Every CoreDNS main of this module imports it.
package slot

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"

	_ "github.com/kubetree/kubetree"          // registers kubetree
	_ "github.com/kubetree/kubetree/external" // registers kubetree_external
)

func init() {
	at := slices.Index(dnsserver.Directives, "kubernetes")
	dnsserver.Directives = slices.Insert(dnsserver.Directives, at, "kubetree")
	at = slices.Index(dnsserver.Directives, "k8s_external")
	dnsserver.Directives = slices.Insert(dnsserver.Directives, at, "kubetree_external")
}
