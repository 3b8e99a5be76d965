package fuzz_test

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coredns/caddy"

	"github.com/kubetree/kubetree/external"
	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/plugintest"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/watcher"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// objectsStanza has two forward zones, so that a service's records are built twice, and both
// reverse zones, so that every address a service has is indexed.
const objectsStanza = `kubetree cluster.local other.local in-addr.arpa ip6.arpa {
	ttl 10
}`

// fixedObjects are FuzzObjectsToRecords' other services, whose answers must not change.
func fixedObjects() []runtime.Object {
	return []runtime.Object{
		k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, k8stest.TCP("http", 80), k8stest.UDP("dns", 53)),
		k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)),
			k8stest.Endpoint{Addrs: []string{"10.244.1.5"}, Hostname: "web-0"}),
		k8stest.HeadlessService("prod", "db", k8stest.TCP("pg", 5432)),
		k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
			k8stest.Endpoint{Addrs: []string{"10.244.0.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.0.2"}}),
		k8stest.Slice("prod", "db", "db-2", discovery.AddressTypeIPv6, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
			k8stest.Endpoint{Addrs: []string{"fd00::1"}, Hostname: "db-0"}),
	}
}

// fixedQueries are the questions whose answers FuzzObjectsToRecords compares before and after.
func fixedQueries(k *plugintest.Plugin) []dns.Question {
	var qs []dns.Question
	for _, z := range k.Forward {
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
	fixed := fixedObjects()
	next := &plugintest.NextHandler{}
	// The fixed services' answers on their own.
	k, _ := objectsKubetree(f, fixed, next, false)
	services := serviceNames(k, fixed)
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
		k, a := objectsKubetree(t, fixed, next, ignoreEmpty)
		stored, storedSlices := plugintest.Slim(t, svc, sls, podNames)
		key := stored.Key()
		// The watcher's own index hands the service its slices, and only those that name it.
		index := watcher.NewSliceIndex()
		for _, sl := range storedSlices {
			index.Replace(nil, sl)
		}
		model, _ := object.Assemble(stored, index.Of(key))
		checkProblems(t, svc, sls, podNames, stored, storedSlices, model)

		if len(validation.IsDNS1123Label(svc.Namespace)) == 0 {
			a.ApplyNamespace(svc.Namespace, true)
		}
		size, ptrs := k.Tree.Size(), k.Reverse.Sizes()
		names := services
		if model != nil {
			names = append(slices.Clone(services), serviceNames(k, []runtime.Object{svc})...)
		}
		for round := range 2 { // the second round replaces the service by an equal one
			a.ApplyService(key, stored, index.Of(key), true)
			for _, q := range fixedQueries(k) {
				if got := queryString(k, q); got != baseline[q] {
					t.Fatalf("round %d: %s %s changed by %s/%s:\n%s\nwas\n%s", round, q.Name, dns.TypeToString[q.Qtype],
						svc.Namespace, svc.Name, got, baseline[q])
				}
			}
			queryService(t, k, next, names, svc, model)
			queryExternal(t, k, svc, model)
		}
		a.ApplyService(key, nil, nil, true)
		for _, q := range fixedQueries(k) {
			if got := queryString(k, q); got != baseline[q] {
				t.Fatalf("after removal: %s %s changed:\n%s\nwas\n%s", q.Name, dns.TypeToString[q.Qtype], got, baseline[q])
			}
		}
		if k.Tree.Size() != size || k.Reverse.Sizes() != ptrs {
			t.Fatalf("removal leaves names behind: %d names, PTR index %v; before %d, %v", k.Tree.Size(), k.Reverse.Sizes(), size, ptrs)
		}
		if k.External.Size() != 0 { // the fixed services have no external IPs
			t.Fatalf("removal leaves external IPs behind: %v", k.External)
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

// objectsKubetree returns a synced kubetree of objectsStanza whose tree holds the fixed services,
// applied as the watcher applies them.
func objectsKubetree(t testing.TB, fixed []runtime.Object, next *plugintest.NextHandler, ignoreEmpty bool) (*plugintest.Plugin, *applier.Applier) {
	stanza := objectsStanza
	if ignoreEmpty {
		stanza = strings.Replace(stanza, "{", "{\n\tignore empty_service", 1)
	}
	k, a := plugintest.Wired(t, stanza)
	k.Next = next
	k.SyncedFlag.Store(true)
	a.ApplyNamespace("prod", true)
	index := watcher.NewSliceIndex()
	var services []*object.StoredService
	for _, o := range fixed {
		switch o := o.(type) {
		case *api.Service:
			svc, _ := plugintest.Slim(t, o, nil, false)
			services = append(services, svc)
		case *discovery.EndpointSlice:
			sl, _ := object.SliceTransform(object.SliceOptions{})(o)
			index.Replace(nil, sl.(*object.StoredSlice))
		}
	}
	for _, svc := range services {
		a.ApplyService(svc.Key(), svc, index.Of(svc.Key()), true)
	}
	return k, a
}

// queryString is the reply to q as text, with the SOA serial (the clock) taken out.
func queryString(k *plugintest.Plugin, q dns.Question) string {
	r := new(dns.Msg)
	r.SetQuestion(q.Name, q.Qtype)
	r.Id = 1
	w := &plugintest.CaptureWriter{}
	code, err := k.ServeDNS(context.Background(), w, r)
	if w.Msg == nil {
		return fmt.Sprintf("rcode %d, error %v", code, err)
	}
	return replyTextWithoutSerial(w.Msg)
}

// replyTextWithoutSerial is replyText with the SOA serials taken out: the serial follows the clock,
// and moves between two queries whenever the records changed in the second before.
func replyTextWithoutSerial(m *dns.Msg) string {
	m = m.Copy()
	for _, rr := range append(m.Answer, m.Ns...) {
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

// checkProblems checks that whatever the model leaves out is described by a problem with text.
func checkProblems(t *testing.T, svc *api.Service, sls []*discovery.EndpointSlice, podNames bool, stored *object.StoredService, storedSlices []*object.StoredSlice, model *object.Service) {
	t.Helper()
	problems := slices.Clone(stored.Problems())
	for _, sl := range storedSlices {
		problems = append(problems, sl.Problems()...)
	}
	for _, p := range problems {
		if p.Text == "" || p.Object == "" {
			t.Fatalf("problem without text or object: %+v", p)
		}
	}
	described := func(value string) bool {
		for _, p := range problems {
			if strings.Contains(p.Text, strconv.Quote(value)) {
				return true
			}
		}
		return false
	}
	if model == nil {
		if len(stored.Problems()) == 0 {
			t.Fatalf("service %s/%s left out without a problem", svc.Namespace, svc.Name)
		}
		return
	}

	if model.Kind == object.ClusterIP {
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
	if model.Kind != object.ExternalName {
		var kept []object.ExternalAddr
		if model.Outside != nil {
			kept = model.Outside.External
		}
		texts := slices.Clone(svc.Spec.ExternalIPs)
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				texts = append(texts, in.IP)
			} else if in.Hostname != "" {
				texts = append(texts, in.Hostname)
			}
		}
		for _, text := range texts {
			ip, err := netip.ParseAddr(text)
			host := strings.ToLower(strings.TrimSuffix(text, ".")) + "."
			if !slices.Contains(kept, object.ExternalAddr{Addr: ip}) && (err == nil || !slices.Contains(kept, object.ExternalAddr{Host: host})) && !described(text) {
				t.Fatalf("external address %q left out without a problem", text)
			}
		}
		for _, p := range svc.Spec.Ports {
			if p.Name != "" && !hasPort(model.Ports, p.Name, string(p.Protocol), p.Port) && !described(p.Name) {
				t.Fatalf("service port %+v left out without a problem", p)
			}
		}
	}
	for i, sl := range sls {
		m := storedSlices[i].Model
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
		for _, e := range m.Endpoints() {
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

func hasPort(ports []object.Port, name, protocol string, number int32) bool {
	return slices.Contains(ports, object.Port{Name: name, Protocol: strings.ToLower(protocol), Port: uint16(number)}) && number > 0 && number < 65536
}

// queryService asks for every name the service should have, and some it should not, in every
// forward zone, and checks each reply; each PTR record must point at a name with that address.
func queryService(t *testing.T, k *plugintest.Plugin, next *plugintest.NextHandler, services []string, svc *api.Service, model *object.Service) {
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
	for i, z := range k.Forward {
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
			eps := sl.Endpoints()
			if len(eps) > 8 {
				eps = append(eps[:8], eps[len(eps)-1]) // and the last
			}
			for _, e := range eps {
				qs = append(qs, query{plugintest.EndpointName(e) + "." + name, some})
				addrs = append(addrs, e.Addr.String())
			}
		}
	}
	for _, text := range addrs {
		if ip, err := netip.ParseAddr(text); err == nil {
			qs = append(qs, query{records.ReverseName(ip), []uint16{dns.TypePTR}})
		}
	}
	// Answers of hundreds of thousands of records would only make the fuzzer slow: the names that
	// enumerate every endpoint are skipped then, the endpoints' own names are not.
	huge := model != nil && (srvCount(model) > 20000 || model.ReadyAddrs() > 20000)
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
func checkPTRTarget(t *testing.T, k *plugintest.Plugin, next *plugintest.NextHandler, services []string, ptr *dns.PTR) {
	t.Helper()
	ip, bits, ok := records.ParseReverse(ptr.Hdr.Name)
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
func srvCount(s *object.Service) int {
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
// flags holds 'p' for endpoint_pod_names and 'e' for ignore empty_service, then after a ';' the
// service's external addresses: spec.externalIPs, and load balancer ingress as i:IP or h:hostname. Lists are
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
	flags, external, _ := strings.Cut(field(0), ";")
	podNames, ignoreEmpty = strings.Contains(flags, "p"), strings.Contains(flags, "e")
	svc = &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: field(2), Name: field(3), ResourceVersion: "1"},
		Spec: api.ServiceSpec{Type: api.ServiceType(field(1)), ClusterIP: field(4), ClusterIPs: splitList(field(5), ","),
			ExternalName: field(7)},
	}
	for _, text := range splitList(external, ",") {
		switch {
		case strings.HasPrefix(text, "i:"):
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, api.LoadBalancerIngress{IP: text[2:]})
		case strings.HasPrefix(text, "h:"):
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, api.LoadBalancerIngress{Hostname: text[2:]})
		default:
			svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, text)
		}
	}
	for _, text := range splitList(field(6), ",") {
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
	for _, text := range splitList(part(2), ",") {
		if n, ok := generated(text, 3000); ok {
			for i := range n {
				sl.Ports = append(sl.Ports, k8stest.SlicePort("p"+strconv.Itoa(i), api.ProtocolTCP, int32(i%65535+1)))
			}
			continue
		}
		name, proto, number := specPort(text)
		sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: name, Protocol: (*api.Protocol)(proto), Port: number})
	}
	for _, text := range splitList(part(3), ",") {
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
		e := discovery.Endpoint{Addresses: splitList(f[0], "+")}
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

func splitList(text, sep string) []string {
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

// queryExternal asks kubetree_external (with headless) for the service's external names: every
// reply packs, and its addresses are the service's own external addresses or endpoints.
func queryExternal(t *testing.T, k *plugintest.Plugin, svc *api.Service, model *object.Service) {
	t.Helper()
	e, err := external.Parse(caddy.NewTestController("dns", "kubetree_external example.org {\n headless\n}"))
	if err != nil {
		t.Fatal(err)
	}
	e.Use(k, plugintest.StubUpstream{Answer: plugintest.UpstreamAnswer})
	e.Next = &plugintest.NextHandler{}
	own := map[string]bool{plugintest.UpstreamAnswer: true}
	name := svc.Name + "." + svc.Namespace + ".example.org."
	names := []string{name, "x." + name, "_http._tcp." + name}
	if model != nil {
		if model.Outside != nil {
			for _, a := range model.Outside.External {
				own[a.Addr.String()] = true
			}
		}
		for _, sl := range model.Slices {
			eps := sl.Endpoints()
			for i, ep := range eps {
				own[ep.Addr.String()] = true
				if i < 4 {
					names = append(names, plugintest.EndpointName(ep)+"."+name)
				}
			}
		}
		if model.ReadyAddrs() > 20000 {
			names = names[:0]
		}
	}
	for _, qname := range names {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT} {
			r := new(dns.Msg)
			r.SetQuestion(dns.Fqdn(qname), qtype)
			if _, err := r.Copy().Pack(); err != nil {
				continue
			}
			w := &plugintest.CaptureWriter{}
			if _, err := e.ServeDNS(context.Background(), w, r); err != nil || w.Msg == nil {
				if err != nil || e.Next.(*plugintest.NextHandler).Calls == 0 {
					t.Fatalf("%s %s: error %v, reply %v", qname, dns.TypeToString[qtype], err, w.Msg)
				}
				continue
			}
			if _, err := w.Msg.Pack(); err != nil {
				t.Fatalf("%s %s: reply does not pack: %v\n%v", qname, dns.TypeToString[qtype], err, w.Msg)
			}
			for _, rr := range append(slices.Clone(w.Msg.Answer), w.Msg.Extra...) {
				var addr string
				switch v := rr.(type) {
				case *dns.A:
					addr = v.A.String()
				case *dns.AAAA:
					addr = v.AAAA.String()
				default:
					continue
				}
				if !own[addr] {
					t.Fatalf("%s %s: address %s is not the service's:\n%v", qname, dns.TypeToString[qtype], addr, w.Msg)
				}
			}
		}
	}
}
