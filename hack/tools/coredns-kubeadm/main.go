// Command coredns-kubeadm is CoreDNS at the version kubeadm pins, with the plugins kubeadm's
// Corefile names and those the cluster's stand-in upstream uses: the image of kubeadm's CoreDNS
// addon (hack/cluster.mk) and the upstream (hack/kubeadm-cluster.sh). The plugins that reach a cloud
// or a backend no test runs (route53, azure, clouddns, etcd, nomad, trace, ...) are left out: they
// are most of what a full build compiles, and CoreDNS's plugin order does not depend on them.
package main

import (
	"github.com/coredns/coredns/coremain"

	// kubeadm's Corefile (cmd/kubeadm/app/phases/addons/dns).
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	// The stand-in upstream, and what an operator adds to read its logs.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
