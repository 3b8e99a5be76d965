package external

import (
	"errors"
	"strconv"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/upstream"
)

func init() { plugin.Register(pluginName, setup) }

// errNoKubetree is why kubetree_external refuses to start in a server block without kubetree.
var errNoKubetree = errors.New("needs kubetree in the same server block")

// defaultTTL is k8s_external's.
const defaultTTL = 5

func setup(c *caddy.Controller) error {
	e, err := Parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	// In OnStartup, once every plugin of the server block has been set up, as k8s_external does.
	c.OnStartup(func() error {
		cluster, ok := dnsserver.GetConfig(c).Handler("kubetree").(Cluster)
		if !ok {
			return plugin.Error(pluginName, errNoKubetree)
		}
		e.Use(cluster, upstream.New())
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		e.Next = next
		return e
	})
	return nil
}

// Parse reads one kubetree_external stanza, with k8s_external's options and defaults. It only
// reads: the External it returns serves once Use has given it a cluster.
func Parse(c *caddy.Controller) (*External, error) {
	var e *External
	for c.Next() {
		if e != nil {
			return nil, plugin.ErrOnce
		}
		e = &External{ttl: defaultTTL, apex: "dns"}
		e.Zones = plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys)
		for c.NextBlock() {
			name := c.Val()
			args := c.RemainingArgs()
			switch name {
			// As in k8s_external, ttl and apex take their first argument and ignore the rest, so
			// that every Corefile it accepts is accepted here.
			case "ttl":
				if len(args) == 0 {
					return nil, c.ArgErr()
				}
				t, err := strconv.Atoi(args[0])
				if err != nil || t < 0 || t > 3600 {
					return nil, c.Errf("ttl must be a whole number of seconds in [0, 3600], got %q", args[0])
				}
				e.ttl = uint32(t)
			case "apex":
				if len(args) == 0 {
					return nil, c.ArgErr()
				}
				e.apex = args[0]
			case "headless":
				if len(args) != 0 {
					return nil, c.ArgErr()
				}
				e.headless = true
			case "fallthrough":
				e.Fall.SetZonesFromArgs(args)
			default:
				return nil, c.Errf("unknown property '%s'", name)
			}
		}
	}
	if e == nil {
		return nil, errors.New("no kubetree_external stanza")
	}
	for _, z := range e.Zones {
		e.nameservers = append(e.nameservers, "ns1."+e.apex+"."+z)
		e.hostmasters = append(e.hostmasters, "hostmaster."+e.apex+"."+z)
	}
	return e, nil
}
