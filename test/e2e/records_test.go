package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestRecordsFollowTheAPI: every record kind appears after its objects are created, changes after
// an update, and disappears after delete.
func TestRecordsFollowTheAPI(t *testing.T) {
	ns := newNamespace(t, "records")
	c := startCoreDNS(t)
	eventually(t, "ready", 30*time.Second, c.isReady)

	web := createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	c.waitAnswer(t, svcName(ns, "web"), dns.TypeA, web.Spec.ClusterIP)
	c.waitAnswer(t, "_http._tcp."+svcName(ns, "web"), dns.TypeSRV, "0 100 80 "+svcName(ns, "web"))
	rev, _ := dns.ReverseAddr(web.Spec.ClusterIP)
	c.waitAnswer(t, rev, dns.TypePTR, svcName(ns, "web"))

	dual := createService(t, k8stest.DualStack(k8stest.ClusterIPService(ns, "dual", nil, k8stest.TCP("http", 80))))
	if len(dual.Spec.ClusterIPs) != 2 {
		t.Fatalf("API server gave no dual-stack service: %v", dual.Spec.ClusterIPs)
	}
	c.waitAnswer(t, svcName(ns, "dual"), dns.TypeA, dual.Spec.ClusterIPs[0])
	c.waitAnswer(t, svcName(ns, "dual"), dns.TypeAAAA, dual.Spec.ClusterIPs[1])
	rev6, _ := dns.ReverseAddr(dual.Spec.ClusterIPs[1])
	c.waitAnswer(t, rev6, dns.TypePTR, svcName(ns, "dual"))

	createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
	applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
		k8stest.Endpoint{Addrs: []string{"10.1.0.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.1.0.2"}},
		k8stest.Endpoint{Addrs: []string{"10.1.0.3"}, NotReady: true}))
	c.waitAnswer(t, svcName(ns, "db"), dns.TypeA, "10.1.0.1", "10.1.0.2")
	c.waitAnswer(t, "db-0."+svcName(ns, "db"), dns.TypeA, "10.1.0.1")
	c.waitAnswer(t, "10-1-0-2."+svcName(ns, "db"), dns.TypeA, "10.1.0.2")
	c.waitAnswer(t, "_pg._tcp."+svcName(ns, "db"), dns.TypeSRV,
		"0 50 5432 db-0."+svcName(ns, "db"), "0 50 5432 10-1-0-2."+svcName(ns, "db"))
	c.waitAnswer(t, "1.0.1.10.in-addr.arpa.", dns.TypePTR, "db-0."+svcName(ns, "db"))

	createService(t, k8stest.ExternalNameService(ns, "search", "www.example.org"))
	c.waitAnswer(t, svcName(ns, "search"), dns.TypeCNAME, "www.example.org.")
	// The target is resolved through the rest of the chain (forward, here to a stub server).
	c.waitAnswer(t, svcName(ns, "search"), dns.TypeA, "www.example.org.", "192.0.2.1")

	t.Run("endpoints added, removed and not ready", func(t *testing.T) {
		applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
			k8stest.Endpoint{Addrs: []string{"10.1.0.1"}, Hostname: "db-0", NotReady: true},
			k8stest.Endpoint{Addrs: []string{"10.1.0.3"}}, k8stest.Endpoint{Addrs: []string{"10.1.0.4"}}))
		c.waitAnswer(t, svcName(ns, "db"), dns.TypeA, "10.1.0.3", "10.1.0.4")
		c.waitRcode(t, "db-0."+svcName(ns, "db"), dns.TypeA, dns.RcodeNameError)
		c.waitRcode(t, "1.0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError)
	})
	t.Run("ports renamed", func(t *testing.T) {
		cur, _ := env.client.CoreV1().Services(ns).Get(bg, "web", meta.GetOptions{})
		cur.Spec.Ports[0].Name = "web"
		if _, err := env.client.CoreV1().Services(ns).Update(bg, cur, meta.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitAnswer(t, "_web._tcp."+svcName(ns, "web"), dns.TypeSRV, "0 100 80 "+svcName(ns, "web"))
		c.waitRcode(t, "_http._tcp."+svcName(ns, "web"), dns.TypeSRV, dns.RcodeNameError)
	})
	t.Run("ClusterIP becomes headless", func(t *testing.T) {
		// The cluster IP is immutable: the change is a delete and a create of the same name.
		deleteService(t, ns, "web")
		c.waitRcode(t, svcName(ns, "web"), dns.TypeA, dns.RcodeNameError)
		c.waitRcode(t, rev, dns.TypePTR, dns.RcodeNameError)
		createService(t, k8stest.HeadlessService(ns, "web", k8stest.TCP("http", 80)))
		applySlice(t, k8stest.Slice(ns, "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
			k8stest.Endpoint{Addrs: []string{"10.1.1.1"}, Hostname: "w"}))
		c.waitAnswer(t, svcName(ns, "web"), dns.TypeA, "10.1.1.1")
		c.waitAnswer(t, "_http._tcp."+svcName(ns, "web"), dns.TypeSRV, "0 100 8080 w."+svcName(ns, "web"))
	})
	t.Run("deleted names are NXDOMAIN", func(t *testing.T) {
		for _, name := range []string{"web", "dual", "db", "search"} {
			deleteService(t, ns, name)
		}
		for _, name := range []string{"web", "dual", "db", "search"} {
			c.waitRcode(t, svcName(ns, name), dns.TypeA, dns.RcodeNameError)
		}
		c.waitRcode(t, "10-1-0-3."+svcName(ns, "db"), dns.TypeA, dns.RcodeNameError)
		c.waitRcode(t, rev6, dns.TypePTR, dns.RcodeNameError)
		// The namespace still exists: its name answers NODATA.
		m := c.query(t, "udp", ns+".svc.cluster.local.", dns.TypeA)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
			t.Fatalf("namespace name: want NODATA with SOA, got %v", m)
		}
	})
}

// TestPropagation measures the time from an API write to the first correct answer, and from a
// delete to NXDOMAIN. It reports; it does not assert a time.
func TestPropagation(t *testing.T) {
	ns := newNamespace(t, "propagation")
	c := startCoreDNS(t)
	eventually(t, "ready", 30*time.Second, c.isReady)
	const n = 30
	var add, del []time.Duration
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		start := time.Now()
		s := createService(t, k8stest.ClusterIPService(ns, name, nil, k8stest.TCP("http", 80)))
		written := time.Now() // the API has stored it
		for {
			m, err := c.try("udp", svcName(ns, name), dns.TypeA)
			if err == nil && slices.Equal(answers(m), []string{s.Spec.ClusterIP}) {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%s never answered", name)
			}
		}
		add = append(add, time.Since(written))
	}
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		deleteService(t, ns, name)
		written := time.Now()
		c.waitRcode(t, svcName(ns, name), dns.TypeA, dns.RcodeNameError)
		del = append(del, time.Since(written))
	}
	report(t, "create->answer median %s max %s; delete->NXDOMAIN median %s max %s (n=%d)",
		median(add), slices.Max(add), median(del), slices.Max(del), n)
}

// TestLargeHeadlessTruncatesOverUDP: an answer too big for 512 bytes comes truncated over UDP
// and complete over TCP.
func TestLargeHeadlessTruncatesOverUDP(t *testing.T) {
	ns := newNamespace(t, "large")
	c := startCoreDNS(t)
	createService(t, k8stest.HeadlessService(ns, "big", k8stest.TCP("http", 80)))
	var eps []k8stest.Endpoint
	var want []string
	for i := range 100 {
		ip := fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)
		eps = append(eps, k8stest.Endpoint{Addrs: []string{ip}})
		want = append(want, ip)
	}
	applySlice(t, k8stest.Slice(ns, "big", "big-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)), eps...))
	eventually(t, "all endpoints over TCP", 30*time.Second, func() bool {
		m, err := c.try("tcp", svcName(ns, "big"), dns.TypeA)
		return err == nil && len(m.Answer) == len(want)
	})
	m := c.query(t, "tcp", svcName(ns, "big"), dns.TypeA)
	sort.Strings(want)
	if got := answers(m); !slices.Equal(got, want) || m.Truncated {
		t.Fatalf("TCP: want all %d addresses untruncated, got %d (TC=%v)", len(want), len(got), m.Truncated)
	}
	u := c.query(t, "udp", svcName(ns, "big"), dns.TypeA)
	if !u.Truncated || len(u.Answer) >= len(want) {
		t.Fatalf("UDP without EDNS0: want TC set and fewer records, got TC=%v with %d", u.Truncated, len(u.Answer))
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestProgrammingLatencyObserved: the DNS programming latency SLI against the real API server. An
// EndpointSlice change stamped with its trigger time (as the controller stamps a selector's
// slices) and a service created after the sync are each observed once, from that time to the
// answer, by service kind, in kubetree's series and in the in-tree plugin's, which SLO tooling
// reads.
func TestProgrammingLatencyObserved(t *testing.T) {
	ns := newNamespace(t, "latency")
	db := k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432))
	db.Spec.Selector = map[string]string{"app": "db"}
	createService(t, db)
	c := startCoreDNS(t)
	eventually(t, "ready", 30*time.Second, c.isReady)
	s := k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
		k8stest.Endpoint{Addrs: []string{"10.1.203.1"}})
	triggered := time.Now().Add(-3 * time.Second)
	s.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": triggered.Format(time.RFC3339Nano)}
	applySlice(t, s)
	c.waitAnswer(t, svcName(ns, "db"), dns.TypeA, "10.1.203.1")
	created := createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	c.waitAnswer(t, svcName(ns, "web"), dns.TypeA, created.Spec.ClusterIP)

	// series reads a histogram's count and sum for one service kind from the metrics.
	series := func(text, name, kind string) (count, sum string) {
		for _, line := range strings.Split(text, "\n") {
			if !strings.Contains(line, `service_kind="`+kind+`"`) {
				continue
			}
			if v, ok := strings.CutPrefix(line, name+"_count{"); ok {
				count = v[strings.LastIndexByte(v, ' ')+1:]
			}
			if v, ok := strings.CutPrefix(line, name+"_sum{"); ok {
				sum = v[strings.LastIndexByte(v, ' ')+1:]
			}
		}
		return count, sum
	}
	var text string
	eventually(t, "the latencies observed", 10*time.Second, func() bool {
		text = c.scrape()
		n1, _ := series(text, "coredns_kubetree_dns_programming_duration_seconds", "headless_with_selector")
		n2, _ := series(text, "coredns_kubetree_dns_programming_duration_seconds", "cluster_ip")
		return n1 == "1" && n2 == "1"
	}, func() string { return text })
	for _, name := range []string{"coredns_kubetree_dns_programming_duration_seconds", "coredns_kubernetes_dns_programming_duration_seconds"} {
		count, sum := series(text, name, "headless_with_selector")
		if s, err := strconv.ParseFloat(sum, 64); count != "1" || err != nil || s < 3 {
			t.Errorf("%s: %s observations of %s s for the slice, want one of at least the 3 s since the trigger time", name, count, sum)
		}
	}
	// The creation of a service is kubetree's to observe, by the SLI; the in-tree plugin observes
	// slices only, and its series gets what it would have observed. The creation time has whole
	// seconds: the latency is at most a second more than it took.
	count, sum := series(text, "coredns_kubetree_dns_programming_duration_seconds", "cluster_ip")
	if s, err := strconv.ParseFloat(sum, 64); count != "1" || err != nil || s < 0 || s > 30 {
		t.Errorf("kubetree's series: %s observations of %s s for the created service, want one from its creation", count, sum)
	}
	if count, _ := series(text, "coredns_kubernetes_dns_programming_duration_seconds", "cluster_ip"); count != "" && count != "0" {
		t.Errorf("the in-tree plugin's series: %s observations for the created service, want none (that plugin observes slices only)", count)
	}
}

// TestClientRequestMetrics: client-go's request metrics, which the in-tree plugin's package
// registers as coredns_kubernetes_rest_client_* in any CoreDNS that links it (ours does), count
// kubetree's requests to the API server, so dashboards built on them keep working.
func TestClientRequestMetrics(t *testing.T) {
	c := startCoreDNS(t)
	eventually(t, "ready", 30*time.Second, c.isReady)
	var text string
	eventually(t, "kubetree's list requests counted", 10*time.Second, func() bool {
		text = c.scrape()
		return strings.Contains(text, `coredns_kubernetes_rest_client_requests_total{code="200",host="`)
	}, func() string { return text })
}
