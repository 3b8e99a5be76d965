package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestIsolateBehindNodeLocalCache runs deploy/nodelocal/ on loopback, two CoreDNS processes as on
// a node: the cache (configmap.yaml's Corefile) and kubetree behind it (kubetree-configmap.yaml's,
// with isolate and topology on), pods in two closed namespaces and an open one sending their
// queries to the cache from their own addresses. Every answer a pod gets through the cache is the
// one kubetree gives that pod directly, whoever asked the name before: the sequences (a
// pod of ns1 asks its own names first, then a pod of ns2: A, SRV, PTR; a pod of ns2 asks b-dual
// first, then ns1's: AAAA and A) leak nothing to ns2 and poison nothing for ns1, and a
// host-network agent asking a topology-hinted service first leaves the pods their zone's
// endpoints. Then the price: how many queries one lookup through the cache costs kubetree, and
// how long it takes against asking kubetree directly.
func TestIsolateBehindNodeLocalCache(t *testing.T) {
	ns1, ns2, open := newNamespace(t, "nl-iso-1"), newNamespace(t, "nl-iso-2"), newNamespace(t, "nl-iso-open")
	const zoneA, zoneB = "e2e-nl-a", "e2e-nl-b"
	nodeA, nodeB := createNode(t, "nl-iso-a", zoneA), createNode(t, "nl-iso-b", zoneB)
	const pod1, pod2, onA, onB, agent = "127.0.95.1", "127.0.95.2", "127.0.95.3", "127.0.95.4", "127.0.95.9"
	runningPod(t, ns1, "client", nil, pod1)
	runningPod(t, ns2, "client", nil, pod2)
	runningPodOn(t, open, "client-a", nodeA, nil, onA)
	runningPodOn(t, open, "client-b", nodeB, nil, onB)
	web := createService(t, k8stest.ClusterIPService(ns1, "b-web", nil, k8stest.TCP("http", 80)))
	dual := createService(t, k8stest.DualStack(k8stest.ClusterIPService(ns1, "b-dual", nil, k8stest.TCP("http", 80))))
	if len(dual.Spec.ClusterIPs) != 2 {
		t.Fatalf("API server gave no dual-stack service: %v", dual.Spec.ClusterIPs)
	}
	createService(t, k8stest.HeadlessService(open, "db", k8stest.TCP("pg", 5432)))
	applySlice(t, k8stest.Slice(open, "db", "db-v4", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
		k8stest.Endpoint{Addrs: []string{"10.1.95.1"}, Zone: zoneA, Node: nodeA, ForZones: []string{zoneA}},
		k8stest.Endpoint{Addrs: []string{"10.1.95.2"}, Zone: zoneB, Node: nodeB, ForZones: []string{zoneB}}))

	kubetree := startNodeLocalKubetree(t, "isolate refuse "+open, "topology")
	eventually(t, "kubetree ready", 30*time.Second, kubetree.isReady)
	webName, dualName, dbName := svcName(ns1, "b-web"), svcName(ns1, "b-dual"), svcName(open, "db")
	webPTR, _ := dns.ReverseAddr(web.Spec.ClusterIP)
	// Everything known to kubetree before the cache starts, asked directly (from each pod's
	// address: kubetree's own cache bypasses its zones with isolate on).
	for _, w := range []struct{ from, name, want string }{
		{pod1, webName, "NOERROR " + web.Spec.ClusterIP},
		{pod1, dualName, "NOERROR " + dual.Spec.ClusterIPs[0]},
		{onA, dbName, "NOERROR 10.1.95.1"},
		{onB, dbName, "NOERROR 10.1.95.2"},
	} {
		eventually(t, w.name+" from "+w.from+" at kubetree", 30*time.Second, func() bool {
			return replyFrom(t, kubetree, w.from, w.name, dns.TypeA) == w.want
		})
	}
	cache := startNodeLocalCache(t, kubetree.addr)

	// Each question in order, through the cache; may says whether the client may see the name (a
	// wrong answer to one that may not is a leak, to one that may is a poisoned answer).
	type ask struct {
		sequence, from string
		may            bool
		name           string
		qtype          uint16
	}
	var asks []ask
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{webName, dns.TypeA}, {"_http._tcp." + webName, dns.TypeSRV}, {webPTR, dns.TypePTR}} {
		asks = append(asks, ask{"ns1 first", pod1, true, q.name, q.qtype}, ask{"ns1 first", pod2, false, q.name, q.qtype})
	}
	for _, qtype := range []uint16{dns.TypeAAAA, dns.TypeA} {
		asks = append(asks, ask{"ns2 first", pod2, false, dualName, qtype}, ask{"ns2 first", pod1, true, dualName, qtype})
	}
	asks = append(asks, ask{"a host-network agent first", agent, true, dbName, dns.TypeA},
		ask{"a host-network agent first", onA, true, dbName, dns.TypeA}, ask{"a host-network agent first", onB, true, dbName, dns.TypeA})

	var tally isolationTally
	for _, a := range asks {
		got := replyFrom(t, cache, a.from, a.name, a.qtype)
		want := replyFrom(t, kubetree, a.from, a.name, a.qtype)
		if !tally.agree(t, a.from, a.may, a.name, a.qtype, got, want) {
			t.Errorf("%s: %s %s from %s through the cache: %s; kubetree answers it %s", a.sequence, a.name, dns.TypeToString[a.qtype], a.from, got, want)
		}
	}
	report(t, "through deploy/nodelocal/'s cache with isolate and topology: %s", tally)

	// The price: every lookup of a cluster name through the cache reaches kubetree, once (autopath
	// answers the pod's whole search path in that one query).
	const lookups = 200
	latency := func(c *coreDNS) []time.Duration {
		took := make([]time.Duration, lookups)
		for i := range took {
			start := time.Now()
			if got := replyFrom(t, c, pod1, webName, dns.TypeA); got != "NOERROR "+web.Spec.ClusterIP {
				t.Fatalf("%s from the pod in %s: %s", webName, ns1, got)
			}
			took[i] = time.Since(start)
		}
		slices.Sort(took)
		return took
	}
	before := probeMetric(kubetree.scrape(), "coredns_dns_requests_total", "")
	through := latency(cache)
	atKubetree := probeMetric(kubetree.scrape(), "coredns_dns_requests_total", "") - before
	direct := latency(kubetree)
	report(t, "%d lookups of a cluster name through the cache: %v queries at kubetree (%.2f per lookup); latency p50 %v p99 %v through the cache, p50 %v p99 %v asking kubetree directly (%s)",
		lookups, atKubetree, atKubetree/lookups, through[lookups/2], through[lookups*99/100], direct[lookups/2], direct[lookups*99/100], filepath.Base(coreDNSBinary()))
	if atKubetree != lookups {
		t.Errorf("%d lookups through the cache reached kubetree %v times, want each once: the cache keeps no answer of the cluster's zones", lookups, atKubetree)
	}
}

// startNodeLocalKubetree runs kubetree with deploy/nodelocal/kubetree-configmap.yaml's Corefile
// (moved to loopback by startShippedCorefileWith), the options added to its kubetree block, and
// client_subnet_from trusting this machine's cache, whose queries come from 127.0.0.1.
func startNodeLocalKubetree(t *testing.T, options ...string) *coreDNS {
	t.Helper()
	var cm api.ConfigMap
	decodeManifest(t, "deploy/nodelocal/kubetree-configmap.yaml", &cm)
	corefile := cm.Data["Corefile"]
	trusted := regexp.MustCompile(`(?m)^([ \t]*)client_subnet_from [^\n]*$`)
	if !trusted.MatchString(corefile) {
		t.Fatalf("no client_subnet_from in deploy/nodelocal/kubetree-configmap.yaml:\n%s", corefile)
	}
	added := "${1}client_subnet_from 127.0.0.1/32"
	for _, o := range options {
		added += "\n${1}" + o
	}
	return startShippedCorefileWith(t, coreDNSBinary(), trusted.ReplaceAllString(corefile, added), env.vars["KUBECONFIG"])
}

// startNodeLocalCache runs CoreDNS with deploy/nodelocal/configmap.yaml's Corefile, rewritten only
// where it must be to run here: it listens on 127.0.0.1 (for the link-local address) on a free
// port, its health and metrics on loopback ports, it finds kubetree at upstream through the
// kube-dns-upstream Service's environment variable, as on a node, and forwards other names to the
// stub server (for the node's resolver).
func startNodeLocalCache(t *testing.T, upstream string) *coreDNS {
	t.Helper()
	var cm api.ConfigMap
	decodeManifest(t, "deploy/nodelocal/configmap.yaml", &cm)
	ports := freePorts(t, 3)
	c := &coreDNS{addr: ports[0], pprof: ports[1], metrics: ports[2],
		corefile: filepath.Join(t.TempDir(), "Corefile"), out: &syncBuffer{}, done: make(chan struct{})}
	corefile := cm.Data["Corefile"]
	for _, r := range []struct{ from, to string }{
		{":53 {", ":" + port(c.addr) + " {"},
		{"bind " + localDNS, "bind 127.0.0.1"},
		{"health " + localDNS + ":8080", "health " + c.pprof},
		{"prometheus :" + localDNSMetrics, "prometheus " + c.metrics},
		{"forward . /etc/resolv.conf", "forward . " + env.stubDNS},
	} {
		if !strings.Contains(corefile, r.from) {
			t.Fatalf("deploy/nodelocal/configmap.yaml changed shape (no %q); update the test:\n%s", r.from, corefile)
		}
		corefile = strings.ReplaceAll(corefile, r.from, r.to)
	}
	c.run(t, coreDNSBinary(), corefile, "KUBE_DNS_UPSTREAM_SERVICE_HOST="+upstream)
	return c
}

// isolationTally counts what a cache in front of kubetree did to answers made per client: a
// hidden question answered otherwise than kubetree answers it is a leak, a visible one poisoned.
type isolationTally struct{ leaks, poisoned, hidden, visible int }

// agree counts one question asked by who, who may (or may not) see name: got through the cache,
// want from kubetree directly. It fails the test when kubetree itself answers a hidden name.
func (c *isolationTally) agree(t *testing.T, who string, may bool, name string, qtype uint16, got, want string) bool {
	t.Helper()
	if may {
		c.visible++
	} else {
		c.hidden++
		if strings.HasPrefix(want, "NOERROR ") {
			t.Fatalf("kubetree itself answers %s %s to %s, which may not see it: %s", name, dns.TypeToString[qtype], who, want)
		}
	}
	if got == want {
		return true
	}
	if may {
		c.poisoned++
	} else {
		c.leaks++
	}
	return false
}

func (c isolationTally) String() string {
	return fmt.Sprintf("%d leaks of %d hidden questions, %d poisoned answers of %d visible ones", c.leaks, c.hidden, c.poisoned, c.visible)
}
