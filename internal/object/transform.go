package object

import (
	"net/netip"
	"slices"
	"strings"
	"time"
	"unique"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)

// The informers keep only what DNS needs of each object, already checked and converted: the
// transforms below run once per object version, before the object is stored, so the rest of it is
// garbage as soon as it has been decoded, and nothing is parsed again when records are built.

// SlimService is the service informer's transform.
func SlimService(obj any) (any, error) { return slimService(obj, false) }

// SlimServiceWithTopology is the service informer's transform with topology: a headless service's
// model also says where its topology hints come from (Distribution).
func SlimServiceWithTopology(obj any) (any, error) { return slimService(obj, true) }

func slimService(obj any, topology bool) (any, error) {
	s, ok := obj.(*api.Service)
	if !ok {
		return obj, nil // a tombstone (deletes go by key), or already slim
	}
	model, problems := serviceModel(s)
	if model != nil && topology && model.Kind == Headless {
		model.Distribution = distributionOf(s)
	}
	return &StoredService{Meta: metaOf(&s.ObjectMeta), Model: model, problems: problemsRef(problems)}, nil
}

// SliceOptions are the Corefile's settings that change what a slice's model keeps.
type SliceOptions struct {
	PodNames bool // endpoint_pod_names: endpoints without a hostname are named after their pod
	Zonal    bool // zonal: keep each endpoint's zone
	// topology: keep what kube-proxy's topology rules read of each endpoint (its zone, node and
	// hints)
	Topology bool
	// multicluster: the slice belongs to a ServiceImport (the MCS service-name label), and its
	// endpoints are named in their source cluster (the source-cluster label).
	Multicluster bool
	// ServingTerminating (serving_terminating): keep the endpoints that are terminating but still
	// serving, for a headless service none of whose endpoints is ready.
	ServingTerminating bool
}

// SliceTransform slims EndpointSlices decoded in full (client-go's fake clientset, or an API
// server that answers JSON). Slices decoded slim (NewSliceCodec) pass through.
func SliceTransform(o SliceOptions) cache.TransformFunc {
	return func(obj any) (any, error) {
		s, ok := obj.(*discovery.EndpointSlice)
		if !ok {
			return obj, nil
		}
		return storeSlice(sliceFieldsOf(s), o), nil
	}
}

// sliceFields are what DNS reads of an EndpointSlice, however it was decoded: from a
// discovery.EndpointSlice (sliceFieldsOf), or straight from the API server's protobuf
// (NewSliceCodec), which skips the rest of the slice.
type sliceFields struct {
	objectFields
	service       string // the kubernetes.io/service-name label
	mcsService    string // the multicluster.kubernetes.io/service-name label
	sourceCluster string // the multicluster.kubernetes.io/source-cluster label
	triggered     string // the endpoints.kubernetes.io/last-change-trigger-time annotation
	addressType   string
	ports         []portFields
	endpoints     []endpointFields
}

type portFields struct {
	name, protocol string // protocol defaults to TCP
	port           int32
	numbered       bool // the port number is set
}

type endpointFields struct {
	addresses []string
	notReady  bool // conditions.ready is false (unset means ready)
	// notServing is conditions.serving false (unset means serving, as kube-proxy reads it), and
	// terminating conditions.terminating true (unset means not terminating).
	notServing, terminating bool
	hostname                string // "" when unset
	podName                 string // the target's name when it is a Pod
	zone                    string // "" when unset
	nodeName                string // "" when unset
	forZones                []string
	forNodes                []string
}

func sliceFieldsOf(s *discovery.EndpointSlice) *sliceFields {
	f := &sliceFields{objectFields: objectFields{name: s.Name, namespace: s.Namespace, resourceVersion: s.ResourceVersion},
		service: s.Labels[discovery.LabelServiceName], triggered: s.Annotations[api.EndpointsLastChangeTriggerTime],
		mcsService: s.Labels[mcs.LabelServiceName], sourceCluster: s.Labels[mcs.LabelSourceCluster],
		addressType: string(s.AddressType)}
	for _, p := range s.Ports {
		sp := portFields{protocol: string(api.ProtocolTCP)}
		if p.Name != nil {
			sp.name = *p.Name
		}
		if p.Protocol != nil {
			sp.protocol = string(*p.Protocol)
		}
		if p.Port != nil {
			sp.port, sp.numbered = *p.Port, true
		}
		f.ports = append(f.ports, sp)
	}
	f.endpoints = make([]endpointFields, 0, len(s.Endpoints))
	for _, e := range s.Endpoints {
		se := endpointFields{addresses: e.Addresses, notReady: e.Conditions.Ready != nil && !*e.Conditions.Ready,
			notServing: e.Conditions.Serving != nil && !*e.Conditions.Serving, terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating}
		if e.Hostname != nil {
			se.hostname = *e.Hostname
		}
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
			se.podName = e.TargetRef.Name
		}
		if e.Zone != nil {
			se.zone = *e.Zone
		}
		if e.NodeName != nil {
			se.nodeName = *e.NodeName
		}
		if e.Hints != nil {
			for _, z := range e.Hints.ForZones {
				se.forZones = append(se.forZones, z.Name)
			}
			for _, n := range e.Hints.ForNodes {
				se.forNodes = append(se.forNodes, n.Name)
			}
		}
		f.endpoints = append(f.endpoints, se)
	}
	return f
}

// storeSlice is the one place an EndpointSlice becomes what the informer keeps.
func storeSlice(f *sliceFields, o SliceOptions) *StoredSlice {
	model, problems := sliceModel(f, o)
	owner := f.service
	if o.Multicluster {
		owner = f.mcsService
	}
	stored := &StoredSlice{Meta: Meta{Name: f.name, Namespace: f.namespace, ResourceVersion: f.resourceVersion},
		Service: owner, Model: model, problems: problemsRef(problems), initialEventsEnd: f.initialEventsEnd}
	if t, err := time.Parse(time.RFC3339Nano, f.triggered); err == nil {
		stored.Triggered = t.UnixNano()
	}
	return stored
}

// SlimServiceImport slims an MCS ServiceImport into the form of a Service: its names in a
// multicluster zone are a Service's, with ClusterSetIP for ClusterIP.
func SlimServiceImport(obj any) (any, error) {
	s, ok := obj.(*mcs.ServiceImport)
	if !ok {
		return obj, nil
	}
	model, problems := importModel(s)
	return &StoredService{Meta: metaOf(&s.ObjectMeta), Model: model, problems: problemsRef(problems)}, nil
}

// SlimNamespace is the namespace informer's transform.
func SlimNamespace(obj any) (any, error) {
	n, ok := obj.(*api.Namespace)
	if !ok {
		return obj, nil
	}
	return &StoredNamespace{metaOf(&n.ObjectMeta)}, nil
}

func metaOf(m *meta.ObjectMeta) Meta {
	return Meta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}
}

// named reports whether an object's name and namespace can be DNS labels, and reports it when not.
func named(kind string, m *meta.ObjectMeta, bad func(string, ...any)) bool {
	if !isLabel(m.Name) || !isLabel(m.Namespace) {
		bad("%s name %q or namespace %q is not a DNS label", kind, m.Name, m.Namespace)
		return false
	}
	return true
}

// serviceModel converts a Service, without its endpoints.
func serviceModel(svc *api.Service) (*Service, []Problem) {
	var problems []Problem
	bad := problemsIn("service", &svc.ObjectMeta, &problems)
	if !named("service", &svc.ObjectMeta, bad) {
		return nil, problems
	}
	s := &Service{Namespace: svc.Namespace, Name: svc.Name, Selector: len(svc.Spec.Selector) > 0}
	if !svc.CreationTimestamp.IsZero() {
		s.Created = svc.CreationTimestamp.UnixNano()
	}
	switch {
	case svc.Spec.Type == api.ServiceTypeExternalName:
		s.Kind = ExternalName
		target := strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, "."))
		if _, err := netip.ParseAddr(target); err == nil || target == "" || !isHostname(target) {
			bad("externalName %q is not a host name", svc.Spec.ExternalName)
			return nil, problems
		}
		s.Outside = &Outside{ExternalName: target + "."}
		return s, problems
	case svc.Spec.ClusterIP == api.ClusterIPNone:
		s.Kind = Headless
	default:
		s.Kind = ClusterIP
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, text := range ips {
			if ip, ok := ParseIP(text); ok && slices.Contains(s.ClusterIPs, ip) {
				continue // the API server allows one per family; a repeated one would be answered twice
			} else if ok {
				s.ClusterIPs = append(s.ClusterIPs, ip)
			} else {
				bad("cluster IP %q is not an IP address", text)
			}
		}
	}
	for _, p := range svc.Spec.Ports {
		if pt, ok := toPort(p.Name, string(p.Protocol), p.Port, bad); ok {
			s.Ports = append(s.Ports, pt)
		}
	}
	if ext := externalAddrs(svc, bad); len(ext) > 0 {
		s.Outside = &Outside{External: ext}
	}
	return s, problems
}

// externalAddrs returns what the in-tree plugin calls a service's external IPs: spec.externalIPs,
// then each load balancer ingress's IP, or its hostname when it has no IP.
func externalAddrs(svc *api.Service, bad func(string, ...any)) []ExternalAddr {
	n := len(svc.Spec.ExternalIPs) + len(svc.Status.LoadBalancer.Ingress)
	if n == 0 {
		return nil
	}
	out := make([]ExternalAddr, 0, n)
	add := func(text string) {
		if ip, ok := ParseIP(text); ok {
			out = append(out, ExternalAddr{Addr: ip})
		} else {
			bad("external IP %q is not an IP address", text)
		}
	}
	for _, text := range svc.Spec.ExternalIPs {
		add(text)
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		switch host := strings.ToLower(strings.TrimSuffix(in.Hostname, ".")); {
		case in.IP != "":
			add(in.IP)
		case host != "" && isHostname(host):
			out = append(out, ExternalAddr{Host: host + "."})
		case host != "":
			bad("load balancer ingress hostname %q is not a host name", in.Hostname)
		}
	}
	return slices.Clip(out)
}

// importModel converts a ServiceImport, without its endpoints. As in the in-tree plugin, a type
// other than Headless is ClusterSetIP.
func importModel(si *mcs.ServiceImport) (*Service, []Problem) {
	var problems []Problem
	bad := problemsIn("serviceimport", &si.ObjectMeta, &problems)
	if !named("serviceimport", &si.ObjectMeta, bad) {
		return nil, problems
	}
	s := &Service{Namespace: si.Namespace, Name: si.Name, Kind: ClusterIP}
	if si.Spec.Type == mcs.Headless {
		s.Kind = Headless
	} else {
		for _, text := range si.Spec.IPs {
			if ip, ok := ParseIP(text); ok {
				s.ClusterIPs = append(s.ClusterIPs, ip)
			} else {
				bad("clusterset IP %q is not an IP address", text)
			}
		}
	}
	for _, p := range si.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(api.ProtocolTCP) // the CRD has no default; a Service's is TCP
		}
		if pt, ok := toPort(p.Name, proto, p.Port, bad); ok {
			s.Ports = append(s.Ports, pt)
		}
	}
	return s, problems
}

// sliceModel converts an EndpointSlice's ready endpoints; nil for an FQDN slice, which DNS does not
// serve (as in the in-tree plugin), and for a multicluster slice without a source cluster that can
// be a DNS label (its endpoints could not be named).
func sliceModel(sl *sliceFields, o SliceOptions) (*EndpointSlice, []Problem) {
	if sl.addressType != string(discovery.AddressTypeIPv4) && sl.addressType != string(discovery.AddressTypeIPv6) {
		return nil, nil
	}
	var problems []Problem
	bad := problemsIn("endpointslice", &meta.ObjectMeta{Name: sl.name, Namespace: sl.namespace, ResourceVersion: sl.resourceVersion}, &problems)
	cluster := ""
	if o.Multicluster {
		cluster = strings.ToLower(sl.sourceCluster)
		if !isLabel(cluster) {
			bad("label %s=%q is not a DNS label: its endpoints cannot be named", mcs.LabelSourceCluster, sl.sourceCluster)
			return nil, problems
		}
	}
	var ports []Port
	for _, p := range sl.ports {
		if p.name == "" || !p.numbered {
			continue
		}
		if pt, ok := toPort(p.name, p.protocol, p.port, bad); ok {
			ports = append(ports, pt)
		}
	}
	ready, terminating := 0, 0
	for _, e := range sl.endpoints {
		switch {
		case !e.notReady:
			ready += len(e.addresses)
		case o.ServingTerminating && servingTerminating(e):
			terminating += len(e.addresses)
		}
	}
	eps := make([]Endpoint, 0, ready)
	var terms []Endpoint
	if terminating > 0 {
		terms = make([]Endpoint, 0, terminating)
	}
	for _, e := range sl.endpoints {
		if e.notReady && (terms == nil || !servingTerminating(e)) {
			continue
		}
		name := endpointName(e, o.PodNames, bad)
		zone := ""
		if o.Zonal {
			zone = strings.ToLower(e.zone) // as the in-tree plugin: names match without case
		}
		var topology unique.Handle[Topology]
		if o.Topology {
			topology = topologyOf(e)
		}
		for _, text := range e.addresses {
			ip, ok := ParseIP(text)
			if !ok || ip.Is4() != (sl.addressType == string(discovery.AddressTypeIPv4)) {
				bad("endpoint address %q in slice %s is not an %s address", text, sl.name, sl.addressType)
				continue
			}
			ep := Endpoint{Addr: ip, Hostname: name, Cluster: cluster, Zone: zone, Topology: topology}
			if e.notReady {
				terms = append(terms, ep)
			} else {
				eps = append(eps, ep)
			}
		}
	}
	s := NewEndpointSlice(ports, eps)
	if len(terms) > 0 {
		s.setTerminating(NewEndpointSlice(ports, terms))
	}
	return s, problems
}

// servingTerminating reports whether an endpoint that is not ready is terminating but still
// serving: one kube-proxy sends traffic to when a service has no ready endpoint (CategorizeEndpoints
// in k8s.io/kubernetes/pkg/proxy).
func servingTerminating(e endpointFields) bool { return !e.notServing && e.terminating }

func toPort(name, protocol string, number int32, bad func(string, ...any)) (Port, bool) {
	if name == "" {
		return Port{}, false // unnamed ports have no SRV name
	}
	// A Service's port name is a DNS label (the API server validates it so, lower case: folding it
	// could make two ports one). It need not hold a letter, as a container port's IANA service name
	// must: kubectl create service names a port "80-80", and the in-tree plugin serves
	// _80-80._tcp. Every port holds one of three constant strings: folding gave each its own copy.
	switch {
	case strings.EqualFold(protocol, "tcp"):
		protocol = "tcp"
	case strings.EqualFold(protocol, "udp"):
		protocol = "udp"
	case strings.EqualFold(protocol, "sctp"):
		protocol = "sctp"
	default:
		protocol = strings.ToLower(protocol) // for the report
	}
	if !isLabel(name) || len(name) > 62 || number < 1 || number > 65535 ||
		(protocol != "tcp" && protocol != "udp" && protocol != "sctp") {
		bad("port %q (%s %d) cannot be an SRV name", name, protocol, number)
		return Port{}, false
	}
	return Port{Name: name, Protocol: protocol, Port: uint16(number)}, true
}

// endpointName is the endpoint's own label: its hostname, else with endpoint_pod_names the pod's
// name; "" means the dashed address.
func endpointName(e endpointFields, podNames bool, bad func(string, ...any)) string {
	if e.hostname != "" {
		if h := strings.ToLower(e.hostname); isLabel(h) {
			return h
		}
		bad("endpoint hostname %q is not a DNS label", e.hostname)
	}
	if podNames && e.podName != "" {
		if n := strings.ToLower(e.podName); isLabel(n) {
			return n
		}
	}
	return ""
}

// ParseIP accepts IPv4 and IPv6 addresses, but not IPv4-mapped IPv6 ones: those would be answered
// as AAAA for an address that is really IPv4.
func ParseIP(text string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(text)
	if err != nil || ip.Is4In6() || ip.Zone() != "" || ip.IsUnspecified() {
		return netip.Addr{}, false
	}
	return ip, true
}

// isLabel reports whether s is a lower-case DNS label of letters, digits and inner hyphens.
func isLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isHostname reports whether s (lower case, no trailing dot) is a name of such labels that fits in
// DNS (253 characters of labels of at most 63 make at most 255 bytes on the wire); an underscore is allowed, as service names such as _sip._tcp.example.com have one.
func isHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isLabel(strings.ReplaceAll(l, "_", "a")) {
			return false
		}
	}
	return true
}
