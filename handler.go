package kubetree

import (
	"context"

	"github.com/coredns/coredns/plugin"

	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// ServeDNS implements the plugin.Handler interface.
func (k *Kubetree) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if len(r.Question) != 1 {
		return plugin.NextOrFailure(k.Name(), k.Next, ctx, w, r)
	}
	i := tree.MatchZone(k.Zones, r.Question[0].Name)
	if i < 0 {
		return plugin.NextOrFailure(k.Name(), k.Next, ctx, w, r)
	}
	return k.answer(ctx, w, r, k.zones[i])
}

// Name implements the plugin.Handler interface.
func (k *Kubetree) Name() string { return pluginName }
