package plugin_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestNameserversAreTheDNSService: the zone's nameservers are the cluster DNS Service this server
// is behind (a service with one of the server's addresses among its ready endpoints), so that
// every replica names the same addresses; NS answers carry them as glue. Until such a service is
// known, and after it is gone, the server's own addresses are the nameserver, ns.dns.<zone>.
func TestNameserversAreTheDNSService(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local 10.in-addr.arpa")
	k.SyncedFlag.Store(true)
	a.ApplyNamespace("kube-system", true)
	a.PublishNameserver([]net.IP{net.ParseIP("10.244.0.5")})
	ownNS := []plugintest.Case{
		{Rule: "own address: NS is ns.dns with glue", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("cluster.local. 5 IN NS ns.dns.cluster.local.")},
			Extra:  []dns.RR{test.A("ns.dns.cluster.local. 5 IN A 10.244.0.5")}}},
		{Rule: "own address: ns.dns", Case: test.Case{Qname: "ns.dns.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("ns.dns.cluster.local. 5 IN A 10.244.0.5")}}},
	}
	plugintest.RunCases(t, k, ownNS)

	dnsSlice := func(addrs ...string) []*discovery.EndpointSlice {
		var eps []k8stest.Endpoint
		for _, addr := range addrs {
			eps = append(eps, k8stest.Endpoint{Addrs: []string{addr}})
		}
		return []*discovery.EndpointSlice{k8stest.Slice("kube-system", "kube-dns", "kube-dns-1", discovery.AddressTypeIPv4,
			k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolUDP, 53)), eps...)}
	}
	kubeDNS, sls := plugintest.Slim(t, k8stest.ClusterIPService("kube-system", "kube-dns", []string{"10.96.0.10"}, k8stest.UDP("dns", 53)), dnsSlice("10.244.0.5", "10.244.1.7"), false)
	a.ApplyService(kubeDNS.Key(), kubeDNS, sls, true)
	// Another service whose endpoints do not include this server changes nothing.
	other, otherSlices := plugintest.Slim(t, k8stest.ClusterIPService("default", "web", []string{"10.96.0.80"}, k8stest.TCP("http", 80)), nil, false)
	a.ApplyService(other.Key(), other, otherSlices, true)

	serviceNS := []plugintest.Case{
		{Rule: "behind kube-dns: NS names the service, with its cluster IP as glue", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("cluster.local. 5 IN NS kube-dns.kube-system.svc.cluster.local.")},
			Extra:  []dns.RR{test.A("kube-dns.kube-system.svc.cluster.local. 5 IN A 10.96.0.10")}}},
		{Rule: "behind kube-dns: ns.dns is the cluster IP", Case: test.Case{Qname: "ns.dns.cluster.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("ns.dns.cluster.local. 5 IN A 10.96.0.10")}}},
		{Rule: "behind kube-dns: ns.dns has no IPv6 address", Case: test.Case{Qname: "ns.dns.cluster.local.", Qtype: dns.TypeAAAA,
			Ns: []dns.RR{test.SOA("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 5")}}},
		{Rule: "behind kube-dns: the reverse zone has the same nameserver", Case: test.Case{Qname: "10.in-addr.arpa.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("10.in-addr.arpa. 5 IN NS kube-dns.kube-system.svc.cluster.local.")},
			Extra:  []dns.RR{test.A("kube-dns.kube-system.svc.cluster.local. 5 IN A 10.96.0.10")}}},
		{Rule: "the SOA still names ns.dns", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeSOA,
			Answer: []dns.RR{test.SOA("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 5")}}},
	}
	plugintest.RunCases(t, k, serviceNS)

	// This replica leaves the endpoints (being replaced, say): its own address again.
	kubeDNS, sls = plugintest.Slim(t, k8stest.ClusterIPService("kube-system", "kube-dns", []string{"10.96.0.10"}, k8stest.UDP("dns", 53)), dnsSlice("10.244.1.7"), false)
	a.ApplyService(kubeDNS.Key(), kubeDNS, sls, true)
	plugintest.RunCases(t, k, ownNS)

	// Back in, then the service is deleted.
	kubeDNS, sls = plugintest.Slim(t, k8stest.ClusterIPService("kube-system", "kube-dns", []string{"10.96.0.10"}, k8stest.UDP("dns", 53)), dnsSlice("10.244.0.5"), false)
	a.ApplyService(kubeDNS.Key(), kubeDNS, sls, true)
	plugintest.RunCases(t, k, serviceNS[:1])
	a.ApplyService(kubeDNS.Key(), nil, nil, true)
	plugintest.RunCases(t, k, ownNS)
}

// TestNameserversOfAHeadlessDNSService: behind a headless service the nameservers are the
// endpoints of the slice holding this server, under their endpoint names, as in the in-tree plugin.
func TestNameserversOfAHeadlessDNSService(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local")
	k.SyncedFlag.Store(true)
	a.ApplyNamespace("kube-system", true)
	a.PublishNameserver([]net.IP{net.ParseIP("10.244.0.5")})
	dns1, sls := plugintest.Slim(t, k8stest.HeadlessService("kube-system", "dns", k8stest.UDP("dns", 53)), []*discovery.EndpointSlice{
		k8stest.Slice("kube-system", "dns", "dns-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolUDP, 53)),
			k8stest.Endpoint{Addrs: []string{"10.244.0.5"}, Hostname: "dns-a"}, k8stest.Endpoint{Addrs: []string{"10.244.1.7"}}),
		k8stest.Slice("kube-system", "dns", "dns-2", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolUDP, 53)),
			k8stest.Endpoint{Addrs: []string{"10.244.2.9"}}),
	}, false)
	a.ApplyService(dns1.Key(), dns1, sls, true)
	plugintest.RunCases(t, k, []plugintest.Case{
		{Rule: "headless: each endpoint of the slice is a nameserver", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeNS,
			Answer: []dns.RR{
				test.NS("cluster.local. 5 IN NS dns-a.dns.kube-system.svc.cluster.local."),
				test.NS("cluster.local. 5 IN NS 10-244-1-7.dns.kube-system.svc.cluster.local."),
			},
			Extra: []dns.RR{
				test.A("dns-a.dns.kube-system.svc.cluster.local. 5 IN A 10.244.0.5"),
				test.A("10-244-1-7.dns.kube-system.svc.cluster.local. 5 IN A 10.244.1.7"),
			}}},
	})
}

// TestNameserversWithNamespacesFiltered: with namespaces leaving kube-system out, the NS records
// still name the cluster DNS Service this server is behind, with its cluster IP as glue, as the
// in-tree plugin's do; the service's own names stay out of DNS.
func TestNameserversWithNamespacesFiltered(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local {\n\tnamespaces test-1\n}")
	k.SyncedFlag.Store(true)
	a.ApplyNamespace("test-1", true)
	a.PublishNameserver([]net.IP{net.ParseIP("10.244.0.5")})
	kubeDNS, sls := plugintest.Slim(t, k8stest.ClusterIPService("kube-system", "kube-dns", []string{"10.96.0.10"}, k8stest.UDP("dns", 53)),
		[]*discovery.EndpointSlice{k8stest.Slice("kube-system", "kube-dns", "kube-dns-1", discovery.AddressTypeIPv4,
			k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolUDP, 53)), k8stest.Endpoint{Addrs: []string{"10.244.0.5"}})}, false)
	a.ApplyService(kubeDNS.Key(), kubeDNS, sls, false) // its namespace is not served
	plugintest.RunCases(t, k, []plugintest.Case{
		{Rule: "NS names the DNS service of a namespace not served", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("cluster.local. 5 IN NS kube-dns.kube-system.svc.cluster.local.")},
			Extra:  []dns.RR{test.A("kube-dns.kube-system.svc.cluster.local. 5 IN A 10.96.0.10")}}},
		{Rule: "the service itself is not served", Case: test.Case{Qname: "kube-dns.kube-system.svc.cluster.local.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError,
			Ns:    []dns.RR{test.SOA("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 5")}}},
	})
	// The service goes: this server's own address again.
	a.ApplyService(kubeDNS.Key(), nil, nil, false)
	plugintest.RunCases(t, k, []plugintest.Case{{Rule: "own address once the DNS service is gone", Case: test.Case{Qname: "cluster.local.", Qtype: dns.TypeNS,
		Answer: []dns.RR{test.NS("cluster.local. 5 IN NS ns.dns.cluster.local.")},
		Extra:  []dns.RR{test.A("ns.dns.cluster.local. 5 IN A 10.244.0.5")}}}})
}

// TestNameserversInTransfers: a zone transfer names the nameservers the NS answers name, with the
// addresses the NS answers carry as glue, as the in-tree plugin's transfer does: the cluster DNS
// Service, whether or not its namespace is served, else ns.dns.<zone> at this server's own
// addresses. ns.dns.<zone> is not carried besides.
func TestNameserversInTransfers(t *testing.T) {
	k, a := plugintest.Wired(t, "kubetree cluster.local 10.in-addr.arpa {\n\tnamespaces test-1\n}")
	k.SyncedFlag.Store(true)
	a.EnableTransfer(func(string) error { return nil })
	t.Cleanup(func() { _ = a.Close() })
	a.ApplyNamespace("test-1", true)
	a.PublishNameserver([]net.IP{net.ParseIP("10.244.0.5")})
	kubeDNS, sls := plugintest.Slim(t, k8stest.ClusterIPService("kube-system", "kube-dns", []string{"10.96.0.10"}, k8stest.UDP("dns", 53)),
		[]*discovery.EndpointSlice{k8stest.Slice("kube-system", "kube-dns", "kube-dns-1", discovery.AddressTypeIPv4,
			k8stest.SlicePorts(k8stest.SlicePort("dns", api.ProtocolUDP, 53)), k8stest.Endpoint{Addrs: []string{"10.244.0.5"}})}, false)

	nameservers := func(zone string) []string {
		t.Helper()
		_, body := plugintest.AXFRBody(t, plugintest.Xfr(t, k, zone, 0))
		return slices.DeleteFunc(body, func(s string) bool { return strings.Contains(s, "\tTXT\t") })
	}
	nsAnswer := func(zone string) []string {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(zone, dns.TypeNS)
		w := &plugintest.CaptureWriter{}
		if _, err := k.ServeDNS(context.Background(), w, m); err != nil || w.Msg == nil {
			t.Fatalf("NS %s: %v", zone, err)
		}
		return plugintest.ZoneText(append(w.Msg.Answer, w.Msg.Extra...))
	}
	for _, tc := range []struct {
		rule          string
		behind        bool
		zone          string
		want          []string
		sameAsAnswers bool
	}{
		{"behind kube-dns, of a namespace not served: the service's name and cluster IP", true, "cluster.local.",
			plugintest.Texts(t, "cluster.local. 5 IN NS kube-dns.kube-system.svc.cluster.local.", plugintest.RecA("kube-dns.kube-system.svc.cluster.local.", "10.96.0.10")), true},
		{"behind kube-dns, a reverse zone: the NS record, its target outside the zone", true, "10.in-addr.arpa.",
			plugintest.Texts(t, "10.in-addr.arpa. 5 IN NS kube-dns.kube-system.svc.cluster.local."), false},
		{"behind no service: ns.dns at this server's address", false, "cluster.local.",
			plugintest.Texts(t, "cluster.local. 5 IN NS ns.dns.cluster.local.", plugintest.RecA("ns.dns.cluster.local.", "10.244.0.5")), true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if tc.behind {
				a.ApplyService(kubeDNS.Key(), kubeDNS, sls, false)
			} else {
				a.ApplyService(kubeDNS.Key(), nil, nil, false)
			}
			got := nameservers(tc.zone)
			if !slices.Equal(got, tc.want) {
				t.Errorf("AXFR %s:\n got %q\nwant %q", tc.zone, got, tc.want)
			}
			if answers := nsAnswer(tc.zone); tc.sameAsAnswers && !slices.Equal(got, answers) {
				t.Errorf("AXFR %s carries %q, NS answers %q", tc.zone, got, answers)
			}
		})
	}
}
