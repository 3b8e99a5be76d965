package kubetree

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The fuzz targets below run with plain `go test` on the seeds under testdata/fuzz, and for a
// bounded time each with `make fuzz`.

// fuzzStanza serves two forward zones, falling through in the second only, both reverse zones and
// insecure pod names, so that every path of the handler can be reached from a query.
const fuzzStanza = `kubetree cluster.local other.local in-addr.arpa ip6.arpa {
	ttl 10
	pods insecure
	fallthrough other.local
}`

// fuzzObjects is FuzzServeDNS's cluster: every kind of service, names at the length limits, and
// ExternalNames that point out of the zones, into them, into a reverse zone, and in circles.
func fuzzObjects() []runtime.Object {
	long := strings.Repeat("l", 63)
	pg := slicePorts(slicePort("pg", api.ProtocolTCP, 5432), slicePort("stats", api.ProtocolUDP, 9000))
	return []runtime.Object{
		namespace("prod"), namespace("staging"), namespace("empty"), namespace(long),

		clusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, tcp("http", 80), udp("dns", 53), tcp("", 8080)),
		slice("prod", "web", "web-1", discovery.AddressTypeIPv4, slicePorts(slicePort("http", api.ProtocolTCP, 8080)),
			ep{addrs: []string{"10.244.1.5"}}),

		headlessService("prod", "db", tcp("pg", 5432), udp("stats", 9000)),
		slice("prod", "db", "db-v4a", discovery.AddressTypeIPv4, pg,
			ep{addrs: []string{"10.244.0.1"}, hostname: "db-0"},
			ep{addrs: []string{"10.244.0.2"}},
			ep{addrs: []string{"10.244.0.3"}, notReady: true},
			ep{addrs: []string{"10.244.0.4"}, unknown: true}),
		slice("prod", "db", "db-v6", discovery.AddressTypeIPv6, pg,
			ep{addrs: []string{"fd00::1"}},
			ep{addrs: []string{"fd00::2"}, hostname: "db-0"}),
		slice("prod", "db", "db-v4b", discovery.AddressTypeIPv4, pg,
			ep{addrs: []string{"10.244.0.2"}},
			ep{addrs: []string{"10.244.0.5"}, hostname: "db-1"}),

		externalNameService("prod", "ext", "example.com"),
		externalNameService("prod", "alias", "web.prod.svc.cluster.local"),
		externalNameService("prod", "alias2", "DB.prod.svc.other.local."),
		externalNameService("prod", "loop", "loop.prod.svc.cluster.local"),
		externalNameService("prod", "ping", "pong.prod.svc.cluster.local"),
		externalNameService("prod", "pong", "ping.prod.svc.cluster.local"),
		externalNameService("prod", "rev", "10.0.96.10.in-addr.arpa"),
		externalNameService("prod", "srv", "_http._tcp.web.prod.svc.cluster.local"),
		externalNameService("prod", "pod", "10-244-0-9.prod.pod.cluster.local"),

		// The same name in another namespace, and an endpoint address shared with prod/web.
		clusterIPService("staging", "web", []string{"10.96.0.12"}, tcp("http", 80)),
		clusterIPService("staging", "any", []string{"10.96.0.99"}),
		slice("staging", "any", "any-1", discovery.AddressTypeIPv4, nil, ep{addrs: []string{"10.244.1.5"}}),

		// IPv6 only, hostnames of the longest label.
		headlessService("staging", "v6", tcp("grpc", 9090)),
		slice("staging", "v6", "v6-1", discovery.AddressTypeIPv6, slicePorts(slicePort("grpc", api.ProtocolTCP, 9090)),
			ep{addrs: []string{"fd00::20"}, hostname: long},
			ep{addrs: []string{"fd00::"}},
			ep{addrs: []string{"2001:db8::1"}}),

		// The longest names a cluster can have: 63-character service, namespace and hostname.
		headlessService(long, long, tcp(strings.Repeat("p", 62), 1)),
		slice(long, long, "long-1", discovery.AddressTypeIPv4, slicePorts(slicePort(strings.Repeat("p", 62), api.ProtocolSCTP, 1)),
			ep{addrs: []string{"10.244.2.1"}, hostname: long},
			ep{addrs: []string{"10.244.2.2"}}),
	}
}

// FuzzServeDNS sends arbitrary questions to a populated kubetree. A query is the name, as a string
// given to SetQuestion or (flags&1) as wire bytes unpacked by dns.Msg, the type and class, and
// flags: 2 TCP, 4 EDNS0 with size as the buffer size (32 sets DO), 8 a second question, 16 none.
func FuzzServeDNS(f *testing.F) {
	objs := fuzzObjects()
	c := newCluster(f, fuzzStanza, objs...)
	k := c.k
	k.upstream = fuzzUpstream{}
	next := &nextHandler{}
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
func serveAndCheck(t *testing.T, k *Kubetree, next *nextHandler, services []string, r *dns.Msg, tcp, packs bool) *dns.Msg {
	t.Helper()
	next.calls = 0
	w := &fuzzWriter{ResponseWriter: test.ResponseWriter{TCP: tcp}}
	code, err := k.ServeDNS(context.Background(), w, r)
	if err != nil {
		t.Fatalf("%v: ServeDNS error %v", r.Question, err)
	}
	if w.writes > 1 {
		t.Fatalf("%v: %d replies written", r.Question, w.writes)
	}
	switch code {
	case dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeServerFailure, dns.RcodeRefused:
	default:
		t.Fatalf("%v: rcode %d", r.Question, code)
	}
	if plugin.ClientWrite(code) != (w.msg != nil) {
		t.Fatalf("%v: returned %s, but reply written: %v", r.Question, dns.RcodeToString[code], w.msg != nil)
	}

	zone := ""
	if len(r.Question) == 1 {
		zone = matchZone(k.Zones, r.Question[0].Name)
	}
	if zone == "" {
		if next.calls != 1 || w.msg != nil {
			t.Fatalf("%v: not ours, but next called %d times, reply %v", r.Question, next.calls, w.msg)
		}
		return nil
	}
	qname := r.Question[0].Name
	if next.calls > 0 {
		if next.calls != 1 || !k.Fall.Through(qname) || w.msg != nil {
			t.Fatalf("%v in %s: next called %d times (fallthrough %v), reply %v", r.Question, zone, next.calls, k.Fall.Through(qname), w.msg)
		}
		return nil
	}
	m := w.msg
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
	if packs {
		if _, err := m.Copy().Pack(); err != nil {
			t.Fatalf("%v: reply does not pack: %v\n%v", r.Question, err, m)
		}
		// What the server does before writing: truncate to the client's buffer.
		state := request.Request{W: w, Req: r}
		if _, err := state.Scrub(m.Copy()).Pack(); err != nil {
			t.Fatalf("%v: scrubbed reply does not pack: %v\n%v", r.Question, err, m)
		}
	}
	checkOwners(t, services, qname, m)

	// Later plugins rename, reorder and rewrite what they get: the same query must then be
	// answered exactly as before.
	want := replyText(m)
	mangle(m)
	w2 := &fuzzWriter{ResponseWriter: test.ResponseWriter{TCP: tcp}}
	if _, err := k.ServeDNS(context.Background(), w2, r); err != nil || w2.msg == nil || replyText(w2.msg) != want {
		t.Fatalf("%v: changing a reply changed the next one (%v):\n%s\n%v", r.Question, err, want, w2.msg)
	}
	return w2.msg
}

// checkOwners checks whose records a reply holds: answers are owned by the question name as asked,
// or by a CNAME target earlier in the answer; SRV targets lie in the service of the SRV record's
// owner; the additional records are the SRV targets' addresses, each endpoint target's at least
// once and no record twice.
func checkOwners(t *testing.T, services []string, qname string, m *dns.Msg) {
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
	for target := range targets {
		// An endpoint has an address; a ClusterIP service left without cluster IPs has none.
		if !covered[target] && serviceOfName(services, target) != target {
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
func serviceNames(k *Kubetree, objs []runtime.Object) []string {
	var names []string
	for _, o := range objs {
		if s, ok := o.(*api.Service); ok {
			for _, z := range k.forward {
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

// fuzzWriter keeps the reply, and counts the writes.
type fuzzWriter struct {
	test.ResponseWriter
	msg    *dns.Msg
	writes int
}

func (w *fuzzWriter) WriteMsg(m *dns.Msg) error { w.writes++; w.msg = m; return nil }

// fuzzUpstream answers every name outside our zones with one A record, as forward would.
type fuzzUpstream struct{}

func (fuzzUpstream) Lookup(_ context.Context, _ request.Request, name string, typ uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, typ)
	if typ == dns.TypeA {
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr(name, dns.TypeA, 30), A: net.IPv4(192, 0, 2, 1)})
	}
	return m, nil
}

// objectsStanza has two forward zones, so that a service's records are built twice, and both
// reverse zones, so that every address a service has is indexed.
const objectsStanza = `kubetree cluster.local other.local in-addr.arpa ip6.arpa {
	ttl 10
}`

// fixedObjects are FuzzObjectsToRecords' other services, whose answers must not change.
func fixedObjects() []runtime.Object {
	return []runtime.Object{
		clusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, tcp("http", 80), udp("dns", 53)),
		slice("prod", "web", "web-1", discovery.AddressTypeIPv4, slicePorts(slicePort("http", api.ProtocolTCP, 8080)),
			ep{addrs: []string{"10.244.1.5"}, hostname: "web-0"}),
		headlessService("prod", "db", tcp("pg", 5432)),
		slice("prod", "db", "db-1", discovery.AddressTypeIPv4, slicePorts(slicePort("pg", api.ProtocolTCP, 5432)),
			ep{addrs: []string{"10.244.0.1"}, hostname: "db-0"}, ep{addrs: []string{"10.244.0.2"}}),
		slice("prod", "db", "db-2", discovery.AddressTypeIPv6, slicePorts(slicePort("pg", api.ProtocolTCP, 5432)),
			ep{addrs: []string{"fd00::1"}, hostname: "db-0"}),
	}
}

// fixedQueries are the questions whose answers FuzzObjectsToRecords compares before and after.
func fixedQueries(k *Kubetree) []dns.Question {
	var qs []dns.Question
	for _, z := range k.forward {
		web, db := "web.prod.svc."+z, "db.prod.svc."+z
		for _, name := range []string{web, db, "WEB.prod.svc." + z, "db-0." + db, "10-244-0-2." + db, "web-0." + web,
			"_http._tcp." + web, "_pg._tcp." + db, "_tcp." + db, "x." + web, "prod.svc." + z} {
			for _, t := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT} {
				qs = append(qs, dns.Question{Name: name, Qtype: t, Qclass: dns.ClassINET})
			}
		}
	}
	return qs
}

// FuzzObjectsToRecords decodes a Service and its EndpointSlices from spec (see decodeSpec), takes
// them through the informers' transforms and the watcher's assembly into the tree next to fixed
// services, asks for every name the service should have, and takes it out again.
func FuzzObjectsToRecords(f *testing.F) {
	base, err := parse(caddy.NewTestController("dns", objectsStanza))
	if err != nil {
		f.Fatal(err)
	}
	fixed := fixedObjects()
	services := serviceNames(base, fixed)
	next := &nextHandler{}
	// The fixed services' answers on their own.
	k := objectsKubetree(base, fixed, next, false)
	baseline := map[dns.Question]string{}
	for _, q := range fixedQueries(k) {
		baseline[q] = queryString(k, q)
	}

	f.Fuzz(func(t *testing.T, spec string) {
		svc, sls, podNames, ignoreEmpty := decodeSpec(spec)
		if svc.Namespace == "prod" && (svc.Name == "web" || svc.Name == "db") {
			return // it would replace a fixed service
		}
		if fuzzing() && specSize(svc, sls) > 1000 {
			// An input of thousands of ports or endpoints takes a thousand times as long as the
			// others, and the fuzzer would spend its time there; the seeds hold such inputs, and
			// plain go test runs them.
			return
		}
		k := objectsKubetree(base, fixed, next, ignoreEmpty)
		stored, storedSlices := slim(t, svc, sls, podNames)
		model := assemble(stored, storedSlices)
		checkProblems(t, svc, sls, podNames, stored, storedSlices, model)

		key := svc.Name + "." + svc.Namespace + ".svc."
		if isLabel(svc.Namespace) {
			for _, z := range k.forward {
				k.tree.Set(z, svc.Namespace+".svc."+z, present)
			}
		}
		size, ptrs := k.tree.Len(), ptrSizes(k.tree)
		names := services
		if model != nil {
			names = append(slices.Clone(services), serviceNames(k, []runtime.Object{svc})...)
		}
		for round := range 2 { // the second round replaces the service by an equal one
			publish(k, key, model)
			for _, q := range fixedQueries(k) {
				if got := queryString(k, q); got != baseline[q] {
					t.Fatalf("round %d: %s %s changed by %s/%s:\n%s\nwas\n%s", round, q.Name, dns.TypeToString[q.Qtype],
						svc.Namespace, svc.Name, got, baseline[q])
				}
			}
			queryService(t, k, next, names, svc, model)
		}
		publish(k, key, nil)
		for _, q := range fixedQueries(k) {
			if got := queryString(k, q); got != baseline[q] {
				t.Fatalf("after removal: %s %s changed:\n%s\nwas\n%s", q.Name, dns.TypeToString[q.Qtype], got, baseline[q])
			}
		}
		if k.tree.Len() != size || ptrSizes(k.tree) != ptrs {
			t.Fatalf("removal leaves names behind: %d names, PTR index %v; before %d, %v", k.tree.Len(), ptrSizes(k.tree), size, ptrs)
		}
	})
}

// fuzzing reports whether the test binary is fuzzing rather than replaying the seed corpus.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// specSize counts the ports and endpoint addresses of a decoded spec.
func specSize(svc *api.Service, sls []*discovery.EndpointSlice) int {
	n := len(svc.Spec.Ports)
	for _, sl := range sls {
		n += len(sl.Ports)
		for _, e := range sl.Endpoints {
			n += max(len(e.Addresses), 1)
		}
	}
	return n
}

// objectsKubetree returns a synced kubetree with base's configuration whose tree holds the fixed
// services, built as the watcher builds them.
func objectsKubetree(base *Kubetree, fixed []runtime.Object, next *nextHandler, ignoreEmpty bool) *Kubetree {
	k := &Kubetree{Next: next, Zones: base.Zones, Fall: base.Fall, forward: base.forward, cfg: base.cfg, upstream: fuzzUpstream{}}
	k.cfg.ignoreEmpty = ignoreEmpty
	k.tree = NewTree(k.Zones, k.apex)
	k.synced.Store(true)
	for _, z := range k.forward {
		k.tree.Set(z, "prod.svc."+z, present)
	}
	for _, o := range fixed {
		s, ok := o.(*api.Service)
		if !ok {
			continue
		}
		var sls []*discovery.EndpointSlice
		for _, o := range fixed {
			if sl, ok := o.(*discovery.EndpointSlice); ok && sl.Namespace == s.Namespace && sl.Labels[discovery.LabelServiceName] == s.Name {
				sls = append(sls, sl)
			}
		}
		stored, storedSlices := slim(nil, s, sls, false)
		publish(k, s.Name+"."+s.Namespace+".svc.", assemble(stored, storedSlices))
	}
	return k
}

// slim takes the objects through the informers' transforms.
func slim(t *testing.T, svc *api.Service, sls []*discovery.EndpointSlice, podNames bool) (*storedService, []*storedSlice) {
	obj, err := slimService(svc)
	if err != nil && t != nil {
		t.Fatal(err)
	}
	var out []*storedSlice
	transform := sliceTransform(podNames)
	for _, sl := range sls {
		o, err := transform(sl)
		if err != nil && t != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*storedSlice))
	}
	return obj.(*storedService), out
}

// assemble is watch.go's applyService for a service whose namespace is served: the stored model
// with the models of the slices that name the service.
func assemble(stored *storedService, storedSlices []*storedSlice) *service {
	if stored.model == nil {
		return nil
	}
	key := stored.Namespace + "/" + stored.Name
	var sls []*endpointSlice
	for _, sl := range storedSlices {
		if serviceOf(sl) == key && sl.model != nil {
			sls = append(sls, sl.model)
		}
	}
	m := *stored.model
	m.Slices = sls
	return &m
}

// publish builds the model in every forward zone and swaps it in, as applyService does; a nil model
// takes the service away.
func publish(k *Kubetree, name string, model *service) {
	records := make([]*svcRecords, len(k.forward))
	if model != nil {
		for i, zone := range k.forward {
			records[i] = k.build(model, zone)
		}
	}
	k.tree.PublishService(name, k.forward, records)
}

func ptrSizes(t *Tree) [3]int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return [3]int{len(t.ptr.v4), len(t.ptr.v6), len(t.ptr.prefixes)}
}

// queryString is the reply to q as text, with the SOA serial (the clock) taken out.
func queryString(k *Kubetree, q dns.Question) string {
	r := new(dns.Msg)
	r.SetQuestion(q.Name, q.Qtype)
	r.Id = 1
	w := &fuzzWriter{}
	code, err := k.ServeDNS(context.Background(), w, r)
	if w.msg == nil {
		return fmt.Sprintf("rcode %d, error %v", code, err)
	}
	m := w.msg.Copy()
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Serial = 0
		}
	}
	return replyText(m)
}

// replyText is a reply as text; unlike dns.Msg.String it takes linear time in the records.
func replyText(m *dns.Msg) string {
	var b strings.Builder
	h := &m.MsgHdr
	fmt.Fprintf(&b, "%d %d %d %t %t %t %t %t %t %t %t\n", h.Id, h.Opcode, h.Rcode, h.Response, h.Authoritative,
		h.Truncated, h.RecursionDesired, h.RecursionAvailable, h.Zero, h.AuthenticatedData, h.CheckingDisabled)
	for _, section := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range section {
			b.WriteString(rr.String())
			b.WriteByte('\n')
		}
		b.WriteString(";;\n")
	}
	return b.String()
}

// checkProblems checks that the transforms and toModel agree, and that whatever the model leaves
// out is described by a problem with text.
func checkProblems(t *testing.T, svc *api.Service, sls []*discovery.EndpointSlice, podNames bool, stored *storedService, storedSlices []*storedSlice, model *service) {
	t.Helper()
	problems := slices.Clone(stored.problems)
	for _, sl := range storedSlices {
		problems = append(problems, sl.problems...)
	}
	for _, p := range problems {
		if p.text == "" || p.object == "" {
			t.Fatalf("problem without text or object: %+v", p)
		}
	}
	described := func(value string) bool {
		for _, p := range problems {
			if strings.Contains(p.text, strconv.Quote(value)) {
				return true
			}
		}
		return false
	}
	if model == nil {
		if len(stored.problems) == 0 {
			t.Fatalf("service %s/%s left out without a problem", svc.Namespace, svc.Name)
		}
		return
	}

	var mine []*discovery.EndpointSlice
	for _, sl := range sls {
		if sl.Labels[discovery.LabelServiceName] == svc.Name {
			mine = append(mine, sl)
		}
	}
	want, _ := toModel(svc, mine, podNames)
	got := *model
	if got.Kind == externalName {
		got.Slices = nil // toModel leaves them out, build ignores them
	}
	if !reflect.DeepEqual(&got, want) {
		t.Fatalf("transforms and toModel disagree:\n%+v\n%+v", got, want)
	}

	if model.Kind == clusterIP {
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, text := range ips {
			ip, err := netip.ParseAddr(text)
			if (err != nil || !slices.Contains(model.ClusterIPs, ip)) && !described(text) {
				t.Fatalf("cluster IP %q left out without a problem", text)
			}
		}
	}
	if model.Kind != externalName {
		for _, p := range svc.Spec.Ports {
			if p.Name != "" && !hasPort(model.Ports, p.Name, string(p.Protocol), p.Port) && !described(p.Name) {
				t.Fatalf("service port %+v left out without a problem", p)
			}
		}
	}
	for i, sl := range sls {
		m := storedSlices[i].model
		if m == nil {
			continue
		}
		for _, p := range sl.Ports {
			if p.Name == nil || *p.Name == "" || p.Port == nil {
				continue
			}
			proto := string(api.ProtocolTCP)
			if p.Protocol != nil {
				proto = string(*p.Protocol)
			}
			if !hasPort(m.Ports, *p.Name, proto, *p.Port) && !described(*p.Name) {
				t.Fatalf("slice port %q left out without a problem", *p.Name)
			}
		}
		kept := map[netip.Addr]bool{}
		for _, e := range m.endpoints() {
			kept[e.Addr] = true
		}
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, text := range e.Addresses {
				ip, err := netip.ParseAddr(text)
				if (err != nil || !kept[ip]) && !described(text) {
					t.Fatalf("endpoint address %q left out without a problem", text)
				}
			}
		}
	}
}

func hasPort(ports []port, name, protocol string, number int32) bool {
	return slices.Contains(ports, port{Name: name, Protocol: strings.ToLower(protocol), Port: uint16(number)}) && number > 0 && number < 65536
}

// queryService asks for every name the service should have, and some it should not, in every
// forward zone, and checks each reply; each PTR record must point at a name with that address.
func queryService(t *testing.T, k *Kubetree, next *nextHandler, services []string, svc *api.Service, model *service) {
	t.Helper()
	type query struct {
		name  string
		types []uint16
	}
	all := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeCNAME, dns.TypePTR, dns.TypeTXT, dns.TypeANY}
	some := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV}
	var qs []query
	var addrs []string
	addrs = append(addrs, svc.Spec.ClusterIPs...)
	addrs = append(addrs, svc.Spec.ClusterIP)
	for i, z := range k.forward {
		name := svc.Name + "." + svc.Namespace + ".svc." + z
		if i > 0 {
			qs = append(qs, query{name, some})
			continue
		}
		qs = append(qs, query{name, all}, query{strings.ToUpper(name), some}, query{"x." + name, some},
			query{"_tcp." + name, some}, query{"_udp." + name, some}, query{svc.Spec.ExternalName, some})
		ports := svc.Spec.Ports[:min(len(svc.Spec.Ports), 8)]
		for _, p := range ports {
			qs = append(qs, query{"_" + p.Name + "._" + strings.ToLower(string(p.Protocol)) + "." + name, some})
		}
		if model == nil {
			continue
		}
		for _, sl := range model.Slices {
			for _, p := range sl.Ports[:min(len(sl.Ports), 4)] {
				qs = append(qs, query{"_" + strings.ToUpper(p.Name) + "._" + p.Protocol + "." + name, some})
			}
			eps := sl.endpoints()
			if len(eps) > 8 {
				eps = append(eps[:8], eps[len(eps)-1]) // and the last
			}
			for _, e := range eps {
				qs = append(qs, query{e.label() + "." + name, some})
				addrs = append(addrs, e.Addr.String())
			}
		}
	}
	for _, text := range addrs {
		if ip, err := netip.ParseAddr(text); err == nil {
			qs = append(qs, query{reverseName(ip), []uint16{dns.TypePTR}})
		}
	}
	// Answers of hundreds of thousands of records would only make the fuzzer slow: the names that
	// enumerate every endpoint are skipped then, the endpoints' own names are not.
	huge := model != nil && (srvCount(model) > 20000 || model.readyAddrs() > 20000)
	base := svc.Name + "." + svc.Namespace + ".svc."
	for _, q := range qs {
		for _, qtype := range q.types {
			r := new(dns.Msg)
			r.SetQuestion(dns.Fqdn(q.name), qtype)
			_, err := r.Copy().Pack()
			enumerates := strings.HasPrefix(q.name, "_") || strings.HasPrefix(strings.ToLower(q.name), base)
			if err != nil || huge && enumerates && qtype != dns.TypePTR {
				continue
			}
			m := serveAndCheck(t, k, next, services, r, false, true)
			if m == nil || qtype != dns.TypePTR {
				continue
			}
			for _, rr := range m.Answer {
				if ptr, ok := rr.(*dns.PTR); ok {
					checkPTRTarget(t, k, next, services, ptr)
				}
			}
		}
	}
}

// checkPTRTarget checks that the name a PTR record points at has the address.
func checkPTRTarget(t *testing.T, k *Kubetree, next *nextHandler, services []string, ptr *dns.PTR) {
	t.Helper()
	ip, bits, ok := parseReverse(ptr.Hdr.Name)
	if !ok || bits != ip.BitLen() {
		t.Fatalf("PTR record at %s, which names no address", ptr.Hdr.Name)
	}
	qtype := dns.TypeA
	if ip.Is6() {
		qtype = dns.TypeAAAA
	}
	r := new(dns.Msg)
	r.SetQuestion(ptr.Ptr, qtype)
	m := serveAndCheck(t, k, next, services, r, true, true)
	if m != nil {
		for _, rr := range m.Answer {
			switch v := rr.(type) {
			case *dns.A:
				if a, _ := netip.AddrFromSlice(v.A.To4()); a == ip {
					return
				}
			case *dns.AAAA:
				if a, _ := netip.AddrFromSlice(v.AAAA); a == ip {
					return
				}
			}
		}
	}
	t.Fatalf("PTR %s -> %s, but %s has no address %s:\n%v", ptr.Hdr.Name, ptr.Ptr, ptr.Ptr, ip, m)
}

// srvCount bounds the SRV records of the service's bare name, so that huge products are skipped.
func srvCount(s *service) int {
	n := len(s.Ports)
	for _, sl := range s.Slices {
		n += len(sl.Ports) * sl.Len() * len(s.Slices)
	}
	return n
}

// decodeSpec reads FuzzObjectsToRecords' input, fields separated by '|':
//
//	flags|type|namespace|name|clusterIP|clusterIPs|ports|externalName|slice|slice...
//
// flags holds 'p' for endpoint_pod_names and 'e' for ignore empty_service. Lists are
// comma-separated. A port is name/protocol/number, with "~" for a field left nil in a slice; a
// slice is addressType;service label ("" the service, "~" none);ports;endpoints, and an endpoint
// address+address/hostname/ready (t, f; else nil)/pod name, a missing or "~" field nil. "*N" in a
// list stands for N generated ports or endpoints.
func decodeSpec(spec string) (svc *api.Service, sls []*discovery.EndpointSlice, podNames, ignoreEmpty bool) {
	fields := strings.Split(spec, "|")
	field := func(i int) string {
		if i < len(fields) {
			return fields[i]
		}
		return ""
	}
	podNames, ignoreEmpty = strings.Contains(field(0), "p"), strings.Contains(field(0), "e")
	svc = &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: field(2), Name: field(3), ResourceVersion: "1"},
		Spec: api.ServiceSpec{Type: api.ServiceType(field(1)), ClusterIP: field(4), ClusterIPs: list(field(5), ","),
			ExternalName: field(7)},
	}
	for _, text := range list(field(6), ",") {
		if n, ok := generated(text, 3000); ok {
			for i := range n {
				svc.Spec.Ports = append(svc.Spec.Ports, api.ServicePort{Name: "p" + strconv.Itoa(i), Protocol: api.ProtocolTCP, Port: int32(i%65535 + 1)})
			}
			continue
		}
		name, proto, number := specPort(text)
		svc.Spec.Ports = append(svc.Spec.Ports, api.ServicePort{Name: deref(name), Protocol: api.Protocol(deref(proto)), Port: deref(number)})
	}
	for i := 8; i < len(fields); i++ {
		sls = append(sls, decodeSlice(svc, i-8, fields[i]))
	}
	return svc, sls, podNames, ignoreEmpty
}

func decodeSlice(svc *api.Service, i int, text string) *discovery.EndpointSlice {
	parts := strings.SplitN(text, ";", 4)
	part := func(i int) string {
		if i < len(parts) {
			return parts[i]
		}
		return ""
	}
	sl := &discovery.EndpointSlice{
		ObjectMeta:  meta.ObjectMeta{Namespace: svc.Namespace, Name: fmt.Sprintf("%s-%d", svc.Name, i), ResourceVersion: "1"},
		AddressType: discovery.AddressType(part(0)),
	}
	switch label := part(1); label {
	case "~":
	case "":
		sl.Labels = map[string]string{discovery.LabelServiceName: svc.Name}
	default:
		sl.Labels = map[string]string{discovery.LabelServiceName: label}
	}
	for _, text := range list(part(2), ",") {
		if n, ok := generated(text, 3000); ok {
			for i := range n {
				sl.Ports = append(sl.Ports, slicePort("p"+strconv.Itoa(i), api.ProtocolTCP, int32(i%65535+1)))
			}
			continue
		}
		name, proto, number := specPort(text)
		sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: name, Protocol: (*api.Protocol)(proto), Port: number})
	}
	for _, text := range list(part(3), ",") {
		if strings.HasPrefix(text, "*") {
			// *N or *NxM: N endpoints of M addresses each, within the API's limits (1,000
			// endpoints a slice, 100 addresses an endpoint).
			count, per, _ := strings.Cut(text, "x")
			n, _ := generated(count, 1000)
			m, ok := generated("*"+per, 100)
			if !ok || m == 0 {
				m = 1
			}
			for i := range n {
				e := discovery.Endpoint{}
				for j := range m {
					a := i*m + j
					addr := fmt.Sprintf("10.%d.%d.%d", 128+a>>16, a>>8&255, a&255)
					if sl.AddressType == discovery.AddressTypeIPv6 {
						addr = fmt.Sprintf("fd00:200::%x", a+1)
					}
					e.Addresses = append(e.Addresses, addr)
				}
				sl.Endpoints = append(sl.Endpoints, e)
			}
			continue
		}
		f := strings.Split(text, "/")
		e := discovery.Endpoint{Addresses: list(f[0], "+")}
		if len(f) > 1 && f[1] != "~" {
			e.Hostname = &f[1]
		}
		if len(f) > 2 && (f[2] == "t" || f[2] == "f") {
			ready := f[2] == "t"
			e.Conditions.Ready = &ready
		}
		if len(f) > 3 && f[3] != "~" {
			e.TargetRef = &api.ObjectReference{Kind: "Pod", Namespace: svc.Namespace, Name: f[3]}
		}
		sl.Endpoints = append(sl.Endpoints, e)
	}
	return sl
}

// specPort reads name/protocol/number; a missing or "~" field is nil.
func specPort(text string) (name, proto *string, number *int32) {
	f := strings.Split(text, "/")
	str := func(i int) *string {
		if i >= len(f) || f[i] == "~" {
			return nil
		}
		return &f[i]
	}
	name, proto = str(0), str(1)
	if s := str(2); s != nil {
		n, _ := strconv.ParseInt(*s, 10, 64)
		v := int32(n) // wraps, as a hostile client's number may
		number = &v
	}
	return name, proto, number
}

// generated reads "*N", capped at limit.
func generated(text string, limit int) (int, bool) {
	if !strings.HasPrefix(text, "*") {
		return 0, false
	}
	n, err := strconv.Atoi(text[1:])
	if err != nil || n < 0 {
		return 0, false
	}
	return min(n, limit), true
}

func list(text, sep string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(text, sep)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
