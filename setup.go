package kubetree

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics/vars"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/plugin/pkg/upstream"
	"github.com/coredns/coredns/plugin/transfer"

	"github.com/kubetree/kubetree/internal/apiclient"
	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/buildinfo"
	"github.com/kubetree/kubetree/internal/explain"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/probe"
	"github.com/kubetree/kubetree/internal/watcher"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
	server := dnsserver.GetConfig(c)
	if err := k.cfg.checkExplainBesideDNS(server); err != nil {
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
	// has taken over, after the drain at the final shutdown, or when it fails to start (startFailed).
	stop := sync.OnceValue(func() error {
		k.draining.Store(true)
		if ex != nil {
			explain.Stop(k.cfg.explain, ex)
			reviews.Close()
		}
		return errors.Join(k.probe.Stop(), w.Stop(), a.Close())
	})
	// Every Corefile reload runs setup again, and starts the new instance before it stops the old.
	c.OnStartup(func() error {
		startFailed.add(stop)
		return k.start(localIPs(c), server, a, w, ex)
	})
	k.onShutdowns(c, w, stop)

	server.AddPlugin(func(next plugin.Handler) plugin.Handler {
		k.Next = next
		return k
	})
	return nil
}

// start starts what setup built, in order: the watch, the probe, then explain, last, once synced
// (or the startup timeout is over): during a reload the new instance takes explain's listener
// over from the old one there. The other plugins of the server block are known from here on.
func (k *Kubetree) start(nameservers []net.IP, server *dnsserver.Config, a *applier.Applier, w *watcher.Watcher, ex *explain.Instance) error {
	if err := k.checkBesidePlugins(server); err != nil {
		return plugin.Error(pluginName, err)
	}
	a.PublishNameserver(nameservers)
	if err := w.Start(); err != nil {
		return err
	}
	for _, warning := range k.trustedPods() {
		log.Warning(warning)
	}
	if t, ok := server.Handler("transfer").(*transfer.Transfer); ok {
		a.EnableTransfer(t.Notify)
	}
	k.probe.Start()
	if ex != nil {
		if _, err := explain.Start(k.cfg.explain, ex); err != nil {
			return plugin.Error(pluginName, fmt.Errorf("explain %s: %w", k.cfg.explain, err))
		}
	}
	return nil
}

// onShutdowns registers when the instance stops. A reload runs the old instance's OnRestart, then
// its OnShutdown once the new one serves. At SIGTERM, OnShutdown runs with no OnRestart before
// it (the withdraw), then OnFinalShutdown (ready's /ready fails, health's lameduck, then the
// drain), while this instance still answers: it keeps watching until it stops answering, or it
// would answer SERVFAIL for every absent name (not synced) and miss the Services made meanwhile.
func (k *Kubetree) onShutdowns(c *caddy.Controller, w *watcher.Watcher, stop func() error) {
	var reloading atomic.Bool
	c.OnShutdown(func() error {
		if reloading.Load() {
			return stop()
		}
		// At SIGTERM: ready until kube-proxy has taken the pod out of its rules, so that no new
		// flow is on its way when it deletes the pod's conntrack entries (internal/watcher/drain.go).
		w.Withdraw(watcher.DefaultWithdraw)
		k.draining.Store(true)
		return nil
	})
	// At SIGTERM (not at a reload): answer until kube-proxy lets go of this pod (internal/watcher/drain.go).
	c.OnFinalShutdown(func() error {
		w.Drain(watcher.DefaultDrain, udpQueriesReceived)
		return stop()
	})
	c.OnRestart(func() error { reloading.Store(true); startFailed.reset(); return nil })
	c.OnRestartFailed(func() error { reloading.Store(false); return startFailed.stopAll() })
}

// udpQueriesReceived counts the UDP queries the process's servers have received, as the
// prometheus plugin counts them (coredns_dns_requests_total, which it counts before any other
// plugin sees a query); it stays 0 where no server block has the plugin. The drain waits for
// these alone: only a UDP answer can be lost to a deleted conntrack entry. A TCP connection stays
// with the pod until the server closes it, and a client that keeps one (NodeLocal DNSCache's
// forwarder) asks again on a new connection then; waiting for its queries to stop would last to
// the drain's limit.
func udpQueriesReceived() uint64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { vars.RequestCount.Collect(ch); close(ch) }()
	var total float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil && d.Counter != nil && overUDP(d.Label) {
			total += d.Counter.GetValue()
		}
	}
	return uint64(total)
}

// overUDP reports whether a request counter's labels say its queries came over UDP.
func overUDP(labels []*dto.LabelPair) bool {
	for _, l := range labels {
		if l.GetName() == "proto" {
			return l.GetValue() == "udp"
		}
	}
	return false
}

// checkExplainBesideDNS refuses an explain listener on the server block's own DNS address: the
// DNS listener, opened after explain's, would fail and be blamed.
func (c *config) checkExplainBesideDNS(server *dnsserver.Config) error {
	if c.explain == "" || server.Port == "" {
		return nil
	}
	hosts := server.ListenHosts
	if len(hosts) == 0 {
		hosts = []string{""}
	}
	for _, h := range hosts {
		if sameListener(c.explain, net.JoinHostPort(h, server.Port)) {
			return fmt.Errorf("explain %s: this server block answers DNS on port %s there; give explain a port of its own, such as 127.0.0.1:9155",
				c.explain, server.Port)
		}
	}
	return nil
}

// checkBesidePlugins refuses what the server block's other plugins make unsafe or impossible:
// explain on the prometheus plugin's address (one of the two listeners would fail), and isolate
// beside a transfer plugin that gives kubetree's zones to anyone who asks.
func (k *Kubetree) checkBesidePlugins(server *dnsserver.Config) error {
	if addr := exportedString(server.Handler("prometheus"), "Addr"); k.cfg.explain != "" && sameListener(k.cfg.explain, addr) {
		return fmt.Errorf("explain %s: the prometheus plugin of this server block listens on %s; give explain a port of its own, such as 127.0.0.1:9155",
			k.cfg.explain, addr)
	}
	if t, ok := server.Handler("transfer").(*transfer.Transfer); ok && k.cfg.isolate != nil {
		if zone := transferToAnyone(t, k.Zones); zone != "" {
			return fmt.Errorf("isolate beside transfer %s { to * }: a zone transfer carries every name of %s to anyone who asks, whatever isolate hides; "+
				"name the secondaries in transfer's to (to 10.0.0.53), or leave %s out of transfer", zone, zone, zone)
		}
	}
	return nil
}

// transferToAnyone returns the first of zones that t transfers to anyone (`to *`), or "". The
// transfer plugin keeps its `to` lists unexported; they are read, never written, here.
func transferToAnyone(t *transfer.Transfer, zones []string) string {
	xfrs := reflect.ValueOf(t).Elem().FieldByName("xfrs")
	if !xfrs.IsValid() || xfrs.Kind() != reflect.Slice {
		return ""
	}
	for i := range xfrs.Len() {
		x := xfrs.Index(i)
		if x.Kind() == reflect.Pointer {
			x = x.Elem()
		}
		to, from := x.FieldByName("to"), x.FieldByName("Zones")
		if to.Kind() != reflect.Slice || from.Kind() != reflect.Slice {
			continue
		}
		anyone := false
		for j := range to.Len() {
			anyone = anyone || to.Index(j).String() == "*"
		}
		if !anyone {
			continue
		}
		var transferred plugin.Zones
		for j := range from.Len() {
			transferred = append(transferred, from.Index(j).String())
		}
		for _, z := range zones {
			if transferred.Matches(z) != "" {
				return z
			}
		}
	}
	return ""
}

// exportedString is the string field name of the struct h points to, or "": the prometheus
// plugin's listen address, read without importing the plugin (and its dependencies).
func exportedString(h plugin.Handler, name string) string {
	v := reflect.ValueOf(h)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	f := v.Elem().FieldByName(name)
	if f.Kind() != reflect.String {
		return ""
	}
	return f.String()
}

// sameListener reports whether two TCP listen addresses (host:port) would take the same port:
// the same port, and the same host or one of them every address.
func sameListener(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb {
		return false
	}
	if anyHost(ha) || anyHost(hb) {
		return true
	}
	ia, errA := netip.ParseAddr(ha)
	ib, errB := netip.ParseAddr(hb)
	if errA == nil && errB == nil {
		return ia.Unmap() == ib.Unmap()
	}
	return strings.EqualFold(ha, hb)
}

// anyHost reports whether a listen host means every address.
func anyHost(h string) bool {
	a, err := netip.ParseAddr(h)
	return h == "" || err == nil && a.IsUnspecified()
}

// trustedPods says, once the pods are known, where client_subnet_from trusts the address of a pod:
// that pod can name any client it likes through EDNS0 client-subnet. One warning per network.
func (k *Kubetree) trustedPods() []string {
	if k.pods == nil {
		return nil
	}
	var warnings []string
	for _, p := range k.cfg.clientSubnetFrom {
		n, example := k.pods.PodsIn(p)
		if n == 0 {
			continue
		}
		hides := ""
		if k.cfg.isolate != nil {
			hides = ", and read the names isolate hides from it"
		}
		warnings = append(warnings, fmt.Sprintf("client_subnet_from %s holds the addresses of %d pods (such as %s): any of them can name any other client%s; "+
			"give client_subnet_from the addresses the node-local caches send from only", p, n, example, hides))
	}
	return warnings
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
