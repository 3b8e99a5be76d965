package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// explanation is what GET /explain answers (docs/operations.md, "Explain and dump").
type explanation struct {
	Name     string          `json:"name"`
	Rcode    string          `json:"rcode"`
	Answer   []string        `json:"answer"`
	Reason   string          `json:"reason"`
	Why      string          `json:"why"`
	From     []explainedFrom `json:"from"`
	Problems []struct {
		Object, ResourceVersion, Text string
	} `json:"problems"`
}

type explainedFrom struct {
	Kind, Namespace, Name, ResourceVersion string
}

// dumped is one line of GET /dump.
type dumped struct {
	Name    string          `json:"name"`
	Types   []string        `json:"types"`
	Records int             `json:"records"`
	From    []explainedFrom `json:"from"`
}

func explainOver(t *testing.T, base, name string, qtype uint16) explanation {
	t.Helper()
	resp, err := http.Get(base + "/explain?" + url.Values{"name": {name}, "type": {dns.TypeToString[qtype]}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var x explanation
	if err := json.NewDecoder(resp.Body).Decode(&x); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /explain %s: %s %v", name, resp.Status, err)
	}
	return x
}

// froms are the objects an explanation names, as kind/namespace/name@resourceVersion.
func froms(from []explainedFrom) []string {
	var out []string
	for _, f := range from {
		out = append(out, f.Kind+"/"+f.Namespace+"/"+f.Name+"@"+f.ResourceVersion)
	}
	return out
}

func serviceVersion(t *testing.T, ns, name string) string {
	t.Helper()
	s, err := env.client.CoreV1().Services(ns).Get(bg, name, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return "Service/" + ns + "/" + name + "@" + s.ResourceVersion
}

func sliceVersion(t *testing.T, ns, name string) string {
	t.Helper()
	s, err := env.client.DiscoveryV1().EndpointSlices(ns).Get(bg, name, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return "EndpointSlice/" + ns + "/" + name + "@" + s.ResourceVersion
}

// TestExplain: against the real API server and over real HTTP, /explain gives a ClusterIP
// service's and a headless service's answers as DNS gives them, with the Service and
// EndpointSlices (at the API server's resourceVersions) they came from; and says why a name in a
// namespace the Corefile leaves out, a rejected Service and a headless service without ready
// endpoints do not exist. /dump, paged while services are created and deleted, lists every name
// that exists throughout exactly once.
func TestExplain(t *testing.T) {
	ns := newNamespace(t, "explain")
	out := newNamespace(t, "explain-out")
	web := createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	applySlice(t, k8stest.Slice(ns, "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
		k8stest.Endpoint{Addrs: []string{"10.64.1.1"}}))
	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.64.2.1"}, Hostname: "db-0"}))
	applySlice(t, k8stest.Slice(ns, "db", "db-2", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.64.2.2"}, Hostname: "db-1"}))
	createService(t, k8stest.HeadlessService(ns, "idle", k8stest.TCP("pg", 5432)))
	applySlice(t, k8stest.Slice(ns, "idle", "idle-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.64.3.1"}, NotReady: true}))
	// The API server takes an IP address as an externalName (it is a DNS subdomain); DNS cannot
	// answer a CNAME to it.
	createService(t, k8stest.ExternalNameService(ns, "numeric", "10.1.2.3"))
	createService(t, k8stest.ClusterIPService(out, "web", nil, k8stest.TCP("http", 80)))

	addr := freePorts(t, 1)[0]
	c := startCoreDNS(t, "namespaces "+ns, "explain "+addr)
	base := "http://" + addr
	eventually(t, "ready", 30*time.Second, c.isReady)
	c.waitRcode(t, svcName(ns, "db"), dns.TypeA, dns.RcodeSuccess)

	t.Run("a ClusterIP service", func(t *testing.T) {
		x := explainOver(t, base, svcName(ns, "web"), dns.TypeA)
		dnsAnswer := answers(c.query(t, "udp", svcName(ns, "web"), dns.TypeA))
		if x.Rcode != "NOERROR" || x.Reason != "service" || len(x.Answer) != 1 || !strings.HasSuffix(x.Answer[0], "\t"+web.Spec.ClusterIP) {
			t.Errorf("%s %s %v, want NOERROR, service, A %s", x.Rcode, x.Reason, x.Answer, web.Spec.ClusterIP)
		}
		if want := []string{serviceVersion(t, ns, "web")}; !slices.Equal(froms(x.From), want) {
			t.Errorf("from %v, want %v", froms(x.From), want)
		}
		if len(dnsAnswer) != len(x.Answer) {
			t.Errorf("over UDP %v, explained %v", dnsAnswer, x.Answer)
		}
	})
	t.Run("a headless service and one of its endpoints", func(t *testing.T) {
		x := explainOver(t, base, svcName(ns, "db"), dns.TypeA)
		want := []string{serviceVersion(t, ns, "db"), sliceVersion(t, ns, "db-1"), sliceVersion(t, ns, "db-2")}
		if x.Rcode != "NOERROR" || x.Reason != "service" || len(x.Answer) != 2 || !slices.Equal(froms(x.From), want) {
			t.Errorf("%s %s %v from %v, want NOERROR, service, two addresses, from %v", x.Rcode, x.Reason, x.Answer, froms(x.From), want)
		}
		x = explainOver(t, base, "db-1."+svcName(ns, "db"), dns.TypeA)
		want = []string{serviceVersion(t, ns, "db"), sliceVersion(t, ns, "db-2")}
		if x.Reason != "endpoint" || len(x.Answer) != 1 || !strings.HasSuffix(x.Answer[0], "\t10.64.2.2") || !slices.Equal(froms(x.From), want) {
			t.Errorf("db-1: %s %v from %v, want endpoint, 10.64.2.2, from %v", x.Reason, x.Answer, froms(x.From), want)
		}
	})
	t.Run("why names do not exist", func(t *testing.T) {
		for _, tc := range []struct{ name, reason, says string }{
			{svcName(out, "web"), "namespace-filtered", out},
			{svcName(ns, "numeric"), "rejected", ""},
			{svcName(ns, "idle"), "headless-without-ready-endpoints", "idle"},
			{svcName(ns, "nothing"), "no-such-service", "nothing"},
		} {
			x := explainOver(t, base, tc.name, dns.TypeA)
			rcode := c.query(t, "udp", tc.name, dns.TypeA).Rcode
			if x.Rcode != "NXDOMAIN" || rcode != dns.RcodeNameError || x.Reason != tc.reason || !strings.Contains(x.Why, tc.says) {
				t.Errorf("%s: %s %s (%s), over UDP %s; want NXDOMAIN %s", tc.name, x.Rcode, x.Reason, x.Why, dns.RcodeToString[rcode], tc.reason)
			}
		}
		x := explainOver(t, base, svcName(ns, "numeric"), dns.TypeA)
		if len(x.Problems) != 1 || !strings.Contains(x.Problems[0].Text, `externalName "10.1.2.3" is not a host name`) ||
			!slices.Equal(froms(x.From), []string{serviceVersion(t, ns, "numeric")}) {
			t.Errorf("the rejected service: problems %+v, from %v", x.Problems, froms(x.From))
		}
		x = explainOver(t, base, svcName(ns, "idle"), dns.TypeA)
		if want := []string{serviceVersion(t, ns, "idle"), sliceVersion(t, ns, "idle-1")}; !slices.Equal(froms(x.From), want) {
			t.Errorf("the idle service: from %v, want %v", froms(x.From), want)
		}
	})
	t.Run("a paged dump while services change", func(t *testing.T) {
		const stable = 20
		for i := range stable {
			createService(t, k8stest.ClusterIPService(ns, fmt.Sprintf("stable-%02d", i), nil, k8stest.TCP("http", 80)))
		}
		c.waitRcode(t, svcName(ns, fmt.Sprintf("stable-%02d", stable-1)), dns.TypeA, dns.RcodeSuccess)
		seen := map[string]int{}
		after := ""
		pages := 0
		for ; ; pages++ {
			resp, err := http.Get(base + "/dump?" + url.Values{"limit": {"7"}, "after": {after}}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			lines := 0
			for sc := bufio.NewScanner(strings.NewReader(string(body))); sc.Scan(); lines++ {
				var d dumped
				if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
					t.Fatalf("a dump line %q: %v", sc.Text(), err)
				}
				seen[d.Name]++
			}
			if lines > 7 {
				t.Fatalf("a page of %d lines, limit 7", lines)
			}
			if after = resp.Header.Get("Kubetree-Next-After"); after == "" {
				break
			}
			// Names before, among and after the stable ones, made and removed as the dump goes.
			for _, name := range []string{"aa-%d", "stable-10x%d", "zz-%d"} {
				createService(t, k8stest.ClusterIPService(ns, fmt.Sprintf(name, pages), nil, k8stest.TCP("http", 80)))
				if pages > 0 {
					deleteService(t, ns, fmt.Sprintf(name, pages-1))
				}
			}
		}
		for name, n := range seen {
			if n != 1 {
				t.Errorf("%s dumped %d times", name, n)
			}
		}
		for i := range stable {
			for _, name := range []string{"", "_http._tcp."} {
				if n := name + svcName(ns, fmt.Sprintf("stable-%02d", i)); seen[n] != 1 {
					t.Errorf("%s, there throughout, dumped %d times", n, seen[n])
				}
			}
		}
		for _, name := range []string{"db-0." + svcName(ns, "db"), "cluster.local.", svcName(ns, "web")} {
			if seen[name] != 1 {
				t.Errorf("%s dumped %d times", name, seen[name])
			}
		}
		report(t, "explain: a dump of %d names in %d pages of 7 while 3 services were made and removed per page", len(seen), pages+1)
	})
}
