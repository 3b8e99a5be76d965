package fuzz_test

import (
	"context"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/plugintest"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The fuzz targets below run with plain `go test` on the seeds under testdata/fuzz, and for a
// bounded time each with `make fuzz`.

// fuzzStanza serves two forward zones, falling through in the second only, both reverse zones,
// insecure pod names and zone-scoped names, so that every path of the handler can be reached from
// a query.
const fuzzStanza = `kubetree cluster.local other.local in-addr.arpa ip6.arpa {
	ttl 10
	pods insecure
	fallthrough other.local
	zonal
}`

// fuzzObjects is FuzzServeDNS's cluster: every kind of service, names at the length limits, and
// ExternalNames that point out of the zones, into them, into a reverse zone, and in circles.
func fuzzObjects() []runtime.Object {
	long := strings.Repeat("l", 63)
	pg := k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432), k8stest.SlicePort("stats", api.ProtocolUDP, 9000))
	return []runtime.Object{
		k8stest.Namespace("prod"), k8stest.Namespace("staging"), k8stest.Namespace("empty"), k8stest.Namespace(long),

		k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, k8stest.TCP("http", 80), k8stest.UDP("dns", 53), k8stest.TCP("", 8080)),
		k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
			k8stest.Endpoint{Addrs: []string{"10.244.1.5"}}),

		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432), k8stest.UDP("stats", 9000)),
		k8stest.InZones(k8stest.Slice("prod", "db", "db-v4a", discovery.AddressTypeIPv4, pg,
			k8stest.Endpoint{Addrs: []string{"10.244.0.1"}, Hostname: "db-0"},
			k8stest.Endpoint{Addrs: []string{"10.244.0.2"}},
			k8stest.Endpoint{Addrs: []string{"10.244.0.3"}, NotReady: true},
			k8stest.Endpoint{Addrs: []string{"10.244.0.4"}, Unknown: true}),
			"zone-a", "zone.b", "zone-a"),
		k8stest.Slice("prod", "db", "db-v6", discovery.AddressTypeIPv6, pg,
			k8stest.Endpoint{Addrs: []string{"fd00::1"}},
			k8stest.Endpoint{Addrs: []string{"fd00::2"}, Hostname: "db-0"}),
		k8stest.Slice("prod", "db", "db-v4b", discovery.AddressTypeIPv4, pg,
			k8stest.Endpoint{Addrs: []string{"10.244.0.2"}},
			k8stest.Endpoint{Addrs: []string{"10.244.0.5"}, Hostname: "db-1"}),

		k8stest.ExternalNameService("prod", "ext", "example.com"),
		k8stest.ExternalNameService("prod", "alias", "web.prod.svc.cluster.local"),
		k8stest.ExternalNameService("prod", "alias2", "DB.prod.svc.other.local."),
		k8stest.ExternalNameService("prod", "loop", "loop.prod.svc.cluster.local"),
		k8stest.ExternalNameService("prod", "ping", "pong.prod.svc.cluster.local"),
		k8stest.ExternalNameService("prod", "pong", "ping.prod.svc.cluster.local"),
		k8stest.ExternalNameService("prod", "rev", "10.0.96.10.in-addr.arpa"),
		k8stest.ExternalNameService("prod", "srv", "_http._tcp.web.prod.svc.cluster.local"),
		k8stest.ExternalNameService("prod", "pod", "10-244-0-9.prod.pod.cluster.local"),

		// The same name in another namespace, and an endpoint address shared with prod/web.
		k8stest.ClusterIPService("staging", "web", []string{"10.96.0.12"}, k8stest.TCP("http", 80)),
		k8stest.ClusterIPService("staging", "any", []string{"10.96.0.99"}),
		k8stest.Slice("staging", "any", "any-1", discovery.AddressTypeIPv4, nil, k8stest.Endpoint{Addrs: []string{"10.244.1.5"}}),

		// IPv6 only, hostnames of the longest label.
		k8stest.HeadlessService("staging", "v6", k8stest.TCP("grpc", 9090)),
		k8stest.Slice("staging", "v6", "v6-1", discovery.AddressTypeIPv6, k8stest.SlicePorts(k8stest.SlicePort("grpc", api.ProtocolTCP, 9090)),
			k8stest.Endpoint{Addrs: []string{"fd00::20"}, Hostname: long},
			k8stest.Endpoint{Addrs: []string{"fd00::"}},
			k8stest.Endpoint{Addrs: []string{"2001:db8::1"}}),

		// The longest names a cluster can have: 63-character service, namespace and hostname.
		k8stest.HeadlessService(long, long, k8stest.TCP(strings.Repeat("p", 62), 1)),
		k8stest.Slice(long, long, "long-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort(strings.Repeat("p", 62), api.ProtocolSCTP, 1)),
			k8stest.Endpoint{Addrs: []string{"10.244.2.1"}, Hostname: long},
			k8stest.Endpoint{Addrs: []string{"10.244.2.2"}}),
	}
}

// FuzzServeDNS sends arbitrary questions to a populated kubetree. A query is the name, as a string
// given to SetQuestion or (flags&1) as wire bytes unpacked by dns.Msg, the type and class, and
// flags: 2 TCP, 4 EDNS0 with size as the buffer size (32 sets DO), 8 a second question, 16 none.
func FuzzServeDNS(f *testing.F) {
	objs := fuzzObjects()
	c := plugintest.StartCluster(f, fuzzStanza, objs...)
	k := c.Plugin
	next := &plugintest.NextHandler{}
	k.Next = next
	services := serviceNames(k, objs)

	f.Fuzz(func(t *testing.T, name []byte, qtype, qclass uint16, flags byte, size uint16) {
		r := fuzzQuery(name, qtype, qclass, flags, size)
		if r == nil {
			return
		}
		_, err := r.Copy().Pack()
		packs := err == nil
		serveAndCheck(t, k, next, services, r, flags&2 != 0, packs)
	})
}

// fuzzQuery builds the query FuzzServeDNS describes; nil when the wire bytes do not unpack.
func fuzzQuery(name []byte, qtype, qclass uint16, flags byte, size uint16) *dns.Msg {
	r := new(dns.Msg)
	if flags&1 != 0 {
		// ID 0x0102, RD, one question; name must carry its own terminating zero.
		wire := append([]byte{1, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}, name...)
		wire = append(wire, byte(qtype>>8), byte(qtype), byte(qclass>>8), byte(qclass))
		if r.Unpack(wire) != nil || len(r.Question) != 1 {
			return nil
		}
	} else {
		r.SetQuestion(string(name), qtype)
		r.Question[0].Qclass = qclass
	}
	if flags&4 != 0 {
		r.SetEdns0(size, flags&32 != 0)
	}
	if flags&8 != 0 {
		r.Question = append(r.Question, r.Question[0])
	}
	if flags&16 != 0 {
		r.Question = nil
	}
	return r
}

// serveAndCheck runs one query through ServeDNS and checks what every reply must satisfy; packs
// says the query itself packs, as every query from the network does. It returns the reply, or nil.
func serveAndCheck(t *testing.T, k *plugintest.Plugin, next *plugintest.NextHandler, services []string, r *dns.Msg, tcp, packs bool) *dns.Msg {
	t.Helper()
	next.Calls = 0
	w := &plugintest.CaptureWriter{ResponseWriter: test.ResponseWriter{TCP: tcp}}
	code, err := k.ServeDNS(context.Background(), w, r)
	if err != nil {
		t.Fatalf("%v: ServeDNS error %v", r.Question, err)
	}
	if w.Writes > 1 {
		t.Fatalf("%v: %d replies written", r.Question, w.Writes)
	}
	switch code {
	case dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeServerFailure, dns.RcodeRefused:
	default:
		t.Fatalf("%v: rcode %d", r.Question, code)
	}
	if plugin.ClientWrite(code) != (w.Msg != nil) {
		t.Fatalf("%v: returned %s, but reply written: %v", r.Question, dns.RcodeToString[code], w.Msg != nil)
	}

	zone := ""
	if len(r.Question) == 1 {
		if i := tree.MatchZone(k.Zones, r.Question[0].Name); i >= 0 {
			zone = k.Zones[i]
		}
	}
	if zone == "" {
		if next.Calls != 1 || w.Msg != nil {
			t.Fatalf("%v: not ours, but next called %d times, reply %v", r.Question, next.Calls, w.Msg)
		}
		return nil
	}
	qname := r.Question[0].Name
	if next.Calls > 0 {
		if next.Calls != 1 || !k.Fall.Through(qname) || w.Msg != nil {
			t.Fatalf("%v in %s: next called %d times (fallthrough %v), reply %v", r.Question, zone, next.Calls, k.Fall.Through(qname), w.Msg)
		}
		return nil
	}
	m := w.Msg
	if m == nil {
		return nil
	}
	switch m.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeServerFailure, dns.RcodeRefused:
	default:
		t.Fatalf("%v: reply rcode %d", r.Question, m.Rcode)
	}
	if !m.Response || m.Id != r.Id || !reflect.DeepEqual(m.Question, r.Question) {
		t.Fatalf("%v: reply does not answer the query:\n%v", r.Question, m)
	}
	if m.Rcode != dns.RcodeSuccess && len(m.Answer) > 0 {
		t.Fatalf("%v: %s with answers:\n%v", r.Question, dns.RcodeToString[m.Rcode], m)
	}
	state := request.Request{W: w, Req: r}
	if packs {
		if _, err := m.Copy().Pack(); err != nil {
			t.Fatalf("%v: reply does not pack: %v\n%v", r.Question, err, m)
		}
		// What the server does before writing: truncate to the client's buffer.
		if _, err := state.Scrub(m.Copy()).Pack(); err != nil {
			t.Fatalf("%v: scrubbed reply does not pack: %v\n%v", r.Question, err, m)
		}
	}
	checkOwners(t, services, qname, m, records.RoomFor(state.Size()))

	// Later plugins rename, reorder and rewrite what they get: the same query must then be
	// answered exactly as before.
	want := replyTextWithoutSerial(m)
	mangle(m)
	w2 := &plugintest.CaptureWriter{ResponseWriter: test.ResponseWriter{TCP: tcp}}
	if _, err := k.ServeDNS(context.Background(), w2, r); err != nil || w2.Msg == nil || replyTextWithoutSerial(w2.Msg) != want {
		t.Fatalf("%v: changing a reply changed the next one (%v):\n%s\n%v", r.Question, err, want, w2.Msg)
	}
	return w2.Msg
}

// checkOwners checks whose records a reply holds: answers are owned by the question name as asked,
// or by a CNAME target earlier in the answer; SRV targets lie in the service of the SRV record's
// owner; the additional records are the SRV targets' addresses, no record twice, and each endpoint
// target's at least once unless the reply has no room left for them (room records).
func checkOwners(t *testing.T, services []string, qname string, m *dns.Msg, room int) {
	t.Helper()
	chain := map[string]bool{qname: true}
	targets := map[string]bool{}
	for _, rr := range m.Answer {
		if rr == nil {
			t.Fatalf("%s: nil answer record:\n%v", qname, m)
		}
		owner := rr.Header().Name
		if !chain[owner] {
			t.Fatalf("%s: answer owned by %q, neither the question nor a CNAME target:\n%v", qname, owner, m)
		}
		switch v := rr.(type) {
		case *dns.CNAME:
			chain[v.Target] = true
		case *dns.SRV:
			if s := serviceOfName(services, v.Target); s == "" || s != serviceOfName(services, owner) {
				t.Fatalf("%s: SRV at %s targets %s, outside its service %q:\n%v", qname, owner, v.Target, s, m)
			}
			targets[v.Target] = true
		}
	}
	extra, covered := map[string]bool{}, map[string]bool{}
	for _, rr := range m.Extra {
		if rr == nil || !targets[rr.Header().Name] {
			t.Fatalf("%s: additional record %v is not an SRV target's:\n%v", qname, rr, m)
		}
		if extra[rr.String()] {
			t.Fatalf("%s: additional record %v twice:\n%v", qname, rr, m)
		}
		extra[rr.String()], covered[rr.Header().Name] = true, true
	}
	if m.Truncated || len(m.Answer)+len(m.Extra) >= room {
		targets = nil // the reply is full: the additional section holds what fitted
	}
	for target := range targets {
		// An endpoint has an address; a ClusterIP service left without cluster IPs has none. (A
		// target's zone is in the question's case.)
		if !covered[target] && !strings.EqualFold(serviceOfName(services, target), target) {
			t.Fatalf("%s: SRV target %s without its addresses:\n%v", qname, target, m)
		}
	}
	for _, rr := range m.Ns {
		if _, ok := rr.(*dns.SOA); !ok || len(m.Ns) != 1 {
			t.Fatalf("%s: authority section is not one SOA:\n%v", qname, m)
		}
	}
}

// serviceNames lists the names of the services among objs in every forward zone of k.
func serviceNames(k *plugintest.Plugin, objs []runtime.Object) []string {
	var names []string
	for _, o := range objs {
		if s, ok := o.(*api.Service); ok {
			for _, z := range k.Forward {
				names = append(names, s.Name+"."+s.Namespace+".svc."+z)
			}
		}
	}
	return names
}

// serviceOfName returns the service name (of services) that name is, or lies below; "" for none.
func serviceOfName(services []string, name string) string {
	for _, s := range services {
		if dns.IsSubDomain(s, name) {
			return s
		}
	}
	return ""
}

// mangle does to a reply what a downstream plugin may: rename, re-time, re-target and reorder.
func mangle(m *dns.Msg) {
	for _, section := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range section {
			h := rr.Header()
			h.Name, h.Ttl = "mangled.invalid.", 1
			switch v := rr.(type) {
			case *dns.A:
				v.A = net.IPv4(192, 0, 2, 99)
			case *dns.AAAA:
				v.AAAA = net.ParseIP("2001:db8::99")
			case *dns.SRV:
				v.Target, v.Port, v.Weight = "mangled.invalid.", 1, 1
			case *dns.CNAME:
				v.Target = "mangled.invalid."
			case *dns.PTR:
				v.Ptr = "mangled.invalid."
			case *dns.NS:
				v.Ns = "mangled.invalid."
			case *dns.SOA:
				v.Ns, v.Mbox, v.Serial = "mangled.invalid.", "mangled.invalid.", 1
			case *dns.TXT:
				for i := range v.Txt {
					v.Txt[i] = "mangled"
				}
			}
		}
		slices.Reverse(section)
	}
}
