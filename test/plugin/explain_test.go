package plugin_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kubetree/kubetree/internal/explain"
	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// explainCase is one name asked of the explain endpoint, and what it must say: the reply's rcode
// and answer (as ServeDNS gives them), the reason, and the objects the records came from, each as
// kind/namespace/name.
type explainCase struct {
	rule     string
	name     string
	qtype    uint16
	rcode    string
	answer   []string
	reason   string
	from     []string
	problem  string // a text the problems must hold
	whyHolds string // a text the why must hold
}

func explainerOf(c *plugintest.Cluster) *explain.Explainer {
	return explain.New(c.Explain(c.W))
}

func checkExplain(t *testing.T, c *plugintest.Cluster, tc explainCase) {
	t.Helper()
	qtype := tc.qtype
	if qtype == 0 {
		qtype = dns.TypeA
	}
	x := explainerOf(c).Explain(context.Background(), tc.name, qtype, explainapi.DefaultClient)
	if x.Reason != tc.reason {
		t.Errorf("%s: reason %q (%s), want %q", tc.rule, x.Reason, x.Why, tc.reason)
	}
	if x.Rcode != tc.rcode {
		t.Errorf("%s: rcode %q, want %q", tc.rule, x.Rcode, tc.rcode)
	}
	// The answer is ServeDNS's own: the explanation must show exactly what a client gets.
	if tc.rcode != "" {
		rcode, answer := plugintest.Ask(t, c.Plugin, strings.ToLower(dns.Fqdn(tc.name)), qtype)
		if dns.RcodeToString[rcode] != x.Rcode || !slices.Equal(answer, plugintest.ZoneText(plugintest.ParseRRs(t, x.Answer...))) {
			t.Errorf("%s: explained %s %v, ServeDNS answers %s %v", tc.rule, x.Rcode, x.Answer, dns.RcodeToString[rcode], answer)
		}
	}
	if got := plugintest.ZoneText(plugintest.ParseRRs(t, x.Answer...)); !slices.Equal(got, plugintest.ZoneText(plugintest.ParseRRs(t, tc.answer...))) {
		t.Errorf("%s: answer %v, want %v", tc.rule, got, tc.answer)
	}
	var from []string
	for _, o := range x.From {
		from = append(from, o.Kind+"/"+o.Namespace+"/"+o.Name)
		if o.ResourceVersion != apiVersion(t, c, o) {
			t.Errorf("%s: %s/%s/%s at version %q, the API server has %q", tc.rule, o.Kind, o.Namespace, o.Name, o.ResourceVersion, apiVersion(t, c, o))
		}
	}
	if !slices.Equal(from, tc.from) {
		t.Errorf("%s: from %v, want %v", tc.rule, from, tc.from)
	}
	if tc.problem != "" && !slices.ContainsFunc(x.Problems, func(p explainapi.Problem) bool { return strings.Contains(p.Text, tc.problem) }) {
		t.Errorf("%s: problems %+v, want one saying %q", tc.rule, x.Problems, tc.problem)
	}
	if tc.problem == "" && len(x.Problems) > 0 {
		t.Errorf("%s: problems %+v, want none", tc.rule, x.Problems)
	}
	if !strings.Contains(x.Why, tc.whyHolds) {
		t.Errorf("%s: why %q, want it to say %q", tc.rule, x.Why, tc.whyHolds)
	}
}

// apiVersion is the resourceVersion the fake API server holds of an explained object.
func apiVersion(t *testing.T, c *plugintest.Cluster, o explainapi.Object) string {
	t.Helper()
	ctx := context.Background()
	var m meta.Object
	var err error
	switch o.Kind {
	case "Service":
		m, err = c.API.Client.CoreV1().Services(o.Namespace).Get(ctx, o.Name, meta.GetOptions{})
	case "EndpointSlice":
		m, err = c.API.Client.DiscoveryV1().EndpointSlices(o.Namespace).Get(ctx, o.Name, meta.GetOptions{})
	default:
		t.Fatalf("explained an object of kind %s", o.Kind)
	}
	if err != nil {
		return "(not found: " + err.Error() + ")"
	}
	return m.GetResourceVersion()
}

func webObjects() []runtime.Object {
	port := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080))
	return []runtime.Object{
		k8stest.Namespace("prod"),
		k8stest.ClusterIPService("prod", "web", []string{"10.0.0.10"}, k8stest.TCP("http", 80)),
		k8stest.Slice("prod", "web", "web-a", discovery.AddressTypeIPv4, port, k8stest.Endpoint{Addrs: []string{"10.0.3.1"}, Hostname: "one"}),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-a", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.4.1"}, Hostname: "db-0"}),
		k8stest.Slice("prod", "db", "db-b", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.4.2"}, Hostname: "db-1"},
			k8stest.Endpoint{Addrs: []string{"10.0.4.3"}, Hostname: "Bad_Host"}),
		k8stest.HeadlessService("prod", "idle", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "idle", "idle-a", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.0.5.1"}, NotReady: true}),
		k8stest.ExternalNameService("prod", "numeric", "10.1.2.3"),
	}
}

// TestExplainWhyAnswered: for every kind of name that answers, the explanation carries ServeDNS's
// reply and the Service and EndpointSlices (at the versions the API server has) its records came
// from; the parts of them left out of DNS are listed.
func TestExplainWhyAnswered(t *testing.T) {
	c := plugintest.StartCluster(t, plugintest.Zones, webObjects()...)
	const web, db = "web.prod.svc.cluster.local.", "db.prod.svc.cluster.local."
	for _, tc := range []explainCase{
		{rule: "a ClusterIP service's address comes from the Service alone", name: web, rcode: "NOERROR",
			answer: []string{plugintest.RecA(web, "10.0.0.10")}, reason: explainapi.ReasonService, from: []string{"Service/prod/web"}, whyHolds: "ClusterIP"},
		{rule: "a headless service's addresses come from its slices", name: db, rcode: "NOERROR",
			answer: []string{plugintest.RecA(db, "10.0.4.1"), plugintest.RecA(db, "10.0.4.2"), plugintest.RecA(db, "10.0.4.3")}, reason: explainapi.ReasonService,
			from: []string{"Service/prod/db", "EndpointSlice/prod/db-a", "EndpointSlice/prod/db-b"}, whyHolds: "headless",
			problem: `endpoint hostname "Bad_Host" is not a DNS label`},
		{rule: "an endpoint name comes from the one slice that holds it", name: "db-1." + db, rcode: "NOERROR",
			answer: []string{plugintest.RecA("db-1."+db, "10.0.4.2")}, reason: explainapi.ReasonEndpoint,
			from: []string{"Service/prod/db", "EndpointSlice/prod/db-b"}, problem: "Bad_Host"},
		{rule: "a ClusterIP service's endpoint name comes from its slice", name: "one." + web, rcode: "NOERROR",
			answer: []string{plugintest.RecA("one."+web, "10.0.3.1")}, reason: explainapi.ReasonEndpoint, from: []string{"Service/prod/web", "EndpointSlice/prod/web-a"}},
		{rule: "SRV of a ClusterIP service targets the service", name: "_http._tcp." + web, qtype: dns.TypeSRV, rcode: "NOERROR",
			answer: []string{plugintest.RecSRV("_http._tcp."+web, 100, 80, web)}, reason: explainapi.ReasonSRV, from: []string{"Service/prod/web"}},
		{rule: "a PTR record names the service that has the address", name: "1.4.0.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: "NOERROR",
			answer: []string{plugintest.RecPTR("1.4.0.10.in-addr.arpa.", "db-0."+db)}, reason: explainapi.ReasonReverse,
			from: []string{"Service/prod/db", "EndpointSlice/prod/db-a"}, problem: "Bad_Host"},
		{rule: "NODATA at a service: the name exists, the type does not", name: web, qtype: dns.TypeTXT, rcode: "NOERROR",
			reason: explainapi.ReasonNoData, from: []string{"Service/prod/web", "EndpointSlice/prod/web-a"}},
		{rule: "below a service, a name no endpoint or port has", name: "nobody." + web, rcode: "NXDOMAIN",
			reason: explainapi.ReasonNoSuchName, from: []string{"Service/prod/web", "EndpointSlice/prod/web-a"}, whyHolds: "nobody"},
		{rule: "a namespace is NODATA", name: "prod.svc.cluster.local.", rcode: "NOERROR", reason: explainapi.ReasonNamespace},
		{rule: "the zone's own records", name: "dns-version.cluster.local.", qtype: dns.TypeTXT, rcode: "NOERROR",
			answer: []string{`dns-version.cluster.local. 28800 IN TXT "1.1.0"`}, reason: explainapi.ReasonZoneRecords},
		{rule: "a reverse zone's apex holds the zone's own records", name: "10.in-addr.arpa.", qtype: dns.TypeNS, rcode: "NOERROR",
			answer: []string{"10.in-addr.arpa. 5 IN NS ns.dns.cluster.local."}, reason: explainapi.ReasonZoneRecords},
	} {
		checkExplain(t, c, tc)
	}
}

// TestExplainWhyNotFound: every reason a name does not exist, told apart.
func TestExplainWhyNotFound(t *testing.T) {
	t.Run("in one cluster", func(t *testing.T) {
		c := plugintest.StartCluster(t, plugintest.Zones, webObjects()...)
		for _, tc := range []explainCase{
			{rule: "no such service", name: "nothing.prod.svc.cluster.local.", rcode: "NXDOMAIN", reason: explainapi.ReasonNoSuchService, whyHolds: "prod/nothing"},
			{rule: "no such namespace", name: "web.staging.svc.cluster.local.", rcode: "NXDOMAIN", reason: explainapi.ReasonNoSuchNS, whyHolds: "staging"},
			{rule: "a headless service without ready endpoints has no name", name: "idle.prod.svc.cluster.local.", rcode: "NXDOMAIN",
				reason: explainapi.ReasonNoReady, from: []string{"Service/prod/idle", "EndpointSlice/prod/idle-a"}},
			{rule: "a rejected object, and why", name: "numeric.prod.svc.cluster.local.", rcode: "NXDOMAIN", reason: explainapi.ReasonRejected,
				from: []string{"Service/prod/numeric"}, problem: `externalName "10.1.2.3" is not a host name`},
			{rule: "pod names with pods disabled", name: "10-0-0-1.prod.pod.cluster.local.", rcode: "NXDOMAIN", reason: explainapi.ReasonPodsDisabled},
			{rule: "not a name of the cluster's shape", name: "www.cluster.local.", rcode: "NXDOMAIN", reason: explainapi.ReasonNotClusterName},
			{rule: "an address no service has", name: "9.9.9.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: "NXDOMAIN", reason: explainapi.ReasonNoSuchAddress},
			{rule: "outside the zones: the next plugin's", name: "example.org.", reason: explainapi.ReasonOutsideZones, whyHolds: "next plugin"},
		} {
			checkExplain(t, c, tc)
		}
	})
	t.Run("fallthrough", func(t *testing.T) {
		c := plugintest.StartCluster(t, "kubetree cluster.local 10.in-addr.arpa {\n fallthrough 10.in-addr.arpa\n}", webObjects()...)
		x := explainerOf(c).Explain(context.Background(), "9.9.9.10.in-addr.arpa.", dns.TypePTR, explainapi.DefaultClient)
		if !x.Next || x.Reason != explainapi.ReasonNoSuchAddress {
			t.Errorf("a miss under fallthrough: fallthrough %v, %s; want true (ServeDNS passes it on), %s", x.Next, x.Reason, explainapi.ReasonNoSuchAddress)
		}
	})
	t.Run("namespaces", func(t *testing.T) {
		c := plugintest.StartCluster(t, "kubetree cluster.local {\n namespaces prod\n}", append(webObjects(), k8stest.Namespace("staging"),
			k8stest.ClusterIPService("staging", "web", []string{"10.0.9.10"}))...)
		checkExplain(t, c, explainCase{rule: "a namespace the namespaces option leaves out", name: "web.staging.svc.cluster.local.",
			rcode: "NXDOMAIN", reason: explainapi.ReasonNSFiltered, whyHolds: "[prod]"})
	})
	t.Run("namespace_labels", func(t *testing.T) {
		c := plugintest.StartCluster(t, "kubetree cluster.local {\n namespace_labels dns=served\n}",
			k8stest.WithLabels(k8stest.Namespace("prod"), "dns", "served"), k8stest.Namespace("staging"),
			k8stest.ClusterIPService("staging", "web", []string{"10.0.9.10"}))
		checkExplain(t, c, explainCase{rule: "a namespace namespace_labels does not select", name: "web.staging.svc.cluster.local.",
			rcode: "NXDOMAIN", reason: explainapi.ReasonNSNotSelected, whyHolds: "dns=served"})
		checkExplain(t, c, explainCase{rule: "with namespace_labels, a namespace that does not exist", name: "web.qa.svc.cluster.local.",
			rcode: "NXDOMAIN", reason: explainapi.ReasonNoSuchNS})
	})
	t.Run("labels", func(t *testing.T) {
		c := plugintest.StartCluster(t, "kubetree cluster.local {\n labels app=dns\n}", k8stest.Namespace("prod"),
			k8stest.ClusterIPService("prod", "web", []string{"10.0.0.10"}))
		checkExplain(t, c, explainCase{rule: "a service labels does not select", name: "web.prod.svc.cluster.local.",
			rcode: "NXDOMAIN", reason: explainapi.ReasonLabelsFiltered, whyHolds: "app=dns"})
		checkExplain(t, c, explainCase{rule: "with labels, a service that does not exist", name: "db.prod.svc.cluster.local.",
			rcode: "NXDOMAIN", reason: explainapi.ReasonNoSuchService})
	})
	t.Run("ignore empty_service", func(t *testing.T) {
		c := plugintest.StartCluster(t, "kubetree cluster.local {\n ignore empty_service\n}", k8stest.Namespace("prod"),
			k8stest.ClusterIPService("prod", "web", []string{"10.0.0.10"}))
		checkExplain(t, c, explainCase{rule: "a ClusterIP service without ready endpoints, ignored", name: "web.prod.svc.cluster.local.",
			rcode: "NXDOMAIN", reason: explainapi.ReasonEmptyIgnored, from: []string{"Service/prod/web"}})
	})
	t.Run("not synced", func(t *testing.T) {
		k, _ := plugintest.Wired(t, "kubetree cluster.local")
		x := explain.New(k.Explain(nil)).Explain(context.Background(), "web.prod.svc.cluster.local.", dns.TypeA, explainapi.DefaultClient)
		if x.Reason != explainapi.ReasonNotSynced || x.Rcode != "SERVFAIL" {
			t.Errorf("before the first sync: %s %s (%s), want SERVFAIL %s", x.Rcode, x.Reason, x.Why, explainapi.ReasonNotSynced)
		}
	})
}

// TestExplainNamesTheClient: with pods verified, the explanation names the pod the client address
// identifies; the address is the one given.
func TestExplainNamesTheClient(t *testing.T) {
	c := plugintest.StartCluster(t, "kubetree cluster.local {\n pods verified\n}", k8stest.Namespace("prod"), k8stest.Pod("prod", "asker", "10.0.7.7"))
	plugintest.WaitFor(t, "the pod indexed", func() bool { return c.Pods.ClientAt(netip.MustParseAddr("10.0.7.7")) != nil })
	x := explainerOf(c).Explain(context.Background(), "web.prod.svc.cluster.local.", dns.TypeA, netip.MustParseAddr("10.0.7.7"))
	if x.Client.Address != "10.0.7.7" || x.Client.Pod != "prod/asker" {
		t.Errorf("client %+v, want 10.0.7.7 identified as prod/asker", x.Client)
	}
	x = explainerOf(c).Explain(context.Background(), "web.prod.svc.cluster.local.", dns.TypeA, explainapi.DefaultClient)
	if x.Client.Address != "127.0.0.1" || x.Client.Pod != "" {
		t.Errorf("client %+v, want 127.0.0.1 and no pod", x.Client)
	}
}
