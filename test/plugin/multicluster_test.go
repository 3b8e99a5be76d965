package plugin_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
)

const multiclusterStanza = `kubetree cluster.local clusterset.local 10.in-addr.arpa {
	ttl 10
	multicluster clusterset.local
}`

// slimImport takes a ServiceImport and its slices through the informers' transforms.
func slimImport(t testing.TB, si *mcs.ServiceImport, sls ...*discovery.EndpointSlice) (*object.StoredService, []*object.StoredSlice) {
	t.Helper()
	obj, err := object.SlimServiceImport(si)
	if err != nil {
		t.Fatal(err)
	}
	var out []*object.StoredSlice
	for _, sl := range sls {
		o, err := object.SliceTransform(object.SliceOptions{Multicluster: true})(sl)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*object.StoredSlice))
	}
	return obj.(*object.StoredService), out
}

// TestMulticlusterNames answers clusterset.local from ServiceImports as the in-tree plugin's
// multiclusterDnsTestCases do: a ClusterSetIP import by its IPs and SRV, a headless import by every
// endpoint and by <hostname>.<cluster>; and Services stay out of the multicluster zone, as imports
// stay out of the cluster zone.
func TestMulticlusterNames(t *testing.T) {
	k, a := plugintest.Wired(t, multiclusterStanza)
	k.SyncedFlag.Store(true)
	http := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	a.ApplyNamespace("prod", true)
	svc, svcSlices := plugintest.Slim(t, k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10"}, k8stest.TCP("http", 80)), nil, false)
	a.ApplyService(svc.Key(), svc, svcSlices, true)
	for _, imp := range []struct {
		si  *mcs.ServiceImport
		sls []*discovery.EndpointSlice
	}{
		{k8stest.ServiceImport("prod", "web", mcs.ClusterSetIP, []string{"10.97.0.10"}, mcs.ServicePort{Name: "http", Protocol: api.ProtocolTCP, Port: 80}),
			[]*discovery.EndpointSlice{k8stest.ImportSlice("prod", "web", "east", "web-east", discovery.AddressTypeIPv4, http, k8stest.Endpoint{Addrs: []string{"10.1.0.1"}})}},
		{k8stest.ServiceImport("prod", "db", mcs.Headless, nil, mcs.ServicePort{Name: "http", Protocol: api.ProtocolTCP, Port: 80}),
			[]*discovery.EndpointSlice{
				k8stest.ImportSlice("prod", "db", "east", "db-east", discovery.AddressTypeIPv4, http,
					k8stest.Endpoint{Addrs: []string{"10.1.0.2"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.1.0.3"}},
					k8stest.Endpoint{Addrs: []string{"10.1.0.9"}, NotReady: true}),
				k8stest.ImportSlice("prod", "db", "west", "db-west", discovery.AddressTypeIPv4, http,
					k8stest.Endpoint{Addrs: []string{"10.2.0.2"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.2.0.3"}, Hostname: "dup"},
					k8stest.Endpoint{Addrs: []string{"10.2.0.4"}, Hostname: "dup"}),
				k8stest.ImportSlice("prod", "db", "west", "db-west-v6", discovery.AddressTypeIPv6, http, k8stest.Endpoint{Addrs: []string{"fd00::1"}}),
				// No source cluster: its endpoints could not be named, so it is left out.
				k8stest.ImportSlice("prod", "db", "", "db-nowhere", discovery.AddressTypeIPv4, http, k8stest.Endpoint{Addrs: []string{"10.3.0.1"}}),
			}},
	} {
		si, sls := slimImport(t, imp.si, imp.sls...)
		a.ApplyImport(si.Key(), si, sls, true)
	}

	const (
		cs  = "clusterset.local."
		web = "web.prod.svc." + cs
		db  = "db.prod.svc." + cs
	)
	nxdomain := func(rule, qname string, qtype uint16) plugintest.Case {
		return plugintest.Case{Rule: rule, Case: test.Case{Qname: qname, Qtype: qtype, Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA(cs)}}}
	}
	nodata := func(rule, qname string, qtype uint16) plugintest.Case {
		return plugintest.Case{Rule: rule, Case: test.Case{Qname: qname, Qtype: qtype, Ns: []dns.RR{plugintest.SOA(cs)}}}
	}
	dbA := func(owner string) []dns.RR {
		var rrs []dns.RR
		for _, ip := range []string{"10.1.0.2", "10.1.0.3", "10.2.0.2", "10.2.0.3", "10.2.0.4"} {
			rrs = append(rrs, test.A(owner+" 10 IN A "+ip))
		}
		return rrs
	}
	targets := []string{"db-0.east", "10-1-0-3.east", "db-0.west", "dup.west", "fd00--1.west"}
	dbSRV := func(owner string) []dns.RR {
		var rrs []dns.RR
		for _, target := range targets {
			rrs = append(rrs, test.SRV(fmt.Sprintf("%s 10 IN SRV 0 20 80 %s.%s", owner, target, db)))
		}
		return rrs
	}
	dbExtra := []dns.RR{
		test.A("db-0.east." + db + " 10 IN A 10.1.0.2"), test.A("10-1-0-3.east." + db + " 10 IN A 10.1.0.3"),
		test.A("db-0.west." + db + " 10 IN A 10.2.0.2"), test.A("dup.west." + db + " 10 IN A 10.2.0.3"),
		test.A("dup.west." + db + " 10 IN A 10.2.0.4"), test.AAAA("fd00--1.west." + db + " 10 IN AAAA fd00::1"),
	}
	plugintest.RunCases(t, k, []plugintest.Case{
		{Rule: "ClusterSetIP import A", Case: test.Case{Qname: web, Qtype: dns.TypeA, Answer: []dns.RR{test.A(web + " 10 IN A 10.97.0.10")}}},
		{Rule: "the Service of the same name keeps its cluster IP in the cluster zone", Case: test.Case{Qname: "web.prod.svc.cluster.local.",
			Qtype: dns.TypeA, Answer: []dns.RR{test.A("web.prod.svc.cluster.local. 10 IN A 10.96.0.10")}}},
		nxdomain("a Service without an import has no multicluster name", "nothere.prod.svc."+cs, dns.TypeA),
		{Rule: "an import has no name in the cluster zone", Case: test.Case{Qname: "db.prod.svc.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{plugintest.SOA("cluster.local.")}}},
		{Rule: "ClusterSetIP import SRV", Case: test.Case{Qname: "_http._tcp." + web, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_http._tcp." + web + " 10 IN SRV 0 100 80 " + web)},
			Extra:  []dns.RR{test.A(web + " 10 IN A 10.97.0.10")}}},
		{Rule: "endpoint of a ClusterSetIP import by <address>.<cluster>", Case: test.Case{Qname: "10-1-0-1.east." + web, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("10-1-0-1.east." + web + " 10 IN A 10.1.0.1")}}},
		{Rule: "headless import A: every ready endpoint of every cluster", Case: test.Case{Qname: db, Qtype: dns.TypeA, Answer: dbA(db)}},
		{Rule: "headless import AAAA", Case: test.Case{Qname: db, Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA(db + " 10 IN AAAA fd00::1")}}},
		{Rule: "headless import SRV: one target per endpoint, named in its cluster", Case: test.Case{Qname: "_http._tcp." + db,
			Qtype: dns.TypeSRV, Answer: dbSRV("_http._tcp." + db), Extra: dbExtra}},
		{Rule: "headless import SRV at its own name", Case: test.Case{Qname: db, Qtype: dns.TypeSRV, Answer: dbSRV(db), Extra: dbExtra}},
		{Rule: "hostname in one cluster", Case: test.Case{Qname: "db-0.west." + db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("db-0.west." + db + " 10 IN A 10.2.0.2")}}},
		{Rule: "a hostname with two addresses", Case: test.Case{Qname: "dup.west." + db, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("dup.west." + db + " 10 IN A 10.2.0.3"), test.A("dup.west." + db + " 10 IN A 10.2.0.4")}}},
		{Rule: "dashed IPv6 address in a cluster, in upper case", Case: test.Case{Qname: "FD00--1.West.db.prod.svc.clusterset.local.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("FD00--1.West.db.prod.svc.clusterset.local. 10 IN AAAA fd00::1")}}},
		{Rule: "SRV at an endpoint's name", Case: test.Case{Qname: "db-0.east." + db, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("db-0.east." + db + " 10 IN SRV 0 100 80 db-0.east." + db)},
			Extra:  []dns.RR{test.A("db-0.east." + db + " 10 IN A 10.1.0.2")}}},
		nxdomain("a hostname without its cluster names nothing", "db-0."+db, dns.TypeA),
		nxdomain("a hostname in another cluster", "dup.east."+db, dns.TypeA),
		nxdomain("a not-ready endpoint", "10-1-0-9.east."+db, dns.TypeA),
		nxdomain("an endpoint of a slice without a source cluster", "10-3-0-1.east."+db, dns.TypeA),
		nodata("<cluster>.<import> is an empty non-terminal", "west."+db, dns.TypeA),
		nodata("the namespace exists in the multicluster zone", "prod.svc."+cs, dns.TypeA),
		{Rule: "dns-version in the multicluster zone", Case: test.Case{Qname: "dns-version." + cs, Qtype: dns.TypeTXT,
			Answer: []dns.RR{test.TXT("dns-version." + cs + " 28800 IN TXT 1.1.0")}}},
		{Rule: "no PTR for a ClusterSetIP", Case: test.Case{Qname: "10.0.97.10.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: dns.RcodeNameError,
			Ns: []dns.RR{plugintest.SOA("10.in-addr.arpa.")}}},
	})

	// Gone: the import's names leave with it, the Service's stay.
	a.ApplyImport("prod/web", nil, nil, true)
	plugintest.Expect(t, k, web, dns.TypeA, dns.RcodeNameError)
	plugintest.Expect(t, k, "web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, "web.prod.svc.cluster.local. 10 IN A 10.96.0.10")
}

// TestMulticlusterWatch follows ServiceImports and their slices through the watcher: created, an
// endpoint added, deleted; and no ServiceImport informer without the option.
func TestMulticlusterWatch(t *testing.T) {
	k, ap := plugintest.Wired(t, multiclusterStanza)
	a := k8stest.NewFakeAPI(k8stest.Namespace("prod"))
	imports := mcsfake.NewSimpleClientset()
	w := plugintest.WatcherFor(t, k, ap, a.Client, k8stest.TrackerVersions(a.Client.Tracker(), imports.Tracker()).Client(), imports.MulticlusterV1alpha1())
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	plugintest.WaitFor(t, "sync", k.Ready)

	ctx := context.Background()
	http := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	db := k8stest.ServiceImport("prod", "db", mcs.Headless, nil, mcs.ServicePort{Name: "http", Protocol: api.ProtocolTCP, Port: 80})
	if _, err := imports.MulticlusterV1alpha1().ServiceImports("prod").Create(ctx, db, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sl := k8stest.ImportSlice("prod", "db", "east", "db-east", discovery.AddressTypeIPv4, http, k8stest.Endpoint{Addrs: []string{"10.1.0.2"}, Hostname: "db-0"})
	if _, err := a.Client.DiscoveryV1().EndpointSlices("prod").Create(ctx, sl, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	answers := func(name, ip string) func() bool {
		return func() bool {
			code, answer := plugintest.Ask(t, k, name, dns.TypeA)
			return code == dns.RcodeSuccess && len(answer) == 1 && strings.HasSuffix(answer[0], "\t"+ip)
		}
	}
	plugintest.WaitFor(t, "the import's endpoint", answers("db-0.east.db.prod.svc.clusterset.local.", "10.1.0.2"))
	sl.Endpoints = append(sl.Endpoints, k8stest.Slice("", "", "", "", nil, k8stest.Endpoint{Addrs: []string{"10.1.0.3"}, Hostname: "db-1"}).Endpoints...)
	if _, err := a.Client.DiscoveryV1().EndpointSlices("prod").Update(ctx, sl, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	plugintest.WaitFor(t, "an added endpoint", answers("db-1.east.db.prod.svc.clusterset.local.", "10.1.0.3"))
	plugintest.Expect(t, k, "db-1.db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError)
	if err := imports.MulticlusterV1alpha1().ServiceImports("prod").Delete(ctx, "db", meta.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	plugintest.WaitFor(t, "the import gone", func() bool {
		code, _ := plugintest.Ask(t, k, "db.prod.svc.clusterset.local.", dns.TypeA)
		return code == dns.RcodeNameError
	})

	// Without the option: no ServiceImport informer, and no client needed.
	k2, ap2 := plugintest.Wired(t, plugintest.Zones)
	a2 := k8stest.NewFakeAPI()
	w2 := plugintest.WatcherFor(t, k2, ap2, a2.Client, a2.Versions.Client(), nil)
	if watched := slices.Sorted(maps.Keys(w2.Versions())); !slices.Equal(watched, []string{"endpointslices", "namespaces", "services"}) {
		t.Errorf("without multicluster, %q are watched; want endpointslices, namespaces, services", watched)
	}
}

// TestMulticlusterMetadata: in a multicluster zone the metadata names the cluster of
// <endpoint>.<cluster>.<svc>, as the in-tree plugin's kubernetes/cluster; other zones have no such key.
func TestMulticlusterMetadata(t *testing.T) {
	k, _ := plugintest.Wired(t, multiclusterStanza)
	for _, tc := range []struct {
		name string
		want map[string]string
	}{
		{"db-0.east.db.prod.svc.clusterset.local.", map[string]string{"kubetree/port-name": "", "kubetree/protocol": "",
			"kubetree/endpoint": "db-0", "kubetree/cluster": "east", "kubetree/service": "db", "kubetree/namespace": "prod", "kubetree/kind": "svc"}},
		{"_http._tcp.db.prod.svc.clusterset.local.", map[string]string{"kubetree/port-name": "http", "kubetree/protocol": "tcp",
			"kubetree/endpoint": "", "kubetree/cluster": "", "kubetree/service": "db", "kubetree/namespace": "prod", "kubetree/kind": "svc"}},
		{"http.tcp.db.prod.svc.cluster.local.", map[string]string{"kubetree/port-name": "http", "kubetree/protocol": "tcp",
			"kubetree/endpoint": "", "kubetree/service": "db", "kubetree/namespace": "prod", "kubetree/kind": "svc"}},
	} {
		ctx := metadata.ContextWithMetadata(context.Background())
		ctx = k.Metadata(ctx, plugintest.From("10.9.9.9", tc.name, nil))
		got := map[string]string{}
		for _, label := range metadata.Labels(ctx) {
			got[label] = metadata.ValueFunc(ctx, label)()
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: metadata %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMulticlusterOnly: a stanza whose only forward zone is a multicluster zone serves imports and
// no services; with ignore empty_service a ClusterSetIP import without endpoints has no name, as a
// ClusterIP service's.
func TestMulticlusterOnly(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree clusterset.local 10.in-addr.arpa {\n ignore empty_service\n multicluster clusterset.local\n}")
	k.SyncedFlag.Store(true)
	a.ApplyNamespace("prod", true)
	svc, _ := plugintest.Slim(t, k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10"}, k8stest.TCP("http", 80)), nil, false)
	a.ApplyService(svc.Key(), svc, nil, true)
	http := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	for _, imp := range []struct {
		si  *mcs.ServiceImport
		sls []*discovery.EndpointSlice
	}{
		{k8stest.ServiceImport("prod", "web", mcs.ClusterSetIP, []string{"10.97.0.10"}, mcs.ServicePort{Name: "http", Protocol: api.ProtocolTCP, Port: 80}),
			[]*discovery.EndpointSlice{k8stest.ImportSlice("prod", "web", "east", "web-east", discovery.AddressTypeIPv4, http, k8stest.Endpoint{Addrs: []string{"10.1.0.1"}})}},
		{k8stest.ServiceImport("prod", "idle", mcs.ClusterSetIP, []string{"10.97.0.11"}), nil},
	} {
		si, sls := slimImport(t, imp.si, imp.sls...)
		a.ApplyImport(si.Key(), si, sls, true)
	}
	plugintest.Expect(t, k, "web.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, "web.prod.svc.clusterset.local. 5 IN A 10.97.0.10")
	plugintest.Expect(t, k, "idle.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError)
	plugintest.Expect(t, k, "10.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError)
}
