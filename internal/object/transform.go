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
	return StoreService(s, topology), nil
}

// StoreService is the one place a Service becomes what the informer keeps, however it was decoded:
// with topology, a headless service's model also says where its topology hints come from.
func StoreService(svc *api.Service, topology bool) *StoredService {
	model, problems := serviceModel(svc)
	if model != nil && topology && model.Kind == Headless {
		model.Distribution = distributionOf(svc)
	}
	return &StoredService{Meta: metaOf(&svc.ObjectMeta), Model: model, problems: problemsRef(problems)}
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
// server that answers JSON). Slices decoded slim (internal/wire) pass through.
func SliceTransform(o SliceOptions) cache.TransformFunc {
	return func(obj any) (any, error) {
		s, ok := obj.(*discovery.EndpointSlice)
		if !ok {
			return obj, nil
		}
		return StoreSlice(sliceFieldsOf(s), o), nil
	}
}

// ObjectFields are what the model reads of every object's metadata, however it was decoded.
type ObjectFields struct {
	Name, Namespace, ResourceVersion string
}

// SliceFields are what DNS reads of an EndpointSlice, however it was decoded: from a
// discovery.EndpointSlice (sliceFieldsOf), or straight from the API server's protobuf
// (internal/wire's slice codec), which skips the rest of the slice. StoreSlice makes the stored
// slice of them.
type SliceFields struct {
	ObjectFields
	Service       string // the kubernetes.io/service-name label
	MCSService    string // the multicluster.kubernetes.io/service-name label
	SourceCluster string // the multicluster.kubernetes.io/source-cluster label
	Triggered     string // the endpoints.kubernetes.io/last-change-trigger-time annotation
	AddressType   string
	Ports         []PortFields
	Endpoints     []EndpointFields
}

// PortFields are what DNS reads of an EndpointSlice's port.
type PortFields struct {
	Name, Protocol string // Protocol defaults to TCP
	Port           int32
	Numbered       bool // the port number is set
}

// EndpointFields are what DNS reads of an EndpointSlice's endpoint.
type EndpointFields struct {
	Addresses []string
	NotReady  bool // conditions.ready is false (unset means ready)
	// NotServing is conditions.serving false (unset means serving, as kube-proxy reads it), and
	// Terminating conditions.terminating true (unset means not terminating).
	NotServing, Terminating bool
	Hostname                string // "" when unset
	PodName                 string // the target's name when it is a Pod
	Zone                    string // "" when unset
	NodeName                string // "" when unset
	ForZones                []string
	ForNodes                []string
}

func sliceFieldsOf(s *discovery.EndpointSlice) *SliceFields {
	f := &SliceFields{ObjectFields: ObjectFields{Name: s.Name, Namespace: s.Namespace, ResourceVersion: s.ResourceVersion},
		Service: s.Labels[discovery.LabelServiceName], Triggered: s.Annotations[api.EndpointsLastChangeTriggerTime],
		MCSService: s.Labels[mcs.LabelServiceName], SourceCluster: s.Labels[mcs.LabelSourceCluster],
		AddressType: string(s.AddressType)}
	for _, p := range s.Ports {
		sp := PortFields{Protocol: string(api.ProtocolTCP)}
		if p.Name != nil {
			sp.Name = *p.Name
		}
		if p.Protocol != nil {
			sp.Protocol = string(*p.Protocol)
		}
		if p.Port != nil {
			sp.Port, sp.Numbered = *p.Port, true
		}
		f.Ports = append(f.Ports, sp)
	}
	f.Endpoints = make([]EndpointFields, 0, len(s.Endpoints))
	for _, e := range s.Endpoints {
		se := EndpointFields{Addresses: e.Addresses, NotReady: e.Conditions.Ready != nil && !*e.Conditions.Ready,
			NotServing: e.Conditions.Serving != nil && !*e.Conditions.Serving, Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating}
		if e.Hostname != nil {
			se.Hostname = *e.Hostname
		}
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
			se.PodName = e.TargetRef.Name
		}
		if e.Zone != nil {
			se.Zone = *e.Zone
		}
		if e.NodeName != nil {
			se.NodeName = *e.NodeName
		}
		if e.Hints != nil {
			for _, z := range e.Hints.ForZones {
				se.ForZones = append(se.ForZones, z.Name)
			}
			for _, n := range e.Hints.ForNodes {
				se.ForNodes = append(se.ForNodes, n.Name)
			}
		}
		f.Endpoints = append(f.Endpoints, se)
	}
	return f
}

// StoreSlice is the one place an EndpointSlice becomes what the informer keeps, however it was
// decoded.
func StoreSlice(f *SliceFields, o SliceOptions) *StoredSlice {
	model, problems := sliceModel(f, o)
	owner := f.Service
	if o.Multicluster {
		owner = f.MCSService
	}
	stored := &StoredSlice{Meta: Meta{Name: f.Name, Namespace: f.Namespace, ResourceVersion: f.ResourceVersion},
		Service: owner, Model: model, problems: problemsRef(problems)}
	if t, err := time.Parse(time.RFC3339Nano, f.Triggered); err == nil {
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
func sliceModel(sl *SliceFields, o SliceOptions) (*EndpointSlice, []Problem) {
	if sl.AddressType != string(discovery.AddressTypeIPv4) && sl.AddressType != string(discovery.AddressTypeIPv6) {
		return nil, nil
	}
	var problems []Problem
	bad := problemsIn("endpointslice", &meta.ObjectMeta{Name: sl.Name, Namespace: sl.Namespace, ResourceVersion: sl.ResourceVersion}, &problems)
	cluster := ""
	if o.Multicluster {
		cluster = strings.ToLower(sl.SourceCluster)
		if !isLabel(cluster) {
			bad("label %s=%q is not a DNS label: its endpoints cannot be named", mcs.LabelSourceCluster, sl.SourceCluster)
			return nil, problems
		}
	}
	var ports []Port
	for _, p := range sl.Ports {
		if p.Name == "" || !p.Numbered {
			continue
		}
		if pt, ok := toPort(p.Name, p.Protocol, p.Port, bad); ok {
			ports = append(ports, pt)
		}
	}
	ready, terminating := 0, 0
	for _, e := range sl.Endpoints {
		switch {
		case !e.NotReady:
			ready += len(e.Addresses)
		case o.ServingTerminating && servingTerminating(e):
			terminating += len(e.Addresses)
		}
	}
	eps := make([]Endpoint, 0, ready)
	var terms []Endpoint
	if terminating > 0 {
		terms = make([]Endpoint, 0, terminating)
	}
	for _, e := range sl.Endpoints {
		if e.NotReady && (terms == nil || !servingTerminating(e)) {
			continue
		}
		name := endpointName(e, o.PodNames, bad)
		zone := ""
		if o.Zonal {
			zone = strings.ToLower(e.Zone) // as the in-tree plugin: names match without case
		}
		var topology unique.Handle[Topology]
		if o.Topology {
			topology = topologyOf(e)
		}
		for _, text := range e.Addresses {
			ip, ok := ParseIP(text)
			if !ok || ip.Is4() != (sl.AddressType == string(discovery.AddressTypeIPv4)) {
				bad("endpoint address %q in slice %s is not an %s address", text, sl.Name, sl.AddressType)
				continue
			}
			ep := Endpoint{Addr: ip, Hostname: name, Cluster: cluster, Zone: zone, Topology: topology}
			if e.NotReady {
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
func servingTerminating(e EndpointFields) bool { return !e.NotServing && e.Terminating }

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
func endpointName(e EndpointFields, podNames bool, bad func(string, ...any)) string {
	if e.Hostname != "" {
		if h := strings.ToLower(e.Hostname); isLabel(h) {
			return h
		}
		bad("endpoint hostname %q is not a DNS label", e.Hostname)
	}
	if podNames && e.PodName != "" {
		if n := strings.ToLower(e.PodName); isLabel(n) {
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
