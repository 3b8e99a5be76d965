package kubetree

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"

	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/probe"
	"github.com/kubetree/kubetree/internal/query"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// parse reads one kubetree stanza. It only reads: no clients, no goroutines.
func parse(c *caddy.Controller) (*Kubetree, error) {
	var k *Kubetree
	for c.Next() {
		if k != nil {
			return nil, plugin.ErrOnce
		}
		k = &Kubetree{cfg: defaultConfig()}
		if err := k.parseZones(c); err != nil {
			return nil, err
		}
		seen := map[string]int{} // option -> the line it was first given on
		for c.NextBlock() {
			if err := parseOption(c, k, seen); err != nil {
				return nil, err
			}
		}
		if err := k.check(); err != nil {
			return nil, c.Err(err.Error())
		}
	}
	if k == nil {
		return nil, errors.New("no kubetree stanza")
	}
	return k, nil
}

// parseZones reads the stanza's zones: its arguments, else the server block's.
func (k *Kubetree) parseZones(c *caddy.Controller) error {
	k.Zones = plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys)
	for _, z := range k.Zones {
		if z == "." {
			// Every name would be ours, and names such as web.prod.svc.<zone> cannot be formed.
			return c.Errf("cannot serve the root zone; name the cluster zone, such as cluster.local")
		}
		k.zones = append(k.zones, records.ServedZone{Name: z, Reverse: tree.IsReverseZone(z)})
		if !tree.IsReverseZone(z) {
			k.forward = append(k.forward, z)
		}
	}
	if len(k.forward) == 0 {
		return c.Errf("needs a zone that is not a reverse zone, got %v", k.Zones)
	}
	return nil
}

// An option is one line of the stanza: its name, then from least to most arguments (most < 0: any
// number), which parse reads. A second line of the same option is refused, naming both lines,
// unless its lines add up (namespaces, client_subnet_from): otherwise the last line would
// silently win (`isolate refuse`, then `isolate allow`).
type option struct {
	least, most int
	adds        bool
	parse       func(c *caddy.Controller, k *Kubetree, name string, args []string) error
}

// parseOption reads one option of the stanza.
func parseOption(c *caddy.Controller, k *Kubetree, seen map[string]int) error {
	name, line := c.Val(), c.Line()
	o, known := options[name]
	if !known {
		return c.Errf("unknown property '%s'", name)
	}
	if first, again := seen[name]; again && !o.adds {
		return c.Errf("%s is given twice, on line %d and on line %d: give it once", name, first, line)
	}
	seen[name] = line
	args := c.RemainingArgs()
	if len(args) < o.least || o.most >= 0 && len(args) > o.most {
		return c.ArgErr()
	}
	return o.parse(c, k, name, args)
}

const anyNumber = -1

// options are the stanza's options, with the in-tree plugin's name and meaning wherever the
// in-tree plugin has it (docs/differences.md tells them apart).
var options = map[string]option{
	// The API server and how to reach it.
	"endpoint": {least: 1, most: anyNumber, parse: func(_ *caddy.Controller, k *Kubetree, _ string, args []string) error {
		k.cfg.endpoint = args[0] // the in-tree plugin accepts several and uses the first; so do we
		return nil
	}},
	"tls": {least: 3, most: 3, parse: func(_ *caddy.Controller, k *Kubetree, _ string, args []string) error {
		k.cfg.tlsCert, k.cfg.tlsKey, k.cfg.tlsCA = args[0], args[1], args[2]
		return nil
	}},
	"kubeconfig": {least: 1, most: 2, parse: func(_ *caddy.Controller, k *Kubetree, _ string, args []string) error {
		k.cfg.kubeconfig, k.cfg.kubeContext = args[0], strings.Join(args[1:], "") // the context, when given
		return nil
	}},
	"apiserver_qps": oneValue(func(a string) (float32, bool) {
		q, err := strconv.ParseFloat(a, 32)
		return float32(q), err == nil && q >= 0
	}, "a number >= 0", func(c *config, q float32) { c.apiQPS = q }),
	"apiserver_burst":        oneValue(wholeNumber, "a whole number >= 0", func(c *config, n int) { c.apiBurst = n }),
	"apiserver_max_inflight": oneValue(wholeNumber, "a whole number >= 0", func(c *config, n int) { c.apiMaxInflight = n }),

	// Which objects are served.
	"namespaces": {least: 1, most: anyNumber, adds: true, parse: func(_ *caddy.Controller, k *Kubetree, _ string, args []string) error {
		for _, ns := range args {
			k.cfg.namespaces[ns] = true // as in the in-tree plugin, the lines add up
		}
		return nil
	}},
	"namespace_labels":   selectorOption(func(c *config, s *meta.LabelSelector) { c.namespaceSelector = s }),
	"labels":             selectorOption(func(c *config, s *meta.LabelSelector) { c.labelSelector = s }),
	"endpoint_pod_names": flagOption(func(c *config) { c.endpointPodNames = true }),
	"noendpoints":        flagOption(func(c *config) { c.noEndpoints = true }),
	"multicluster": {most: anyNumber, parse: func(_ *caddy.Controller, k *Kubetree, _ string, args []string) error {
		// As in the in-tree plugin, the zones come from the arguments only: without any, the
		// option changes nothing.
		k.cfg.multiclusterZones = plugin.OriginsFromArgsOrServerBlock(args, []string{})
		return nil
	}},

	// How names are answered.
	"pods": {least: 1, most: 1, parse: func(c *caddy.Controller, k *Kubetree, _ string, args []string) error {
		mode, known := podModes[args[0]]
		if !known {
			return c.Errf("wrong value for pods: %s, must be one of: disabled, insecure, verified", args[0])
		}
		k.cfg.podMode = mode
		return nil
	}},
	"ttl":          oneValue(seconds, secondsWanted, func(c *config, t uint32) { c.ttl = t }),
	"negative_ttl": oneValue(seconds, secondsWanted, func(c *config, t uint32) { c.negativeTTL = t }),
	"fallthrough": {most: anyNumber, parse: func(_ *caddy.Controller, k *Kubetree, _ string, args []string) error {
		k.Fall.SetZonesFromArgs(args)
		return nil
	}},
	"ignore": {least: 1, most: 1, parse: func(c *caddy.Controller, k *Kubetree, _ string, args []string) error {
		if args[0] != "empty_service" {
			return c.Errf("unable to parse ignore value: %q (only empty_service is known)", args[0])
		}
		k.cfg.ignoreEmpty = true
		return nil
	}},
	"zonal":               flagOption(func(c *config) { c.zonal = true }),
	"topology":            flagOption(func(c *config) { c.topology = true }),
	"serving_terminating": flagOption(func(c *config) { c.servingTerminating = true }),

	// Who a query's client is, and what it may resolve.
	"client_subnet_from": {least: 1, most: anyNumber, adds: true, parse: parseClientSubnetFrom},
	"isolate":            {least: 1, most: anyNumber, parse: parseIsolate},
	"isolate_labels":     selectorOption(func(c *config, s *meta.LabelSelector) { c.isolateLabels = s }),

	// How the instance runs and is looked into.
	"startup_timeout": oneValue(durationFrom(0), "a non-negative duration such as 5s", func(c *config, d time.Duration) { c.startupTimeout = d }),
	"audit_interval": oneValue(durationFrom(10*time.Second), "0 (no audit) or a duration of at least 10s",
		func(c *config, d time.Duration) { c.auditInterval = d }),
	"probe": {most: 3, parse: parseProbe},
	"explain": {most: 1, parse: func(c *caddy.Controller, k *Kubetree, _ string, args []string) error {
		k.cfg.explain = explainapi.DefaultAddr
		if len(args) == 1 {
			if _, _, err := net.SplitHostPort(args[0]); err != nil {
				return c.Errf("explain ADDRESS must be host:port, such as %s, got %q", explainapi.DefaultAddr, args[0])
			}
			k.cfg.explain = args[0]
		}
		return nil
	}},
}

// The readers of the options' common shapes.

// flagOption is an option without arguments.
func flagOption(set func(*config)) option {
	return option{parse: func(_ *caddy.Controller, k *Kubetree, _ string, _ []string) error {
		set(&k.cfg)
		return nil
	}}
}

// selectorOption is an option whose arguments are one label selector expression.
func selectorOption(set func(*config, *meta.LabelSelector)) option {
	return option{least: 1, most: anyNumber, parse: func(c *caddy.Controller, k *Kubetree, name string, args []string) error {
		expr := strings.Join(args, " ")
		sel, err := meta.ParseToLabelSelector(expr)
		if err != nil {
			return c.Errf("unable to parse %s selector %q: %v", name, expr, err)
		}
		set(&k.cfg, sel)
		return nil
	}}
}

// oneValue is an option of one argument, which read turns into its value, or refuses (want says
// what it must be).
func oneValue[T any](read func(string) (T, bool), want string, set func(*config, T)) option {
	return option{least: 1, most: 1, parse: func(c *caddy.Controller, k *Kubetree, name string, args []string) error {
		v, ok := read(args[0])
		if !ok {
			return c.Errf("%s must be %s, got %q", name, want, args[0])
		}
		set(&k.cfg, v)
		return nil
	}}
}

// The values of options: wholeNumber >= 0; seconds of a TTL, 0 to maxTTL; a duration of at least
// least, or 0.
func wholeNumber(a string) (int, bool) {
	n, err := strconv.Atoi(a)
	return n, err == nil && n >= 0
}

var secondsWanted = fmt.Sprintf("a whole number of seconds in [0, %d]", maxTTL)

func seconds(a string) (uint32, bool) {
	t, err := strconv.Atoi(a)
	return uint32(t), err == nil && t >= 0 && t <= maxTTL
}

func durationFrom(least time.Duration) func(string) (time.Duration, bool) {
	return func(a string) (time.Duration, bool) {
		d, err := time.ParseDuration(a)
		return d, err == nil && (d == 0 || d >= least)
	}
}

// A trusted source broader than an IPv4 /8 or an IPv6 /32 (an allocation to a whole organisation)
// holds pods as well as node-local caches, and any pod among them could name any client it likes.
const minTrustedBits4, minTrustedBits6 = 8, 32

// parseClientSubnetFrom reads client_subnet_from NETWORK...: the sources (node-local caches) whose
// EDNS0 client-subnet option names the client.
func parseClientSubnetFrom(c *caddy.Controller, k *Kubetree, _ string, args []string) error {
	for _, a := range args {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			addr, aerr := netip.ParseAddr(a)
			if aerr != nil {
				return c.Errf("client_subnet_from takes networks such as 169.254.20.10/32, got %q", a)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		least := minTrustedBits6
		if p.Addr().Is4() {
			least = minTrustedBits4
		}
		if p.Bits() < least {
			return c.Errf("client_subnet_from %s is broader than /%d: it holds pods too, and any of them could name any client "+
				"(and read what isolate hides from it); give the addresses the node-local caches send from, such as 10.244.0.1/32", a, least)
		}
		k.cfg.clientSubnetFrom = append(k.cfg.clientSubnetFrom, p.Masked())
	}
	return nil
}

// parseProbe reads the probe option: probe [NAME [INTERVAL [MISSES]]]. Without NAME, the name is
// set once the stanza is read (defaultProbeName).
func parseProbe(c *caddy.Controller, k *Kubetree, _ string, args []string) error {
	p := &probe.Options{Interval: probe.DefaultInterval, Misses: probe.DefaultMisses}
	if len(args) > 0 {
		p.Name = dns.Fqdn(strings.ToLower(args[0]))
		if _, ok := dns.IsDomainName(p.Name); !ok || plugin.Zones(k.Zones).Matches(p.Name) == "" {
			return c.Errf("probe NAME must be a name in the zones of this stanza %v, got %q", k.Zones, args[0])
		}
	}
	if len(args) > 1 {
		d, err := time.ParseDuration(args[1])
		if err != nil || d < probe.MinInterval {
			return c.Errf("probe INTERVAL must be a duration of at least %s, got %q", probe.MinInterval, args[1])
		}
		p.Interval = d
	}
	if len(args) > 2 {
		n, err := strconv.Atoi(args[2])
		if err != nil || n < 1 || n > probe.MaxMisses {
			return c.Errf("probe MISSES must be a whole number in [1, %d], got %q", probe.MaxMisses, args[2])
		}
		p.Misses = int32(n)
	}
	k.cfg.probe = p
	return nil
}

// parseIsolate reads the isolate option: isolate refuse|allow [NAMESPACE...].
func parseIsolate(c *caddy.Controller, k *Kubetree, _ string, args []string) error {
	ic := &query.IsolateOptions{Open: query.DefaultOpenNamespaces}
	switch args[0] {
	case "refuse":
	case "allow":
		ic.AllowUnidentified = true
	default:
		return c.Errf("isolate takes refuse or allow (for clients that are no known pod), then namespaces open to every client; got %q", args[0])
	}
	if len(args) > 1 {
		ic.Open = nil
		for _, ns := range args[1:] {
			ns = strings.ToLower(ns)
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return c.Errf("isolate: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
			}
			if slices.Contains(ic.Open, ns) {
				return c.Errf("isolate: namespace %s is given twice; give it once", ns)
			}
			ic.Open = append(ic.Open, ns)
		}
	}
	k.cfg.isolate = ic
	return nil
}

// check checks the options against each other, once the stanza is read, and sets what follows
// from them.
func (k *Kubetree) check() error {
	c := &k.cfg
	switch {
	case len(c.namespaces) > 0 && c.namespaceSelector != nil:
		return errors.New("namespaces and namespace_labels cannot both be set")
	case len(c.clientSubnetFrom) > 0 && c.podMode != query.PodsVerified:
		return errors.New("client_subnet_from needs pods verified: it names the pod a query comes from")
	case c.topology && c.podMode != query.PodsVerified:
		return errors.New("topology needs pods verified: it answers by the node of the pod a query comes from")
	case c.topology && c.noEndpoints:
		return errors.New("topology needs the endpoints that noendpoints turns off")
	case c.zonal && c.noEndpoints:
		// Zonal names are made of endpoints, which noendpoints does not watch.
		return errors.New("zonal needs the endpoints that noendpoints turns off")
	case c.servingTerminating && c.noEndpoints:
		return errors.New("serving_terminating needs the endpoints that noendpoints turns off")
	case c.isolate == nil && c.isolateLabels != nil:
		return errors.New("isolate_labels needs isolate")
	case c.isolate != nil && c.podMode != query.PodsVerified:
		return errors.New("isolate needs pods verified: it names the pod a query comes from")
	}
	if c.isolate != nil {
		c.isolate.Labels = c.isolateLabels
	}
	if err := k.splitMulticluster(); err != nil {
		return err
	}
	return k.defaultProbeName()
}

// splitMulticluster marks the multicluster zones, which must be zones of the stanza, and leaves the
// others in services: ServiceImports live under the former, Services under the latter.
func (k *Kubetree) splitMulticluster() error {
	for _, mz := range k.cfg.multiclusterZones {
		if !slices.Contains(k.Zones, mz) || tree.IsReverseZone(mz) {
			return fmt.Errorf("multicluster zone %s is not a forward zone of this stanza %v", mz, k.Zones)
		}
	}
	k.svcZones = nil
	for i, z := range k.zones {
		k.zones[i].Multicluster = slices.Contains(k.cfg.multiclusterZones, z.Name)
		if !z.Reverse && !k.zones[i].Multicluster {
			k.svcZones = append(k.svcZones, z.Name)
		}
	}
	return nil
}

// defaultProbeName gives a probe without NAME kubernetes.default.svc.<first zone of services>:
// the Service through which the cluster reaches its API server, kept by the API server itself.
func (k *Kubetree) defaultProbeName() error {
	p := k.cfg.probe
	if p == nil || p.Name != "" {
		return nil
	}
	if len(k.svcZones) == 0 {
		return fmt.Errorf("probe needs a NAME: no zone of this stanza %v serves Services", k.Zones)
	}
	if !k.cfg.allowsNamespace("default") {
		return fmt.Errorf("probe needs a NAME: kubernetes.default is not served with namespaces %v", slices.Sorted(maps.Keys(k.cfg.namespaces)))
	}
	p.Name = "kubernetes.default.svc." + k.svcZones[0]
	return nil
}
