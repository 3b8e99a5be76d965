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
	"sync"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/plugin/pkg/upstream"
	"github.com/coredns/coredns/plugin/transfer"

	"github.com/kubetree/kubetree/internal/apiclient"
	"github.com/kubetree/kubetree/internal/buildinfo"
	"github.com/kubetree/kubetree/internal/explain"
	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/probe"
	"github.com/kubetree/kubetree/internal/query"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() { plugin.Register(pluginName, setup) }

var log = clog.NewWithPlugin(pluginName)

// announce says, once a process, which kubetree this is: in the log, as CoreDNS names its own
// version at start, and as coredns_kubetree_build_info.
var announce = sync.OnceFunc(func() {
	log.Infof("%s, revision %s, built with %s", buildinfo.Version, buildinfo.Revision, buildinfo.GoVersion())
	metrics.Build(buildinfo.Version, buildinfo.Revision, buildinfo.GoVersion())
})

func setup(c *caddy.Controller) error {
	announce()
	k, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	k.upstream = upstream.New()
	k.hostSearch = searchFromResolvConf()
	a := k.newWriteSide(metrics.New(serverLabel(c), strings.Join(k.Zones, ",")))
	w, err := k.newWatcher(a)
	if err != nil {
		k.metrics.Release() // the instance never served: its series go, unless another has them
		return plugin.Error(pluginName, err)
	}
	k.probe = probe.New(k.cfg.probe, k.query, k.metrics)
	var ex *explain.Instance
	var reviews *apiclient.Reviewer
	if k.cfg.explain != "" {
		ex = k.explainInstance(w)
		// For callers off loopback: a client of its own, so that reviews never wait on the
		// watch's rate limiter nor the watch on theirs.
		if reviews, err = k.newReviewer(); err != nil {
			w.Stop() // releases the instance's series too
			a.Close()
			return plugin.Error(pluginName, err)
		}
		ex.Authorize = reviews
	}
	// stop releases everything the instance started, once: in its OnShutdown when a newer instance
	// has taken over (or the server stops), or when it fails to start (startFailed).
	stop := sync.OnceValue(func() error {
		if ex != nil {
			explain.Stop(k.cfg.explain, ex)
			reviews.Close()
		}
		return errors.Join(k.probe.Stop(), w.Stop(), a.Close())
	})
	// Every Corefile reload runs setup again, and starts the new instance before it stops the old.
	c.OnStartup(func() error {
		startFailed.add(stop)
		a.PublishNameserver(localIPs(c))
		if err := w.Start(); err != nil {
			return err
		}
		if t, ok := dnsserver.GetConfig(c).Handler("transfer").(*transfer.Transfer); ok {
			a.EnableTransfer(t.Notify)
		}
		k.probe.Start()
		if ex != nil {
			// Last, once synced (or the startup timeout is over): during a reload the new instance
			// takes the listener over from the old one here.
			_, err := explain.Start(k.cfg.explain, ex)
			return err
		}
		return nil
	})
	c.OnShutdown(stop)
	c.OnRestart(func() error { startFailed.reset(); return nil })
	c.OnRestartFailed(func() error { return startFailed.stopAll() })

	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		k.Next = next
		return k
	})
	return nil
}

// startFailed holds the stop of every instance started during the Corefile reload under way. When
// a reload fails (a port already taken, another plugin's startup failing), caddy runs only the old
// instance's OnRestartFailed, and none of the new instance's OnShutdown: without this, the new
// instance's informers, API connections, self-probe and explain registration would run on beside
// the old one for good, after every failed reload. The old instance's OnRestart empties it as a
// reload begins; its OnRestartFailed stops what the failed reload started.
var startFailed startedInstances

type startedInstances struct {
	mu    sync.Mutex
	stops []func() error
}

func (s *startedInstances) add(stop func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, stop)
}

func (s *startedInstances) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = nil
}

// stopAll stops every instance started since the reload began, and forgets them. With several
// server blocks each one's OnRestartFailed calls it: the first one stops them all.
func (s *startedInstances) stopAll() error {
	s.mu.Lock()
	stops := s.stops
	s.stops = nil
	s.mu.Unlock()
	var errs []error
	for _, stop := range stops {
		errs = append(errs, stop())
	}
	return errors.Join(errs...)
}

// explainInstance is what the explain option reads of k, and of its watcher's stores.
func (k *Kubetree) explainInstance(stores explain.Stores) *explain.Instance {
	return &explain.Instance{Server: k.metrics.Server, Answerer: k.query, Stores: stores, Namespaces: k.cfg.namespaces,
		NamespaceSelector: k.cfg.namespaceSelector, LabelSelector: k.cfg.labelSelector, IgnoreEmpty: k.cfg.ignoreEmpty}
}

// parse reads one kubetree stanza. It only reads: no clients, no goroutines.
func parse(c *caddy.Controller) (*Kubetree, error) {
	var k *Kubetree
	for c.Next() {
		if k != nil {
			return nil, plugin.ErrOnce
		}
		k = &Kubetree{cfg: defaultConfig()}
		k.Zones = plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys)
		for _, z := range k.Zones {
			if z == "." {
				// Every name would be ours, and names such as web.prod.svc.<zone> cannot be formed.
				return nil, c.Errf("cannot serve the root zone; name the cluster zone, such as cluster.local")
			}
			k.zones = append(k.zones, records.ServedZone{Name: z, Reverse: tree.IsReverseZone(z)})
			if !tree.IsReverseZone(z) {
				k.forward = append(k.forward, z)
			}
		}
		if len(k.forward) == 0 {
			return nil, c.Errf("needs a zone that is not a reverse zone, got %v", k.Zones)
		}
		for c.NextBlock() {
			if err := parseOption(c, k); err != nil {
				return nil, err
			}
		}
		if len(k.cfg.namespaces) > 0 && k.cfg.namespaceSelector != nil {
			return nil, c.Errf("namespaces and namespace_labels cannot both be set")
		}
		if len(k.cfg.clientSubnetFrom) > 0 && k.cfg.podMode != query.PodsVerified {
			return nil, c.Errf("client_subnet_from needs pods verified: it names the pod a query comes from")
		}
		if k.cfg.topology && k.cfg.podMode != query.PodsVerified {
			return nil, c.Errf("topology needs pods verified: it answers by the node of the pod a query comes from")
		}
		if k.cfg.topology && k.cfg.noEndpoints {
			return nil, c.Errf("topology needs the endpoints that noendpoints turns off")
		}
		if err := k.cfg.checkIsolate(); err != nil {
			return nil, c.Err(err.Error())
		}
		if k.cfg.zonal && k.cfg.noEndpoints {
			// Zonal names are made of endpoints, which noendpoints does not watch.
			return nil, c.Errf("zonal needs the endpoints that noendpoints turns off")
		}
		if k.cfg.servingTerminating && k.cfg.noEndpoints {
			return nil, c.Errf("serving_terminating needs the endpoints that noendpoints turns off")
		}
		if err := k.splitMulticluster(); err != nil {
			return nil, c.Err(err.Error())
		}
		if err := k.defaultProbeName(); err != nil {
			return nil, c.Err(err.Error())
		}
	}
	if k == nil {
		return nil, errors.New("no kubetree stanza")
	}
	return k, nil
}

// parseOption reads one option of the stanza, with the in-tree plugin's name and meaning wherever
// the in-tree plugin has it.
func parseOption(c *caddy.Controller, k *Kubetree) error {
	name, args := c.Val(), c.RemainingArgs()
	for _, parse := range []func(*caddy.Controller, *Kubetree, string, []string) (bool, error){
		parseAPIOption, parseSelectOption, parseAnswerOption, parseClientOption, parseOperationOption,
	} {
		if known, err := parse(c, k, name, args); known || err != nil {
			return err
		}
	}
	return c.Errf("unknown property '%s'", name)
}

// parseAPIOption reads an option of the API server and how to reach it; known is false for any other option.
func parseAPIOption(c *caddy.Controller, k *Kubetree, name string, args []string) (known bool, err error) {
	cfg := &k.cfg
	switch name {
	case "endpoint":
		// The in-tree plugin accepts several and uses the first; so do we.
		if len(args) == 0 {
			return true, c.ArgErr()
		}
		cfg.endpoint = args[0]
	case "tls":
		if len(args) != 3 {
			return true, c.ArgErr()
		}
		cfg.tlsCert, cfg.tlsKey, cfg.tlsCA = args[0], args[1], args[2]
	case "kubeconfig":
		if len(args) != 1 && len(args) != 2 {
			return true, c.ArgErr()
		}
		cfg.kubeconfig = args[0]
		if len(args) == 2 {
			cfg.kubeContext = args[1]
		}
	case "apiserver_qps":
		if len(args) != 1 {
			return true, c.ArgErr()
		}
		q, err := strconv.ParseFloat(args[0], 32)
		if err != nil || q < 0 {
			return true, c.Errf("apiserver_qps must be a number >= 0, got %q", args[0])
		}
		cfg.apiQPS = float32(q)
	case "apiserver_max_inflight":
		n, err := oneWholeNumber(c, name, args)
		if err != nil {
			return true, err
		}
		cfg.apiMaxInflight = n
	case "apiserver_burst":
		n, err := oneWholeNumber(c, name, args)
		if err != nil {
			return true, err
		}
		cfg.apiBurst = n
	default:
		return false, nil
	}
	return true, nil
}

// parseSelectOption reads an option of which objects are served; known is false for any other option.
func parseSelectOption(c *caddy.Controller, k *Kubetree, name string, args []string) (known bool, err error) {
	cfg := &k.cfg
	switch name {
	case "namespaces":
		if len(args) == 0 {
			return true, c.ArgErr()
		}
		for _, ns := range args {
			cfg.namespaces[ns] = true
		}
	case "namespace_labels", "labels":
		if len(args) == 0 {
			return true, c.ArgErr()
		}
		expr := strings.Join(args, " ")
		sel, err := meta.ParseToLabelSelector(expr)
		if err != nil {
			return true, c.Errf("unable to parse %s selector %q: %v", name, expr, err)
		}
		if name == "labels" {
			cfg.labelSelector = sel
		} else {
			cfg.namespaceSelector = sel
		}
	case "endpoint_pod_names", "noendpoints":
		if len(args) != 0 {
			return true, c.ArgErr()
		}
		if name == "noendpoints" {
			cfg.noEndpoints = true
		} else {
			cfg.endpointPodNames = true
		}
	case "multicluster":
		// As in the in-tree plugin, the zones come from the arguments only: without any, the
		// option changes nothing.
		cfg.multiclusterZones = plugin.OriginsFromArgsOrServerBlock(args, []string{})
	default:
		return false, nil
	}
	return true, nil
}

// parseAnswerOption reads an option of how names are answered; known is false for any other option.
func parseAnswerOption(c *caddy.Controller, k *Kubetree, name string, args []string) (known bool, err error) {
	cfg := &k.cfg
	switch name {
	case "pods":
		if len(args) != 1 {
			return true, c.ArgErr()
		}
		mode, known := podModes[args[0]]
		switch {
		case known:
			cfg.podMode = mode
		default:
			return true, c.Errf("wrong value for pods: %s, must be one of: disabled, insecure, verified", args[0])
		}
	case "ttl":
		t, err := oneTTL(c, name, args)
		if err != nil {
			return true, err
		}
		cfg.ttl = t
	case "negative_ttl":
		t, err := oneTTL(c, name, args)
		if err != nil {
			return true, err
		}
		cfg.negativeTTL = t
	case "fallthrough":
		k.Fall.SetZonesFromArgs(args)
	case "ignore":
		if len(args) != 1 {
			return true, c.ArgErr()
		}
		if args[0] != "empty_service" {
			return true, c.Errf("unable to parse ignore value: %q (only empty_service is known)", args[0])
		}
		cfg.ignoreEmpty = true
	case "zonal", "topology", "serving_terminating":
		if len(args) != 0 {
			return true, c.ArgErr()
		}
		switch name {
		case "zonal":
			cfg.zonal = true
		case "topology":
			cfg.topology = true
		default:
			cfg.servingTerminating = true
		}
	default:
		return false, nil
	}
	return true, nil
}

// parseClientOption reads an option of who a query's client is and what it may resolve; known is
// false for any other option.
func parseClientOption(c *caddy.Controller, k *Kubetree, name string, args []string) (known bool, err error) {
	cfg := &k.cfg
	switch name {
	case "client_subnet_from":
		if len(args) == 0 {
			return true, c.ArgErr()
		}
		for _, a := range args {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				addr, aerr := netip.ParseAddr(a)
				if aerr != nil {
					return true, c.Errf("client_subnet_from takes networks such as 169.254.20.10/32, got %q", a)
				}
				p = netip.PrefixFrom(addr, addr.BitLen())
			}
			cfg.clientSubnetFrom = append(cfg.clientSubnetFrom, p.Masked())
		}
	case "isolate":
		ic, err := parseIsolate(c, args)
		if err != nil {
			return true, err
		}
		cfg.isolate = ic
	case "isolate_labels":
		if len(args) == 0 {
			return true, c.ArgErr()
		}
		expr := strings.Join(args, " ")
		sel, err := meta.ParseToLabelSelector(expr)
		if err != nil {
			return true, c.Errf("unable to parse %s selector %q: %v", name, expr, err)
		}
		cfg.isolateLabels = sel
	default:
		return false, nil
	}
	return true, nil
}

// parseOperationOption reads an option of how the instance runs and is looked into; known is false for any other option.
func parseOperationOption(c *caddy.Controller, k *Kubetree, name string, args []string) (known bool, err error) {
	cfg := &k.cfg
	switch name {
	case "startup_timeout":
		d, err := oneDuration(c, name, args, func(d time.Duration) bool { return d >= 0 }, "a non-negative duration such as 5s")
		if err != nil {
			return true, err
		}
		cfg.startupTimeout = d
	case "audit_interval":
		d, err := oneDuration(c, name, args, func(d time.Duration) bool { return d == 0 || d >= 10*time.Second },
			"0 (no audit) or a duration of at least 10s")
		if err != nil {
			return true, err
		}
		cfg.auditInterval = d
	case "probe":
		p, err := parseProbe(c, k.Zones, args)
		if err != nil {
			return true, err
		}
		cfg.probe = p
	case "explain":
		if len(args) > 1 {
			return true, c.ArgErr()
		}
		cfg.explain = explainapi.DefaultAddr
		if len(args) == 1 {
			if _, _, err := net.SplitHostPort(args[0]); err != nil {
				return true, c.Errf("explain ADDRESS must be host:port, such as %s, got %q", explainapi.DefaultAddr, args[0])
			}
			cfg.explain = args[0]
		}
	default:
		return false, nil
	}
	return true, nil
}

// parseProbe reads the probe option: probe [NAME [INTERVAL [MISSES]]]. Without NAME, the name is
// set once the stanza is read (defaultProbeName).
func parseProbe(c *caddy.Controller, zones []string, args []string) (*probe.Options, error) {
	if len(args) > 3 {
		return nil, c.ArgErr()
	}
	p := &probe.Options{Interval: probe.DefaultInterval, Misses: probe.DefaultMisses}
	if len(args) > 0 {
		p.Name = dns.Fqdn(strings.ToLower(args[0]))
		if _, ok := dns.IsDomainName(p.Name); !ok || plugin.Zones(zones).Matches(p.Name) == "" {
			return nil, c.Errf("probe NAME must be a name in the zones of this stanza %v, got %q", zones, args[0])
		}
	}
	if len(args) > 1 {
		d, err := time.ParseDuration(args[1])
		if err != nil || d < probe.MinInterval {
			return nil, c.Errf("probe INTERVAL must be a duration of at least %s, got %q", probe.MinInterval, args[1])
		}
		p.Interval = d
	}
	if len(args) > 2 {
		n, err := strconv.Atoi(args[2])
		if err != nil || n < 1 || n > probe.MaxMisses {
			return nil, c.Errf("probe MISSES must be a whole number in [1, %d], got %q", probe.MaxMisses, args[2])
		}
		p.Misses = int32(n)
	}
	return p, nil
}

// parseIsolate reads the isolate option: isolate refuse|allow [NAMESPACE...].
func parseIsolate(c *caddy.Controller, args []string) (*query.IsolateOptions, error) {
	if len(args) == 0 {
		return nil, c.ArgErr()
	}
	ic := &query.IsolateOptions{Open: query.DefaultOpenNamespaces}
	switch args[0] {
	case "refuse":
	case "allow":
		ic.AllowUnidentified = true
	default:
		return nil, c.Errf("isolate takes refuse or allow (for clients that are no known pod), then namespaces open to every client; got %q", args[0])
	}
	if len(args) > 1 {
		ic.Open = nil
		for _, ns := range args[1:] {
			ns = strings.ToLower(ns)
			if _, ok := dns.IsDomainName(ns); !ok || strings.Contains(ns, ".") {
				return nil, c.Errf("isolate: %q is not a namespace name", ns)
			}
			ic.Open = append(ic.Open, ns)
		}
	}
	return ic, nil
}

// checkIsolate checks isolate against the rest of the stanza, and gives it isolate_labels.
func (c *config) checkIsolate() error {
	switch {
	case c.isolate == nil && c.isolateLabels != nil:
		return errors.New("isolate_labels needs isolate")
	case c.isolate == nil:
		return nil
	case c.podMode != query.PodsVerified:
		return errors.New("isolate needs pods verified: it names the pod a query comes from")
	}
	c.isolate.Labels = c.isolateLabels
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

// oneTTL reads option name's one argument as a TTL: whole seconds, 0 to maxTTL.
func oneTTL(c *caddy.Controller, name string, args []string) (uint32, error) {
	if len(args) != 1 {
		return 0, c.ArgErr()
	}
	t, err := strconv.Atoi(args[0])
	if err != nil || t < 0 || t > maxTTL {
		return 0, c.Errf("%s must be a whole number of seconds in [0, %d], got %q", name, maxTTL, args[0])
	}
	return uint32(t), nil
}

// oneDuration reads option name's one argument as a duration that valid accepts (want says which).
func oneDuration(c *caddy.Controller, name string, args []string, valid func(time.Duration) bool, want string) (time.Duration, error) {
	if len(args) != 1 {
		return 0, c.ArgErr()
	}
	d, err := time.ParseDuration(args[0])
	if err != nil || !valid(d) {
		return 0, c.Errf("%s must be %s, got %q", name, want, args[0])
	}
	return d, nil
}

// oneWholeNumber reads option name's one argument as a whole number >= 0.
func oneWholeNumber(c *caddy.Controller, name string, args []string) (int, error) {
	if len(args) != 1 {
		return 0, c.ArgErr()
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 0 {
		return 0, c.Errf("%s must be a whole number >= 0, got %q", name, args[0])
	}
	return n, nil
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

// searchFromResolvConf is the host's search path, which autopath tries after the cluster's, as the
// in-tree plugin reads it.
func searchFromResolvConf() []string {
	rc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	plugin.Zones(rc.Search).Normalize()
	return rc.Search
}
