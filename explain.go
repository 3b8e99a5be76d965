package kubetree

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/coredns/coredns/plugin/pkg/dnsutil"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The explain option: what kubetree answers for a name, as ServeDNS answers it, and why: the
// objects the records came from, or the reason the name does not exist. Everything it says is read
// from what the watcher and the applier already hold (the stored objects keep their
// resourceVersion and their problems; a published set shares its slices with the store), so the
// option adds nothing to the heap of a cluster; only to tell "filtered by a selector" from "does
// not exist" does it ask the API server, one list by name, as the audit does.

// Reasons an explanation gives, in its reason field: short and stable, for scripts and tests.
const (
	reasonOutsideZones   = "outside-zones"
	reasonNotSynced      = "not-synced"
	reasonService        = "service"
	reasonEndpoint       = "endpoint"
	reasonSRV            = "srv"
	reasonNoData         = "nodata"
	reasonZoneRecords    = "zone-records"
	reasonNamespace      = "namespace"
	reasonInterior       = "interior"
	reasonReverse        = "reverse"
	reasonPod            = "pod"
	reasonNoSuchAddress  = "no-such-address"
	reasonNoSuchName     = "no-such-name" // below a service: no endpoint or port of that name
	reasonNoSuchService  = "no-such-service"
	reasonNoSuchNS       = "no-such-namespace"
	reasonNSFiltered     = "namespace-filtered"     // not among namespaces
	reasonNSNotSelected  = "namespace-not-selected" // not matched by namespace_labels
	reasonLabelsFiltered = "labels-filtered"        // not matched by labels
	reasonRejected       = "rejected"
	reasonNoReady        = "headless-without-ready-endpoints"
	reasonEmptyIgnored   = "empty-service-ignored"
	reasonPending        = "pending" // stored, not yet applied
	reasonPodsDisabled   = "pods-disabled"
	reasonNoSuchPod      = "no-such-pod"
	reasonNotClusterName = "not-a-cluster-name"
)

// Explanation is the explain endpoint's answer; README's "Explain" documents its fields.
type Explanation struct {
	Name   string            `json:"name"`
	Type   string            `json:"type"`
	Server string            `json:"server"`
	Client explainedClient   `json:"client"`
	Rcode  string            `json:"rcode,omitempty"` // "" when kubetree does not answer (outside-zones)
	Answer []string          `json:"answer"`
	Ns     []string          `json:"ns"`
	Extra  []string          `json:"extra"`
	Next   bool              `json:"fallthrough,omitempty"` // ServeDNS passes the query to the next plugin
	Reason string            `json:"reason"`
	Why    string            `json:"why"`
	From   []explainedObject `json:"from,omitempty"`
	// Problems are the parts of these objects left out of DNS (the model's Problems).
	Problems []explainedProblem `json:"problems,omitempty"`
}

// explainedClient is the client the answer was made for: the address, and with pods verified the
// pod that address identifies.
type explainedClient struct {
	Address string `json:"address"`
	Pod     string `json:"pod,omitempty"` // namespace/name
}

// explainedObject is an API object as kubetree holds it.
type explainedObject struct {
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

type explainedProblem struct {
	Object          string `json:"object"`
	ResourceVersion string `json:"resourceVersion"`
	Text            string `json:"text"`
}

// explainer explains one Kubetree's answers; nil without the explain option.
type explainer struct {
	k      *Kubetree
	w      *watcher
	server string // the server block, as the metrics label it
}

// defaultExplainClient is the client an explanation assumes when not told one: no pod has it.
var defaultExplainClient = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// explain answers qname (fully qualified) and qtype as ServeDNS does for a query from client, and
// says why.
func (e *explainer) explain(ctx context.Context, qname string, qtype uint16, client netip.Addr) *Explanation {
	k := e.k
	qname = strings.ToLower(dns.Fqdn(qname))
	x := &Explanation{Name: qname, Type: dns.Type(qtype).String(), Server: e.server,
		Client: explainedClient{Address: client.String()}, Answer: []string{}, Ns: []string{}, Extra: []string{}}
	if k.pods != nil {
		if p := k.pods.ClientAt(client); p != nil {
			x.Client.Pod = p.Namespace + "/" + p.Name
		}
	}
	i := tree.MatchZone(k.Zones, qname)
	if i < 0 {
		x.Reason, x.Why = reasonOutsideZones, fmt.Sprintf("%s is in none of kubetree's zones %v: ServeDNS passes it to the next plugin", qname, k.Zones)
		return x
	}
	z := k.zones[i]
	r := new(dns.Msg)
	r.SetQuestion(qname, qtype)
	w := &explainWriter{remote: &net.UDPAddr{IP: client.AsSlice()}}
	// The query stays in kubetree, as the probe's does: neither passed on nor resolved upstream.
	if _, err := k.ServeDNS(context.WithValue(ctx, probeKey{}, true), w, r); err != nil || w.msg == nil {
		x.Rcode, x.Reason, x.Why = dns.RcodeToString[dns.RcodeServerFailure], reasonNotSynced, fmt.Sprintf("the handler failed: %v", err)
		return x
	}
	m := w.msg
	x.Rcode = dns.RcodeToString[m.Rcode]
	for _, rrs := range []struct {
		from []dns.RR
		to   *[]string
	}{{m.Answer, &x.Answer}, {m.Ns, &x.Ns}, {m.Extra, &x.Extra}} {
		for _, rr := range rrs.from {
			*rrs.to = append(*rrs.to, rr.String())
		}
	}
	x.Next = m.Rcode == dns.RcodeNameError && k.Fall.Through(qname)
	switch {
	case m.Rcode == dns.RcodeServerFailure && !k.synced.Load():
		x.Reason, x.Why = reasonNotSynced, "kubetree has not yet served a full sync with the API server: a name it does not know is SERVFAIL, never NXDOMAIN"
	case z.reverse && len(qname) > len(z.name):
		e.reverse(x, m) // below a reverse zone's apex, the reverse index answers, not the tree
	default:
		e.forward(x, m, z)
	}
	return x
}

// reverse explains a name in a reverse zone: the services whose addresses its PTR records name.
func (e *explainer) reverse(x *Explanation, m *dns.Msg) {
	switch {
	case len(m.Answer) > 0:
		x.Reason, x.Why = reasonReverse, "the PTR records of an address that services have (a cluster IP or a ready endpoint)"
		for _, rr := range m.Answer {
			if ptr, ok := rr.(*dns.PTR); ok {
				if set, ok := e.setOf(ptr.Ptr); ok {
					e.sources(x, set, reverseAddr(x.Name))
				}
			}
		}
	case m.Rcode == dns.RcodeSuccess:
		x.Reason, x.Why = reasonNoData, "the name exists (an address kubetree knows, or a name above one) but has no records of this type"
	default:
		x.Reason, x.Why = reasonNoSuchAddress, "no service has this address as a cluster IP or a ready endpoint"
	}
}

// setOf finds the service set that answers a name (a PTR target), in whichever zone it is.
func (e *explainer) setOf(name string) (*records.ServiceSet, bool) {
	i := tree.MatchZone(e.k.Zones, name)
	if i < 0 {
		return nil, false
	}
	set, _, _ := e.k.tree.Lookup(name, e.k.zones[i].name)
	s, ok := set.(*records.ServiceSet)
	return s, ok
}

// forward explains a name in a forward zone, by what the tree holds at it.
func (e *explainer) forward(x *Explanation, m *dns.Msg, z zone) {
	set, rest, exists := e.k.tree.Lookup(x.Name, z.name)
	switch s := set.(type) {
	case *records.ServiceSet:
		e.sources(x, s, replyAddrs(m))
		e.serviceAnswer(x, m, s, rest)
		return
	case *records.FixedSet:
		x.Reason, x.Why = reasonZoneRecords, "records of the zone itself (SOA, NS, dns-version, the nameserver's addresses), made by kubetree"
		return
	case records.NameOnly:
		x.Reason, x.Why = reasonNamespace, "a name that exists without records of its own (svc, pod, or a served namespace): NODATA"
		return
	}
	rel := x.Name[:len(x.Name)-len(z.name)]
	switch {
	case exists:
		x.Reason, x.Why = reasonInterior, "a name that exists only for the names below it (an empty non-terminal): NODATA"
	case strings.HasSuffix(rel, ".pod.") || rel == "pod.":
		e.pod(x, m, rel, z)
	case len(m.Answer) > 0 || m.Rcode == dns.RcodeSuccess:
		x.Reason, x.Why = reasonNoData, "the name exists without records of this type"
	default:
		e.miss(x, rel, z)
	}
}

// serviceAnswer says what the service's set answered at the name (rest: the labels below the
// service's own name).
func (e *explainer) serviceAnswer(x *Explanation, m *dns.Msg, s *records.ServiceSet, rest string) {
	what := map[object.Kind]string{object.ClusterIP: "ClusterIP", object.Headless: "headless", object.ExternalName: "ExternalName"}[s.Kind()]
	switch {
	case m.Rcode == dns.RcodeNameError:
		x.Reason, x.Why = reasonNoSuchName, fmt.Sprintf("the %s service %s exists, but no ready endpoint or named port is called %s", what, s.Name(), strings.TrimSuffix(rest, "."))
	case len(m.Answer) == 0:
		x.Reason, x.Why = reasonNoData, fmt.Sprintf("the %s service %s has no %s records at this name", what, s.Name(), x.Type)
	case rest == "" && s.Kind() == object.Headless:
		x.Reason, x.Why = reasonService, "a headless service: its ready endpoints, from the EndpointSlices listed"
	case rest == "" && s.Kind() == object.ExternalName:
		x.Reason, x.Why = reasonService, "an ExternalName service: a CNAME to its target (followed when kubetree serves the target)"
	case rest == "":
		x.Reason, x.Why = reasonService, "a ClusterIP service: its cluster IPs (spec.clusterIPs), or SRV records of its named ports"
	case strings.HasPrefix(rest, "_"):
		x.Reason, x.Why = reasonSRV, fmt.Sprintf("SRV records of a named port of the %s service", what)
	default:
		x.Reason, x.Why = reasonEndpoint, fmt.Sprintf("an endpoint of the %s service, by its hostname (or pod name, or dashed address)", what)
	}
}

// sources lists the objects the set's records came from: the service, and the EndpointSlices that
// hold one of addrs (every slice of the set when addrs is empty: the names below the service come
// from them). The objects are as the watcher stores them now; a slice that has changed since the
// set was published is left out.
func (e *explainer) sources(x *Explanation, s *records.ServiceSet, addrs map[netip.Addr]bool) {
	svc, sls, kind := e.stored(s)
	if svc == nil {
		return
	}
	if !slices.ContainsFunc(x.From, func(o explainedObject) bool {
		return o.Kind == kind && o.Namespace == svc.Namespace && o.Name == svc.Name
	}) {
		x.From = append(x.From, explainedObject{Kind: kind, Namespace: svc.Namespace, Name: svc.Name, ResourceVersion: svc.ResourceVersion})
	}
	published := s.Slices()
	for _, sl := range sls {
		if sl.Model == nil || !slices.Contains(published, sl.Model) || len(addrs) > 0 && !holdsAny(sl.Model, addrs) {
			continue
		}
		x.From = append(x.From, explainedObject{Kind: "EndpointSlice", Namespace: sl.Namespace, Name: sl.Name, ResourceVersion: sl.ResourceVersion})
	}
	_, problems := object.Assemble(svc, sls)
	e.problems(x, problems)
}

// replyAddrs are the addresses of a reply's A and AAAA records.
func replyAddrs(m *dns.Msg) map[netip.Addr]bool {
	addrs := map[netip.Addr]bool{}
	for _, rrs := range [][]dns.RR{m.Answer, m.Extra} {
		for _, rr := range rrs {
			if ip, ok := addressOf(rr); ok {
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

func (e *explainer) problems(x *Explanation, problems []object.Problem) {
	for _, p := range problems {
		x.Problems = append(x.Problems, explainedProblem{Object: p.Object, ResourceVersion: p.Version, Text: p.Text})
	}
}

// stored finds what the watcher stores of a published set's service (or ServiceImport): the
// object, its slices and its kind.
func (e *explainer) stored(s *records.ServiceSet) (*object.StoredService, []*object.StoredSlice, string) {
	i := tree.MatchZone(e.k.Zones, s.Name())
	if i < 0 {
		return nil, nil, ""
	}
	z := e.k.zones[i]
	labels := strings.SplitN(s.Name()[:len(s.Name())-len(z.name)], ".", 3) // <svc>.<ns>.svc.
	if len(labels) < 3 {
		return nil, nil, ""
	}
	return e.storedService(labels[1]+"/"+labels[0], z.multicluster)
}

// storedService is the stored Service (or, in a multicluster zone, ServiceImport) under key, with
// its slices by name (the index keeps no order, and an explanation reads the same each time).
func (e *explainer) storedService(key string, multicluster bool) (*object.StoredService, []*object.StoredSlice, string) {
	w := e.w
	if multicluster {
		if w.imports == nil {
			return nil, nil, ""
		}
		return storedService(w.imports, key), byName(w.mcIndex.Of(key)), "ServiceImport"
	}
	var sls []*object.StoredSlice
	if w.slices != nil {
		sls = byName(w.sliceIndex.Of(key))
	}
	return storedService(w.services, key), sls, "Service"
}

// byName is a copy of sls sorted by name.
func byName(sls []*object.StoredSlice) []*object.StoredSlice {
	return slices.SortedFunc(slices.Values(sls), func(a, b *object.StoredSlice) int { return strings.Compare(a.Name, b.Name) })
}

// pod explains <address>.<ns>.pod.<zone>.
func (e *explainer) pod(x *Explanation, m *dns.Msg, rel string, z zone) {
	switch {
	case m.Rcode == dns.RcodeSuccess:
		x.Reason, x.Why = reasonPod, "a pod name: the address is in the name"
		if e.k.cfg.podMode == podsVerified {
			x.Why += ", and a pod of the namespace has it (pods verified)"
		}
	case e.k.cfg.podMode == podsDisabled:
		x.Reason, x.Why = reasonPodsDisabled, "pods disabled (the default): pod names do not exist"
	default:
		labels := strings.Split(strings.TrimSuffix(rel, "."), ".")
		if len(labels) >= 3 && !e.namespaceMiss(x, labels[len(labels)-2]) {
			return
		}
		x.Reason, x.Why = reasonNoSuchPod, "the name is no address, or (pods verified) no running pod of the namespace has the address"
	}
}

// miss explains an NXDOMAIN for rel (the name below zone z, with its trailing dot) that no set
// answers: by its shape, the namespace, the service and its objects in turn.
func (e *explainer) miss(x *Explanation, rel string, z zone) {
	labels := strings.Split(strings.TrimSuffix(rel, "."), ".")
	n := len(labels)
	if n < 2 || labels[n-1] != "svc" {
		x.Reason, x.Why = reasonNotClusterName, "not a name of the cluster's shape (<service>.<namespace>.svc, <address>.<namespace>.pod, dns-version, ns.dns)"
		return
	}
	ns := labels[n-2]
	if !e.namespaceMiss(x, ns) || n == 2 {
		return
	}
	name := labels[n-3]
	key := ns + "/" + name
	svc, sls, kind := e.storedService(key, z.multicluster)
	switch {
	case svc == nil:
		e.serviceMiss(x, kind, ns, name)
		return
	case svc.Model == nil:
		x.Reason, x.Why = reasonRejected, fmt.Sprintf("the %s %s (version %s) cannot be represented in DNS: see problems", kind, key, svc.ResourceVersion)
	}
	x.From = append(x.From, explainedObject{Kind: kind, Namespace: svc.Namespace, Name: svc.Name, ResourceVersion: svc.ResourceVersion})
	for _, sl := range sls {
		x.From = append(x.From, explainedObject{Kind: "EndpointSlice", Namespace: sl.Namespace, Name: sl.Name, ResourceVersion: sl.ResourceVersion})
	}
	model, problems := object.Assemble(svc, sls)
	e.problems(x, problems)
	switch {
	case model == nil:
	case model.Kind == object.Headless && model.ReadyAddrs() == 0:
		x.Reason, x.Why = reasonNoReady, fmt.Sprintf("the headless %s %s has no ready endpoint in its %d EndpointSlices: it has no name until one is ready", kind, key, len(sls))
	case model.Kind == object.ClusterIP && e.k.cfg.ignoreEmpty && model.ReadyAddrs() == 0:
		x.Reason, x.Why = reasonEmptyIgnored, fmt.Sprintf("the %s %s has no ready endpoint, and ignore empty_service is set", kind, key)
	default:
		x.Reason, x.Why = reasonPending, fmt.Sprintf("the %s %s is stored but not yet published: its change is being applied", kind, key)
	}
}

// namespaceMiss explains a miss by its namespace, and reports false when it did: the namespace is
// left out by namespaces or namespace_labels, or does not exist.
func (e *explainer) namespaceMiss(x *Explanation, ns string) bool {
	cfg := &e.k.cfg
	if !cfg.allowsNamespace(ns) {
		x.Reason, x.Why = reasonNSFiltered, fmt.Sprintf("namespace %s is not among those the namespaces option serves %v", ns, slices.Sorted(maps.Keys(cfg.namespaces)))
		return false
	}
	if _, exists, _ := e.w.namespaces.GetStore().GetByKey(ns); exists {
		return true
	}
	x.Reason, x.Why = reasonNoSuchNS, fmt.Sprintf("namespace %s does not exist", ns)
	if cfg.namespaceSelector == nil {
		return false
	}
	found, lbls, err := e.w.unselected("namespaces", "", ns)
	switch {
	case err != nil:
		x.Why = fmt.Sprintf("namespace %s is not served: it does not exist or namespace_labels does not select it (asking the API server failed: %v)", ns, err)
	case found:
		x.Reason, x.Why = reasonNSNotSelected, fmt.Sprintf("namespace %s exists, but namespace_labels (%s) does not select its labels %v", ns, selectorText(cfg.namespaceSelector), lbls)
	}
	return false
}

// serviceMiss explains a service the watcher does not store: there is none, or labels leaves it out.
func (e *explainer) serviceMiss(x *Explanation, kind, ns, name string) {
	x.Reason, x.Why = reasonNoSuchService, fmt.Sprintf("no %s %s/%s", kind, ns, name)
	sel := e.k.cfg.labelSelector
	if sel == nil || kind != "Service" {
		return
	}
	found, lbls, err := e.w.unselected("services", ns, name)
	switch {
	case err != nil:
		x.Why = fmt.Sprintf("no Service %s/%s is served: it does not exist or labels does not select it (asking the API server failed: %v)", ns, name, err)
	case found:
		x.Reason, x.Why = reasonLabelsFiltered, fmt.Sprintf("the Service %s/%s exists, but labels (%s) does not select its labels %v", ns, name, selectorText(sel), lbls)
	}
}

func selectorText(sel *meta.LabelSelector) string {
	s, err := meta.LabelSelectorAsSelector(sel)
	if err != nil {
		return err.Error()
	}
	return s.String()
}

// unselected asks the API server for one object that the watcher's selector may have left out,
// by name and without the selector: whether it exists, and its labels. It lists, as the audit
// does, so that the ClusterRole's list and watch are enough.
func (w *watcher) unselected(resource, ns, name string) (bool, labels.Set, error) {
	for _, r := range w.resources {
		if r.name != resource {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), explainLookupTimeout)
		defer cancel()
		list, err := r.unfiltered(ctx, ns, meta.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return false, nil, err
		}
		objs, err := apimeta.ExtractList(list)
		if err != nil {
			return false, nil, err
		}
		for _, obj := range objs {
			// The field selector is the API server's to apply; a server that ignores it still
			// answers right.
			if o, err := apimeta.Accessor(obj); err == nil && o.GetName() == name && o.GetNamespace() == ns {
				return true, labels.Set(o.GetLabels()), nil
			}
		}
		return false, nil, nil
	}
	return false, nil, fmt.Errorf("%s are not watched", resource)
}

// explainWriter keeps the reply of an explained query, which comes from the client it is told.
type explainWriter struct {
	probeWriter
	remote net.Addr
}

func (w *explainWriter) RemoteAddr() net.Addr { return w.remote }
