package plugintest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// Assertions: every test states the reply it wants as a test.Case and checks it with Check (tables
// of them with RunCases); Expect is Check for the answer section alone.

// Case is one query and the reply the spec rule in its name asks for.
type Case struct {
	Rule string
	test.Case
	Next       bool // the query must reach the next plugin, which writes nothing here
	AnswerOnly bool // only the rcode and the answer section are checked
}

// NextHandler stands in for the rest of the chain as test.NextHandler(dns.RcodeRefused, nil) does,
// and counts its calls: a query kubetree refuses itself also comes back as Refused with nothing
// written, and the two must be told apart.
type NextHandler struct{ Calls int }

// ServeDNS implements plugin.Handler.
func (n *NextHandler) ServeDNS(context.Context, dns.ResponseWriter, *dns.Msg) (int, error) {
	n.Calls++
	return dns.RcodeRefused, nil
}

// Name implements plugin.Handler.
func (n *NextHandler) Name() string { return "next" }

// RunCases checks each of cases in a subtest named by its rule.
func RunCases(t *testing.T, k *Plugin, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Rule, func(t *testing.T) { Check(t, k, tc) })
	}
}

// Check sends tc's query through ServeDNS and compares the reply with tc: the rcode, and each
// section as a sorted list of records in zone-file form (SOA serials, which follow the clock, only
// have to be set).
func Check(t testing.TB, k *Plugin, tc Case) {
	t.Helper()
	CheckHandler(t, k, func(next plugin.Handler) { k.Next = next }, tc)
}

// CheckHandler is Check for any handler (kubetree_external's too); setNext gives it its next plugin.
func CheckHandler(t testing.TB, h plugin.Handler, setNext func(plugin.Handler), tc Case) {
	t.Helper()
	next := &NextHandler{}
	setNext(next)
	w := &CaptureWriter{}
	code, err := h.ServeDNS(context.Background(), w, tc.Msg())
	if err != nil {
		t.Fatalf("%s %s: ServeDNS: %v", tc.Qname, dns.TypeToString[tc.Qtype], err)
	}
	if tc.Next {
		if next.Calls != 1 || code != dns.RcodeRefused || w.Msg != nil {
			t.Fatalf("%s: want the query passed on: next called %d times, rcode %s, reply %v", tc.Qname, next.Calls, dns.RcodeToString[code], w.Msg)
		}
		return
	}
	if next.Calls != 0 {
		t.Fatalf("%s: next plugin called %d times, want 0", tc.Qname, next.Calls)
	}
	if tc.Rcode == dns.RcodeRefused {
		// Refused by kubetree: CoreDNS writes the reply from the returned rcode.
		if code != dns.RcodeRefused || w.Msg != nil {
			t.Fatalf("%s: want Refused and nothing written, got rcode %s, reply %v", tc.Qname, dns.RcodeToString[code], w.Msg)
		}
		return
	}
	if code != dns.RcodeSuccess || w.Msg == nil || w.Writes != 1 {
		t.Fatalf("%s: want one written reply, got rcode %s, %d writes, reply %v", tc.Qname, dns.RcodeToString[code], w.Writes, w.Msg)
	}
	m := w.Msg
	if !m.Authoritative {
		t.Errorf("%s: reply is not authoritative", tc.Qname)
	}
	sections := []struct {
		name      string
		got, want []dns.RR
	}{{"answer", m.Answer, tc.Answer}, {"authority", m.Ns, tc.Ns}, {"additional", m.Extra, tc.Extra}}
	if tc.AnswerOnly {
		sections = sections[:1]
	}
	if m.Rcode != tc.Rcode {
		t.Errorf("%s %s: rcode %s, want %s\n%v", tc.Qname, dns.TypeToString[tc.Qtype], dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.Rcode], m)
	}
	if m.Truncated != tc.Truncated {
		t.Errorf("%s %s: TC %v, want %v", tc.Qname, dns.TypeToString[tc.Qtype], m.Truncated, tc.Truncated)
	}
	for _, s := range sections {
		for _, rr := range s.got {
			if soa, ok := rr.(*dns.SOA); ok && soa.Serial == 0 {
				t.Errorf("%s: SOA serial is 0", tc.Qname)
			}
		}
		got, want := ZoneText(s.got), ZoneText(s.want)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s, %s section:\n got %q\nwant %q", tc.Qname, dns.TypeToString[tc.Qtype], s.name, got, want)
		}
	}
}

// ZoneText is rrs in zone-file form, sorted, with SOA serials set to 0 (expectations write 0).
func ZoneText(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SOA); ok {
			c := *s
			c.Serial = 0
			rr = &c
		}
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

// ParseRRs parses records in zone-file form.
func ParseRRs(t testing.TB, texts ...string) []dns.RR {
	t.Helper()
	out := make([]dns.RR, 0, len(texts))
	for _, text := range texts {
		rr, err := dns.NewRR(text)
		if err != nil {
			t.Fatalf("bad expected record %q: %v", text, err)
		}
		out = append(out, rr)
	}
	return out
}

// Expect checks the rcode and the exact answer section for a query; want holds records in zone
// file form.
func (c *Cluster) Expect(t testing.TB, name string, qtype uint16, rcode int, want ...string) {
	t.Helper()
	Expect(t, c.Plugin, name, qtype, rcode, want...)
}

// Expect is Cluster.Expect for a plugin of its own.
func Expect(t testing.TB, k *Plugin, name string, qtype uint16, rcode int, want ...string) {
	t.Helper()
	Check(t, k, Case{Case: test.Case{Qname: name, Qtype: qtype, Rcode: rcode, Answer: ParseRRs(t, want...)}, AnswerOnly: true})
}

// NX checks that names do not exist.
func (c *Cluster) NX(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		qtype := dns.TypeA
		switch {
		case strings.HasSuffix(n, ".arpa."):
			qtype = dns.TypePTR
		case strings.HasPrefix(n, "_"):
			qtype = dns.TypeSRV
		}
		c.Expect(t, n, qtype, dns.RcodeNameError)
	}
}

// Ask sends one query through ServeDNS and returns the rcode and the answer section as sorted
// strings, for tests that watch answers change rather than expect one.
func Ask(t testing.TB, k *Plugin, name string, qtype uint16) (int, []string) {
	t.Helper()
	w := &CaptureWriter{}
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	if _, err := k.ServeDNS(context.Background(), w, r); err != nil {
		t.Fatalf("%s %s: %v", name, dns.TypeToString[qtype], err)
	}
	if w.Msg == nil {
		t.Fatalf("%s %s: no reply written", name, dns.TypeToString[qtype])
	}
	return w.Msg.Rcode, ZoneText(w.Msg.Answer)
}

// Records as the watch tests expect them, with the default TTL of 5.

const (
	Okay        = dns.RcodeSuccess // the rcode of an answer, or of NODATA
	ClusterZone = "cluster.local."
)

// RecA, RecAAAA, RecPTR and RecSRV are records in zone-file form with the default TTL.
func RecA(name, ip string) string       { return name + " 5 IN A " + ip }
func RecAAAA(name, ip string) string    { return name + " 5 IN AAAA " + ip }
func RecPTR(name, target string) string { return name + " 5 IN PTR " + target }
func RecSRV(name string, weight, port int, target string) string {
	return fmt.Sprintf("%s 5 IN SRV 0 %d %d %s", name, weight, port, target)
}

// WaitFor polls cond for up to 10 s: for what a test cannot wait on with a barrier.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	k8stest.WaitFor(t, what, cond)
}

// EndpointName is what the specification names an endpoint below its service: its hostname, else
// its address with dashes (IPv6 compressed, a trailing dash completed with 0), followed in a
// multicluster zone by its cluster.
func EndpointName(e object.Endpoint) string {
	name := e.Hostname
	if name == "" {
		name = strings.NewReplacer(".", "-", ":", "-").Replace(e.Addr.String())
		if strings.HasSuffix(name, "-") {
			name += "0"
		}
	}
	if e.Cluster != "" {
		name += "." + e.Cluster
	}
	return name
}

// SOA is the SOA record of the zone owner in the tests' clusters, with ttl 10 and a serial of 0
// (the harness ignores serials). Its names are in the zone's case as owner writes it, as the
// in-tree plugin writes them in the question's case; a reverse zone's nameserver is in the first
// forward zone, as built.
func SOA(owner string) dns.RR {
	zone := dns.Fqdn(owner)
	ns := "ns.dns." + zone
	if tree.IsReverseZone(dns.CanonicalName(zone)) {
		ns = "ns.dns.cluster.local."
	}
	return test.SOA(fmt.Sprintf("%s 10 IN SOA %s hostmaster.%s 0 7200 1800 86400 10", owner, ns, zone))
}

// From is a query for name from source, optionally carrying an EDNS0 client-subnet option.
func From(source, name string, subnet *dns.EDNS0_SUBNET) request.Request {
	r := new(dns.Msg)
	r.SetQuestion(name, dns.TypeA)
	if subnet != nil {
		r.SetEdns0(1232, false)
		r.IsEdns0().Option = append(r.IsEdns0().Option, subnet)
	}
	return request.Request{W: &test.ResponseWriter{RemoteIP: source}, Req: r}
}

// ECS is an EDNS0 client-subnet option naming addr with bits of it significant.
func ECS(addr string, bits uint8) *dns.EDNS0_SUBNET {
	ip := net.ParseIP(addr)
	family := uint16(1)
	if ip.To4() == nil {
		family = 2
	} else {
		ip = ip.To4()
	}
	return &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: family, SourceNetmask: bits, Address: ip}
}
