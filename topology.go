package kubetree

import (
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/records"

	"github.com/miekg/dns"
)

// topologyClient is who asks, as topology answers it: the node of the client pod (pods verified,
// or client_subnet_from) and that node's zone. The zero Client, which gets every endpoint, without
// topology and for a client that is no known pod.
func (k *Kubetree) topologyClient(w dns.ResponseWriter, r *dns.Msg) records.Client {
	if k.nodes == nil {
		return records.Client{}
	}
	p := k.clientPod(request.Request{W: w, Req: r})
	if p == nil {
		return records.Client{}
	}
	node := p.Identity.Node()
	return records.Client{Node: node, Zone: k.nodes.Zone(node)}
}
