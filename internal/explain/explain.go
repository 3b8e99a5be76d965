// Package explain is the explain option: what kubetree answers for a name, as ServeDNS answers it,
// and why: the objects the records came from, or the reason the name does not exist; and the dump
// of every name. Everything it says is read from what the watcher and the applier already hold (the
// stored objects keep their resourceVersion and their problems; a published set shares its slices
// with the store), so the option adds nothing to the heap of a cluster; only to tell "filtered by a
// selector" from "does not exist" does it ask the API server, one list by name, as the audit does.
// It is served over HTTP (server.go); what the HTTP API writes, and the kubectl plugin reads, is
// internal/explainapi.
package explain

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"weak"

	"github.com/coredns/coredns/plugin/pkg/dnsutil"

	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/query"
	"github.com/kubetree/kubetree/internal/records"

	"github.com/miekg/dns"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Instance is what explain reads of one kubetree instance.
type Instance struct {
	Server string // the server block, as the metrics label it
	// Answerer answers as ServeDNS does, from the published state it reads.
	Answerer *query.Answerer
	Stores   Stores
	// The options that decide which objects are served.
	Namespaces        map[string]bool // the namespaces option; empty: every namespace
	NamespaceSelector *meta.LabelSelector
	LabelSelector     *meta.LabelSelector
	IgnoreEmpty       bool
	// Authorize decides for a caller that is not on loopback (nil: such a caller is refused).
	Authorize Authorizer
}

// Authorizer decides for a caller off loopback, which brings a bearer token from source
// (apiclient.Reviewer: the API server's TokenReview and SubjectAccessReview). Each returns status 0
// when the caller may, else the HTTP status to answer, with why.
type Authorizer interface {
	// Authenticate: whether the API server knows the token.
	Authenticate(ctx context.Context, source netip.Addr, token string) (status int, why string)
	// Authorize: whether the bearer may verb (get: explain, list: dump) kubetree's names of
	// namespace ns ("": of every namespace).
	Authorize(ctx context.Context, source netip.Addr, token, verb, ns string) (status int, why string)
}

// Stores are the watcher's reads (*watcher.Watcher).
type Stores interface {
	StoredService(key string, multicluster bool) (*object.StoredService, []*object.StoredSlice, string)
	NamespaceStored(ns string) bool
	Unselected(resource, ns, name string) (bool, labels.Set, error)
}

// Explainer explains one instance's answers.
type Explainer struct {
	*Instance
	zones []string // the answerer's zones by name, for tree.MatchZone

	// The names of the service set the dump last cut into (ownersOf).
	lastMu     sync.Mutex
	lastSet    weak.Pointer[records.ServiceSet] // weak: a set replaced since is not kept alive for this
	lastOwners []owned
}

// New returns the explainer of in.
func New(in *Instance) *Explainer {
	e := &Explainer{Instance: in}
	for _, z := range in.Answerer.Zones {
		e.zones = append(e.zones, z.Name)
	}
	return e
}

// allowsNamespace reports whether the namespaces option lets a namespace be served.
func (e *Explainer) allowsNamespace(ns string) bool {
	return len(e.Namespaces) == 0 || e.Namespaces[ns]
}

// Explain answers qname (fully qualified) and qtype as ServeDNS does for a query from client, and
// says why.
func (e *Explainer) Explain(ctx context.Context, qname string, qtype uint16, client netip.Addr) *explainapi.Explanation {
	a := e.Answerer
	qname = strings.ToLower(dns.Fqdn(qname))
	x := &explainapi.Explanation{Name: qname, Type: dns.Type(qtype).String(), Server: e.Server,
		Client: explainapi.Client{Address: client.String()}, Answer: []string{}, Ns: []string{}, Extra: []string{}}
	if a.Pods != nil {
		if p := a.Pods.ClientAt(client); p != nil {
			x.Client.Pod = p.Namespace + "/" + p.Name
		}
	}
	z, ok := a.ZoneOf(qname)
	if !ok {
		x.Reason, x.Why = explainapi.ReasonOutsideZones, fmt.Sprintf("%s is in none of kubetree's zones %v: ServeDNS passes it to the next plugin", qname, e.zones)
		return x
	}
	r := new(dns.Msg)
	r.SetQuestion(qname, qtype)
	w := &query.InternalWriter{Client: &net.UDPAddr{IP: client.AsSlice()}}
	// The query stays in kubetree, as the probe's does: neither passed on nor resolved upstream;
	// isolation applies to it as to the client it names.
	var hidden bool
	if a.Answer(query.Internal(ctx, &hidden), w, r, z); w.Msg == nil {
		x.Rcode, x.Reason, x.Why = dns.RcodeToString[dns.RcodeServerFailure], explainapi.ReasonNotSynced, "the answerer wrote no reply"
		return x
	}
	m := w.Msg
	x.Rcode = dns.RcodeToString[m.Rcode]
	for _, rrs := range []struct {
		from []dns.RR
		to   *[]string
	}{{m.Answer, &x.Answer}, {m.Ns, &x.Ns}, {m.Extra, &x.Extra}} {
		for _, rr := range rrs.from {
			*rrs.to = append(*rrs.to, rr.String())
		}
	}
	x.Next = m.Rcode == dns.RcodeNameError && a.Fall.Through(qname)
	switch {
	case m.Rcode == dns.RcodeServerFailure && !a.Synced.Load():
		x.Reason, x.Why = explainapi.ReasonNotSynced, "kubetree has not yet served a full sync with the API server: a name it does not know is SERVFAIL, never NXDOMAIN"
	case hidden:
		e.isolated(x, qname, z)
	case z.Reverse && len(qname) > len(z.Name):
		e.reverse(x, m) // below a reverse zone's apex, the reverse index answers, not the tree
	default:
		e.forward(x, m, z)
	}
	return x
}

// isolated explains an answer that isolate changed for the client: a name of a namespace it may
// not resolve is NXDOMAIN to it, and an address's PTR records leave out the services it may not.
func (e *Explainer) isolated(x *explainapi.Explanation, qname string, z records.ServedZone) {
	who := "the client, no known pod,"
	if x.Client.Pod != "" {
		ns, _, _ := strings.Cut(x.Client.Pod, "/")
		who = fmt.Sprintf("the client, pod %s, resolves the names of its namespace %s and of the open namespaces only, and", x.Client.Pod, ns)
	} else {
		who += " resolves the names of the open namespaces only (isolate refuse), and"
	}
	x.Reason = explainapi.ReasonIsolated
	if z.Reverse {
		x.Why = fmt.Sprintf("isolate: %s the PTR records of %s leave out the services it may not resolve", who, qname)
		return
	}
	x.Why = fmt.Sprintf("isolate: %s %s is in another namespace: it is answered as a name that does not exist", who, qname)
}

// reverse explains a name in a reverse zone: the services whose addresses its PTR records name.
func (e *Explainer) reverse(x *explainapi.Explanation, m *dns.Msg) {
	switch {
	case len(m.Answer) > 0:
		x.Reason, x.Why = explainapi.ReasonReverse, "the PTR records of an address that services have (a cluster IP or a ready endpoint)"
		for _, rr := range m.Answer {
			if ptr, ok := rr.(*dns.PTR); ok {
				if set, ok := e.setOf(ptr.Ptr); ok {
					e.sources(x, set, reverseAddr(x.Name))
				}
			}
		}
	case m.Rcode == dns.RcodeSuccess:
		x.Reason, x.Why = explainapi.ReasonNoData, "the name exists (an address kubetree knows, or a name above one) but has no records of this type"
	default:
		x.Reason, x.Why = explainapi.ReasonNoSuchAddress, "no service has this address as a cluster IP or a ready endpoint"
	}
}

// setOf finds the service set that answers a name (a PTR target), in whichever zone it is.
func (e *Explainer) setOf(name string) (*records.ServiceSet, bool) {
	z, ok := e.Answerer.ZoneOf(name)
	if !ok {
		return nil, false
	}
	set, _, _ := e.Answerer.Tree.Lookup(name, z.Name)
	s, ok := set.(*records.ServiceSet)
	return s, ok
}

// forward explains a name in a forward zone, by what the tree holds at it.
func (e *Explainer) forward(x *explainapi.Explanation, m *dns.Msg, z records.ServedZone) {
	set, rest, exists := e.Answerer.Tree.Lookup(x.Name, z.Name)
	switch s := set.(type) {
	case *records.ServiceSet:
		e.sources(x, s, replyAddrs(m))
		e.serviceAnswer(x, m, s, rest)
		return
	case *records.FixedSet:
		x.Reason, x.Why = explainapi.ReasonZoneRecords, "records of the zone itself (SOA, NS, dns-version, the nameserver's addresses), made by kubetree"
		return
	case records.NameOnly:
		x.Reason, x.Why = explainapi.ReasonNamespace, "a name that exists without records of its own (svc, pod, or a served namespace): NODATA"
		return
	}
	rel := x.Name[:len(x.Name)-len(z.Name)]
	switch {
	case exists:
		x.Reason, x.Why = explainapi.ReasonInterior, "a name that exists only for the names below it (an empty non-terminal): NODATA"
	case strings.HasSuffix(rel, ".pod.") || rel == "pod.":
		e.pod(x, m, rel)
	case len(m.Answer) > 0 || m.Rcode == dns.RcodeSuccess:
		x.Reason, x.Why = explainapi.ReasonNoData, "the name exists without records of this type"
	default:
		e.miss(x, rel, z)
	}
}

// serviceAnswer says what the service's set answered at the name (rest: the labels below the
// service's own name).
func (e *Explainer) serviceAnswer(x *explainapi.Explanation, m *dns.Msg, s *records.ServiceSet, rest string) {
	what := map[object.Kind]string{object.ClusterIP: "ClusterIP", object.Headless: "headless", object.ExternalName: "ExternalName"}[s.Kind()]
	switch {
	case m.Rcode == dns.RcodeNameError:
		x.Reason, x.Why = explainapi.ReasonNoSuchName, fmt.Sprintf("the %s service %s exists, but no ready endpoint or named port is called %s", what, s.Name(), strings.TrimSuffix(rest, "."))
	case len(m.Answer) == 0:
		x.Reason, x.Why = explainapi.ReasonNoData, fmt.Sprintf("the %s service %s has no %s records at this name", what, s.Name(), x.Type)
	case rest == "" && s.Kind() == object.Headless:
		x.Reason, x.Why = explainapi.ReasonService, "a headless service: its ready endpoints, from the EndpointSlices listed"
	case rest == "" && s.Kind() == object.ExternalName:
		x.Reason, x.Why = explainapi.ReasonService, "an ExternalName service: a CNAME to its target (followed when kubetree serves the target)"
	case rest == "":
		x.Reason, x.Why = explainapi.ReasonService, "a ClusterIP service: its cluster IPs (spec.clusterIPs), or SRV records of its named ports"
	case strings.HasPrefix(rest, "_"):
		x.Reason, x.Why = explainapi.ReasonSRV, fmt.Sprintf("SRV records of a named port of the %s service", what)
	default:
		x.Reason, x.Why = explainapi.ReasonEndpoint, fmt.Sprintf("an endpoint of the %s service, by its hostname (or pod name, or dashed address)", what)
	}
}

// sources lists the objects the set's records came from: the service, and the EndpointSlices that
// hold one of addrs (every slice of the set when addrs is empty: the names below the service come
// from them). The objects are as the watcher stores them now; a slice that has changed since the
// set was published is left out.
func (e *Explainer) sources(x *explainapi.Explanation, s *records.ServiceSet, addrs map[netip.Addr]bool) {
	svc, sls, kind := e.stored(s)
	if svc == nil {
		return
	}
	if !slices.ContainsFunc(x.From, func(o explainapi.Object) bool {
		return o.Kind == kind && o.Namespace == svc.Namespace && o.Name == svc.Name
	}) {
		x.From = append(x.From, explainapi.Object{Kind: kind, Namespace: svc.Namespace, Name: svc.Name, ResourceVersion: svc.ResourceVersion})
	}
	published := s.Slices()
	for _, sl := range sls {
		if sl.Model == nil || !slices.Contains(published, sl.Model) || len(addrs) > 0 && !holdsAny(sl.Model, addrs) {
			continue
		}
		x.From = append(x.From, explainapi.Object{Kind: "EndpointSlice", Namespace: sl.Namespace, Name: sl.Name, ResourceVersion: sl.ResourceVersion})
	}
	_, problems := object.Assemble(svc, sls)
	e.problems(x, problems)
}

// replyAddrs are the addresses of a reply's A and AAAA records.
func replyAddrs(m *dns.Msg) map[netip.Addr]bool {
	addrs := map[netip.Addr]bool{}
	for _, rrs := range [][]dns.RR{m.Answer, m.Extra} {
		for _, rr := range rrs {
			if ip, ok := records.AddressOf(rr); ok {
				addrs[ip] = true
			}
		}
	}
	return addrs
}

// reverseAddr is the address a reverse name stands for.
func reverseAddr(name string) map[netip.Addr]bool {
	ip, err := netip.ParseAddr(dnsutil.ExtractAddressFromReverse(name))
	if err != nil {
		return nil
	}
	return map[netip.Addr]bool{ip.Unmap(): true}
}

func holdsAny(sl *object.EndpointSlice, addrs map[netip.Addr]bool) bool {
	for i := range sl.Len() {
		if addrs[sl.Endpoint(i).Addr] {
			return true
		}
	}
	return false
}

func (e *Explainer) problems(x *explainapi.Explanation, problems []object.Problem) {
	for _, p := range problems {
		x.Problems = append(x.Problems, explainapi.Problem{Object: p.Object, ResourceVersion: p.Version, Text: p.Text})
	}
}

// stored finds what the watcher stores of a published set's service (or ServiceImport): the
// object, its slices and its kind.
func (e *Explainer) stored(s *records.ServiceSet) (*object.StoredService, []*object.StoredSlice, string) {
	z, ok := e.Answerer.ZoneOf(s.Name())
	if !ok {
		return nil, nil, ""
	}
	labels := strings.SplitN(s.Name()[:len(s.Name())-len(z.Name)], ".", 3) // <svc>.<ns>.svc.
	if len(labels) < 3 {
		return nil, nil, ""
	}
	return e.Stores.StoredService(labels[1]+"/"+labels[0], z.Multicluster)
}

// pod explains <address>.<ns>.pod.<zone>.
func (e *Explainer) pod(x *explainapi.Explanation, m *dns.Msg, rel string) {
	switch {
	case m.Rcode == dns.RcodeSuccess:
		x.Reason, x.Why = explainapi.ReasonPod, "a pod name: the address is in the name"
		if e.Answerer.PodMode == query.PodsVerified {
			x.Why += ", and a pod of the namespace has it (pods verified)"
		}
	case e.Answerer.PodMode == query.PodsDisabled:
		x.Reason, x.Why = explainapi.ReasonPodsDisabled, "pods disabled (the default): pod names do not exist"
	default:
		labels := strings.Split(strings.TrimSuffix(rel, "."), ".")
		if len(labels) >= 3 && !e.namespaceMiss(x, labels[len(labels)-2]) {
			return
		}
		x.Reason, x.Why = explainapi.ReasonNoSuchPod, "the name is no address, or (pods verified) no running pod of the namespace has the address"
	}
}

// miss explains an NXDOMAIN for rel (the name below zone z, with its trailing dot) that no set
// answers: by its shape, the namespace, the service and its objects in turn.
func (e *Explainer) miss(x *explainapi.Explanation, rel string, z records.ServedZone) {
	labels := strings.Split(strings.TrimSuffix(rel, "."), ".")
	n := len(labels)
	if n < 2 || labels[n-1] != "svc" {
		x.Reason, x.Why = explainapi.ReasonNotClusterName, "not a name of the cluster's shape (<service>.<namespace>.svc, <address>.<namespace>.pod, dns-version, ns.dns)"
		return
	}
	ns := labels[n-2]
	if !e.namespaceMiss(x, ns) {
		return
	}
	if n == 2 {
		x.Reason, x.Why = explainapi.ReasonPending, fmt.Sprintf("namespace %s is stored but not yet published: its change is being applied", ns)
		return
	}
	name := labels[n-3]
	key := ns + "/" + name
	svc, sls, kind := e.Stores.StoredService(key, z.Multicluster)
	switch {
	case svc == nil:
		e.serviceMiss(x, kind, ns, name)
		return
	case svc.Model == nil:
		x.Reason, x.Why = explainapi.ReasonRejected, fmt.Sprintf("the %s %s (version %s) cannot be represented in DNS: see problems", kind, key, svc.ResourceVersion)
	}
	x.From = append(x.From, explainapi.Object{Kind: kind, Namespace: svc.Namespace, Name: svc.Name, ResourceVersion: svc.ResourceVersion})
	for _, sl := range sls {
		x.From = append(x.From, explainapi.Object{Kind: "EndpointSlice", Namespace: sl.Namespace, Name: sl.Name, ResourceVersion: sl.ResourceVersion})
	}
	model, problems := object.Assemble(svc, sls)
	e.problems(x, problems)
	switch {
	case model == nil:
	case model.Kind == object.Headless && model.ReadyAddrs() == 0:
		x.Reason, x.Why = explainapi.ReasonNoReady, fmt.Sprintf("the headless %s %s has no ready endpoint in its %d EndpointSlices: it has no name until one is ready", kind, key, len(sls))
	case model.Kind == object.ClusterIP && e.IgnoreEmpty && model.ReadyAddrs() == 0:
		x.Reason, x.Why = explainapi.ReasonEmptyIgnored, fmt.Sprintf("the %s %s has no ready endpoint, and ignore empty_service is set", kind, key)
	default:
		x.Reason, x.Why = explainapi.ReasonPending, fmt.Sprintf("the %s %s is stored but not yet published: its change is being applied", kind, key)
	}
}

// namespaceMiss explains a miss by its namespace, and reports false when it did: the namespace is
// left out by namespaces or namespace_labels, or does not exist.
func (e *Explainer) namespaceMiss(x *explainapi.Explanation, ns string) bool {
	if !e.allowsNamespace(ns) {
		x.Reason, x.Why = explainapi.ReasonNSFiltered, fmt.Sprintf("namespace %s is not among those the namespaces option serves %v", ns, slices.Sorted(maps.Keys(e.Namespaces)))
		return false
	}
	if e.Stores.NamespaceStored(ns) {
		return true
	}
	x.Reason, x.Why = explainapi.ReasonNoSuchNS, fmt.Sprintf("namespace %s does not exist", ns)
	if e.NamespaceSelector == nil {
		return false
	}
	found, lbls, err := e.Stores.Unselected("namespaces", "", ns)
	switch {
	case err != nil:
		x.Why = fmt.Sprintf("namespace %s is not served: it does not exist or namespace_labels does not select it (asking the API server failed: %v)", ns, err)
	case found:
		x.Reason, x.Why = explainapi.ReasonNSNotSelected, fmt.Sprintf("namespace %s exists, but namespace_labels (%s) does not select its labels %v", ns, selectorText(e.NamespaceSelector), lbls)
	}
	return false
}

// serviceMiss explains a service the watcher does not store: there is none, or labels leaves it out.
func (e *Explainer) serviceMiss(x *explainapi.Explanation, kind, ns, name string) {
	x.Reason, x.Why = explainapi.ReasonNoSuchService, fmt.Sprintf("no %s %s/%s", kind, ns, name)
	sel := e.LabelSelector
	if sel == nil || kind != "Service" {
		return
	}
	found, lbls, err := e.Stores.Unselected("services", ns, name)
	switch {
	case err != nil:
		x.Why = fmt.Sprintf("no Service %s/%s is served: it does not exist or labels does not select it (asking the API server failed: %v)", ns, name, err)
	case found:
		x.Reason, x.Why = explainapi.ReasonLabelsFiltered, fmt.Sprintf("the Service %s/%s exists, but labels (%s) does not select its labels %v", ns, name, selectorText(sel), lbls)
	}
}

func selectorText(sel *meta.LabelSelector) string {
	s, err := meta.LabelSelectorAsSelector(sel)
	if err != nil {
		return err.Error()
	}
	return s.String()
}
