package plugin_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kubetree/kubetree/internal/explain"
	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// dumpAll pages through the dump limit names at a time, calling between (when not nil) after each
// page, and returns every name given.
func dumpAll(t testing.TB, e *explain.Explainer, limit int, between func(page int)) []explainapi.DumpedName {
	t.Helper()
	var all []explainapi.DumpedName
	after := ""
	for page := 0; ; page++ {
		n := 0
		next, err := e.DumpPage(after, limit, nil, func(d explainapi.DumpedName) error { all = append(all, d); n++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if n > limit {
			t.Fatalf("a page of %d names, limit %d", n, limit)
		}
		if next == "" {
			return all
		}
		after = next
		if between != nil {
			between(page)
		}
	}
}

// canonicalBefore reports whether a comes before b in canonical DNS order (RFC 4034 6.1): label by
// label from the root, each label's lower-case bytes, a name before the names below it.
func canonicalBefore(a, b string) bool {
	la, lb := dns.SplitDomainName(strings.ToLower(a)), dns.SplitDomainName(strings.ToLower(b))
	slices.Reverse(la)
	slices.Reverse(lb)
	return slices.Compare(la, lb) < 0
}

// TestDumpListsEveryNameOnce: the dump gives every name of the zones once, zone by zone in
// canonical order,
// each with the types ServeDNS answers there, and a service's names with the objects they came
// from; paged at any size it gives the same names.
func TestDumpListsEveryNameOnce(t *testing.T) {
	pgPort := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432), k8stest.SlicePort("metrics", api.ProtocolTCP, 9187))
	c := plugintest.StartCluster(t, plugintest.Zones, append(webObjects(),
		k8stest.HeadlessService("prod", "pg", k8stest.TCP("pg", 5432), k8stest.TCP("metrics", 9187)),
		k8stest.Slice("prod", "pg", "pg-a", discovery.AddressTypeIPv4, pgPort,
			k8stest.Endpoint{Addrs: []string{"10.0.6.1"}, Hostname: "pg-0"}, k8stest.Endpoint{Addrs: []string{"10.0.6.2"}}))...)
	e := explainerOf(c)
	all := dumpAll(t, e, explainapi.MaxDumpLimit, nil)
	byName := map[string]explainapi.DumpedName{}
	for i, n := range all {
		sameZone := i > 0 && tree.MatchZone(c.Zones, all[i-1].Name) == tree.MatchZone(c.Zones, n.Name)
		if sameZone && canonicalBefore(n.Name, all[i-1].Name) {
			t.Errorf("%s after %s: not in canonical order", n.Name, all[i-1].Name)
		}
		byName[n.Name] = n
	}
	const web, db, pg = "web.prod.svc.cluster.local.", "db.prod.svc.cluster.local.", "pg.prod.svc.cluster.local."
	for name, want := range map[string]string{
		"cluster.local.":             "[NS SOA] from []",
		"svc.cluster.local.":         "[] from []",
		"prod.svc.cluster.local.":    "[] from []",
		web:                          "[A SRV] from [Service/prod/web]",
		"_http._tcp." + web:          "[SRV] from [Service/prod/web]",
		"one." + web:                 "[A SRV] from [Service/prod/web EndpointSlice/prod/web-a]",
		db:                           "[A] from [Service/prod/db EndpointSlice/prod/db-a EndpointSlice/prod/db-b]",
		"db-1." + db:                 "[A] from [Service/prod/db EndpointSlice/prod/db-b]",
		"10-0-4-3." + db:             "[A] from [Service/prod/db EndpointSlice/prod/db-b]",
		"dns-version.cluster.local.": "[TXT] from []",
		// A headless service's own name and its endpoints' have SRV records too: one per endpoint
		// and named port at the service, one per port at an endpoint.
		pg:                    "[A SRV] from [Service/prod/pg EndpointSlice/prod/pg-a]",
		"pg-0." + pg:          "[A SRV] from [Service/prod/pg EndpointSlice/prod/pg-a]",
		"10-0-6-2." + pg:      "[A SRV] from [Service/prod/pg EndpointSlice/prod/pg-a]",
		"_metrics._tcp." + pg: "[SRV] from [Service/prod/pg]",
	} {
		n, ok := byName[name]
		var from []string
		for _, o := range n.From {
			from = append(from, o.Kind+"/"+o.Namespace+"/"+o.Name)
		}
		if got := fmt.Sprintf("%v from %v", n.Types, from); !ok || got != want {
			t.Errorf("%s: %v %s, want %s", name, ok, got, want)
		}
	}
	for _, absent := range []string{"idle.prod.svc.cluster.local.", "numeric.prod.svc.cluster.local."} {
		if _, ok := byName[absent]; ok {
			t.Errorf("%s is dumped, but has no name", absent)
		}
	}
	// What the dump says is what ServeDNS answers: every type it has records of, and as many.
	for _, n := range all {
		answered := 0
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeCNAME, dns.TypeTXT, dns.TypeNS, dns.TypeSOA, dns.TypePTR} {
			typ := dns.TypeToString[qtype]
			rcode, answer := plugintest.Ask(t, c.Plugin, n.Name, qtype)
			answered += len(answer)
			switch listed := slices.Contains(n.Types, typ); {
			case listed && (rcode != dns.RcodeSuccess || len(answer) == 0):
				t.Errorf("%s %s dumped, ServeDNS answers %s %v", n.Name, typ, dns.RcodeToString[rcode], answer)
			case !listed && len(answer) > 0:
				t.Errorf("%s: ServeDNS answers %d %s records, which the dump does not list", n.Name, len(answer), typ)
			}
		}
		if answered != n.Records {
			t.Errorf("%s: the dump counts %d records, ServeDNS answers %d", n.Name, n.Records, answered)
		}
		if len(n.Types) == 0 {
			if rcode, answer := plugintest.Ask(t, c.Plugin, n.Name, dns.TypeA); rcode != dns.RcodeSuccess || len(answer) != 0 {
				t.Errorf("%s dumped without records, ServeDNS answers A: %s %v; want NODATA", n.Name, dns.RcodeToString[rcode], answer)
			}
		}
	}
	for _, limit := range []int{1, 2, 3, 7} {
		paged := dumpAll(t, e, limit, nil)
		if !slices.EqualFunc(paged, all, func(a, b explainapi.DumpedName) bool { return a.Name == b.Name && a.Records == b.Records }) {
			t.Errorf("in pages of %d: %d names, want the %d of one page", limit, len(paged), len(all))
		}
	}
}

// TestDumpPagesWhileServicesChange: services created and deleted between the pages of a dump do
// not make it skip or repeat any name that exists throughout.
func TestDumpPagesWhileServicesChange(t *testing.T) {
	objs := []runtime.Object{k8stest.Namespace("prod")}
	for i := range 30 {
		objs = append(objs, k8stest.ClusterIPService("prod", fmt.Sprintf("stable-%02d", i), []string{fmt.Sprintf("10.0.1.%d", i+1)}, k8stest.TCP("http", 80)))
	}
	c := plugintest.StartCluster(t, plugintest.Zones, objs...)
	all := dumpAll(t, explainerOf(c), 4, func(page int) {
		// Before and after the cursor alike: names that sort first (aa-), among (stable-15x), last (zz-).
		for _, name := range []string{"aa-%d", "stable-15x%d", "zz-%d"} {
			svc := k8stest.ClusterIPService("prod", fmt.Sprintf(name, page), []string{fmt.Sprintf("10.0.2.%d", page+1)}, k8stest.TCP("http", 80))
			c.Create(t, svc)
			if page > 0 {
				c.Remove(t, k8stest.ClusterIPService("prod", fmt.Sprintf(name, page-1), nil))
			}
		}
		c.Barrier(t)
	})
	seen := map[string]int{}
	for _, n := range all {
		seen[n.Name]++
	}
	for name, times := range seen {
		if times != 1 {
			t.Errorf("%s dumped %d times", name, times)
		}
	}
	for i := range 30 {
		for _, name := range []string{"stable-%02d.prod.svc.cluster.local.", "_http._tcp.stable-%02d.prod.svc.cluster.local."} {
			if n := fmt.Sprintf(name, i); seen[n] != 1 {
				t.Errorf("%s, which existed throughout, dumped %d times", n, seen[n])
			}
		}
	}
}
