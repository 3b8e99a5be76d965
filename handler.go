package kubetree

import (
	"context"

	"github.com/coredns/coredns/plugin"

	"github.com/miekg/dns"
)

// ServeDNS implements the plugin.Handler interface: a query in our zones is answered (or falls
// through), anything else goes to the next plugin.
func (k *Kubetree) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if len(r.Question) == 1 {
		if z, ok := k.query.ZoneOf(r.Question[0].Name); ok {
			if rcode, next := k.query.Answer(ctx, w, r, z); !next {
				return rcode, nil
			}
		}
	}
	return plugin.NextOrFailure(k.Name(), k.Next, ctx, w, r)
}

// Name implements the plugin.Handler interface.
func (k *Kubetree) Name() string { return pluginName }
