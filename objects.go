package kubetree

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)

// The informers keep only what DNS needs of each object, already checked and converted: the
// transforms below run once per object version, before the object is stored, so the rest of it is
// garbage as soon as it has been decoded, and nothing is parsed again when records are built.

// storedMeta is the identity of a stored object; it gives client-go's key functions the name,
// namespace and version through meta.Accessor.
type storedMeta struct {
	Name, Namespace, ResourceVersion string
}

// GetObjectMeta implements meta.ObjectMetaAccessor.
func (m *storedMeta) GetObjectMeta() meta.Object {
	return &meta.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}
}

// storedService is what the service informer keeps of a Service.
type storedService struct {
	storedMeta
	model    *service // without slices; nil when the service's name cannot be served
	problems []problem
}

// key is the service's store key, which its slices name through serviceOf.
func (s *storedService) key() string { return s.Namespace + "/" + s.Name }

// storedSlice is what the endpoint slice informer keeps of an EndpointSlice.
type storedSlice struct {
	storedMeta
	service  string         // the name of the service it belongs to; "" for none
	model    *endpointSlice // nil for slices DNS does not serve (FQDN)
	problems []problem
	// triggered is when the change this version of the slice answers happened (the endpoint slice
	// controller's last-change-trigger-time, Unix nanoseconds; 0 when unknown), for the DNS
	// programming latency.
	triggered        int64
	initialEventsEnd bool // the bookmark that ends a streamed list (decoded slim)
}

// GetObjectMeta implements meta.ObjectMetaAccessor, with the annotation of the bookmark that ends
// a streamed list, which the reflector looks for.
func (s *storedSlice) GetObjectMeta() meta.Object {
	m := s.storedMeta.GetObjectMeta()
	if s.initialEventsEnd {
		m.SetAnnotations(map[string]string{meta.InitialEventsAnnotationKey: "true"})
	}
	return m
}

// GetObjectKind and DeepCopyObject make a slice decoded slim a runtime.Object, as the reflector
// wants its watch events. It is never changed, so a copy may share everything.
func (s *storedSlice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (s *storedSlice) DeepCopyObject() runtime.Object { c := *s; return &c }

type storedNamespace struct{ storedMeta }

func slimService(obj any) (any, error) {
	s, ok := obj.(*api.Service)
	if !ok {
		return obj, nil // a tombstone (deletes go by key), or already slim
	}
	model, problems := serviceModel(s)
	return &storedService{storedMeta: metaOf(&s.ObjectMeta), model: model, problems: problems}, nil
}

// sliceOptions are the Corefile's settings that change what a slice's model keeps.
type sliceOptions struct {
	podNames bool // endpoint_pod_names: endpoints without a hostname are named after their pod
	zonal    bool // zonal: keep each endpoint's zone
	// multicluster: the slice belongs to a ServiceImport (the MCS service-name label), and its
	// endpoints are named in their source cluster (the source-cluster label).
	multicluster bool
}

// sliceTransform slims EndpointSlices decoded in full (client-go's fake clientset, or an API
// server that answers JSON). Slices decoded slim (sliceCodec) pass through.
func sliceTransform(o sliceOptions) cache.TransformFunc {
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
// (sliceCodec), which skips the rest of the slice.
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
	notReady  bool   // conditions.ready is false (unset means ready)
	hostname  string // "" when unset
	podName   string // the target's name when it is a Pod
	zone      string // "" when unset
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
		se := endpointFields{addresses: e.Addresses, notReady: e.Conditions.Ready != nil && !*e.Conditions.Ready}
		if e.Hostname != nil {
			se.hostname = *e.Hostname
		}
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
			se.podName = e.TargetRef.Name
		}
		if e.Zone != nil {
			se.zone = *e.Zone
		}
		f.endpoints = append(f.endpoints, se)
	}
	return f
}

// storeSlice is the one place an EndpointSlice becomes what the informer keeps.
func storeSlice(f *sliceFields, o sliceOptions) *storedSlice {
	model, problems := sliceModel(f, o)
	owner := f.service
	if o.multicluster {
		owner = f.mcsService
	}
	stored := &storedSlice{storedMeta: storedMeta{Name: f.name, Namespace: f.namespace, ResourceVersion: f.resourceVersion},
		service: owner, model: model, problems: problems, initialEventsEnd: f.initialEventsEnd}
	if t, err := time.Parse(time.RFC3339Nano, f.triggered); err == nil {
		stored.triggered = t.UnixNano()
	}
	return stored
}

// slimServiceImport slims an MCS ServiceImport into the form of a Service: its names in a
// multicluster zone are a Service's, with ClusterSetIP for ClusterIP.
func slimServiceImport(obj any) (any, error) {
	s, ok := obj.(*mcs.ServiceImport)
	if !ok {
		return obj, nil
	}
	model, problems := importModel(s)
	return &storedService{storedMeta: metaOf(&s.ObjectMeta), model: model, problems: problems}, nil
}

func slimNamespace(obj any) (any, error) {
	n, ok := obj.(*api.Namespace)
	if !ok {
		return obj, nil
	}
	return &storedNamespace{metaOf(&n.ObjectMeta)}, nil
}

func metaOf(m *meta.ObjectMeta) storedMeta {
	return storedMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}
}

// serviceOf names the service an EndpointSlice belongs to, as a store key; "" if none (or no slice).
func serviceOf(s *storedSlice) string {
	if s == nil || s.service == "" {
		return ""
	}
	return s.Namespace + "/" + s.service
}

// problem is a part of an API object that cannot be represented in DNS.
type problem struct {
	object  string // "service ns/name" or "endpointslice ns/name"
	version string // the object's resourceVersion: each version is reported once
	text    string
}

func problemsIn(kind string, m *meta.ObjectMeta, problems *[]problem) func(string, ...any) {
	return func(format string, args ...any) {
		*problems = append(*problems, problem{object: kind + " " + m.Namespace + "/" + m.Name,
			version: m.ResourceVersion, text: fmt.Sprintf(format, args...)})
	}
}

// assemble puts a service's model together from what the informers store of the Service and of
// its EndpointSlices: the one place that does, for the watcher, the tests, the fuzzers and the
// benchmarks alike. problems are the parts left out of DNS; the model is nil when the service's own
// name cannot be served.
func assemble(svc *storedService, sls []*storedSlice) (*service, []problem) {
	problems := slices.Clip(svc.problems) // appending must not write into the stored object
	var models []*endpointSlice
	for _, sl := range sls {
		problems = append(problems, sl.problems...)
		if sl.model != nil {
			models = append(models, sl.model)
		}
	}
	if svc.model == nil {
		return nil, problems
	}
	m := *svc.model
	if m.Kind != externalName {
		m.Slices = models
	}
	return &m, problems
}

// serviceModel converts a Service, without its endpoints.
func serviceModel(svc *api.Service) (*service, []problem) {
	var problems []problem
	bad := problemsIn("service", &svc.ObjectMeta, &problems)
	if !isLabel(svc.Name) || !isLabel(svc.Namespace) {
		bad("service name %q or namespace %q is not a DNS label", svc.Name, svc.Namespace)
		return nil, problems
	}
	s := &service{Namespace: svc.Namespace, Name: svc.Name}
	switch {
	case svc.Spec.Type == api.ServiceTypeExternalName:
		s.Kind = externalName
		target := strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, "."))
		if _, err := netip.ParseAddr(target); err == nil || target == "" || !isHostname(target) {
			bad("externalName %q is not a host name", svc.Spec.ExternalName)
			return nil, problems
		}
		s.Outside = &outside{ExternalName: target + "."}
		return s, problems
	case svc.Spec.ClusterIP == api.ClusterIPNone:
		s.Kind = headless
	default:
		s.Kind = clusterIP
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, text := range ips {
			if ip, ok := parseIP(text); ok && slices.Contains(s.ClusterIPs, ip) {
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
		s.Outside = &outside{External: ext}
	}
	return s, problems
}

// externalAddrs returns what the in-tree plugin calls a service's external IPs: spec.externalIPs,
// then each load balancer ingress's IP, or its hostname when it has no IP.
func externalAddrs(svc *api.Service, bad func(string, ...any)) []externalAddr {
	n := len(svc.Spec.ExternalIPs) + len(svc.Status.LoadBalancer.Ingress)
	if n == 0 {
		return nil
	}
	out := make([]externalAddr, 0, n)
	add := func(text string) {
		if ip, ok := parseIP(text); ok {
			out = append(out, externalAddr{Addr: ip})
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
			out = append(out, externalAddr{Host: host + "."})
		case host != "":
			bad("load balancer ingress hostname %q is not a host name", in.Hostname)
		}
	}
	return slices.Clip(out)
}

// importModel converts a ServiceImport, without its endpoints. As in the in-tree plugin, a type
// other than Headless is ClusterSetIP.
func importModel(si *mcs.ServiceImport) (*service, []problem) {
	var problems []problem
	bad := problemsIn("serviceimport", &si.ObjectMeta, &problems)
	if !isLabel(si.Name) || !isLabel(si.Namespace) {
		bad("serviceimport name %q or namespace %q is not a DNS label", si.Name, si.Namespace)
		return nil, problems
	}
	s := &service{Namespace: si.Namespace, Name: si.Name, Kind: clusterIP}
	if si.Spec.Type == mcs.Headless {
		s.Kind = headless
	} else {
		for _, text := range si.Spec.IPs {
			if ip, ok := parseIP(text); ok {
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
func sliceModel(sl *sliceFields, o sliceOptions) (*endpointSlice, []problem) {
	if sl.addressType != string(discovery.AddressTypeIPv4) && sl.addressType != string(discovery.AddressTypeIPv6) {
		return nil, nil
	}
	var problems []problem
	bad := problemsIn("endpointslice", &meta.ObjectMeta{Name: sl.name, Namespace: sl.namespace, ResourceVersion: sl.resourceVersion}, &problems)
	cluster := ""
	if o.multicluster {
		cluster = strings.ToLower(sl.sourceCluster)
		if !isLabel(cluster) {
			bad("label %s=%q is not a DNS label: its endpoints cannot be named", mcs.LabelSourceCluster, sl.sourceCluster)
			return nil, problems
		}
	}
	var ports []port
	for _, p := range sl.ports {
		if p.name == "" || !p.numbered {
			continue
		}
		if pt, ok := toPort(p.name, p.protocol, p.port, bad); ok {
			ports = append(ports, pt)
		}
	}
	ready := 0
	for _, e := range sl.endpoints {
		if !e.notReady {
			ready += len(e.addresses)
		}
	}
	eps := make([]endpoint, 0, ready)
	for _, e := range sl.endpoints {
		if e.notReady {
			continue
		}
		name := endpointName(e, o.podNames, bad)
		zone := ""
		if o.zonal {
			zone = strings.ToLower(e.zone) // as the in-tree plugin: names match without case
		}
		for _, text := range e.addresses {
			ip, ok := parseIP(text)
			if !ok || ip.Is4() != (sl.addressType == string(discovery.AddressTypeIPv4)) {
				bad("endpoint address %q in slice %s is not an %s address", text, sl.name, sl.addressType)
				continue
			}
			eps = append(eps, endpoint{Addr: ip, Hostname: name, Cluster: cluster, Zone: zone})
		}
	}
	return newEndpointSlice(ports, eps), problems
}

func toPort(name, protocol string, number int32, bad func(string, ...any)) (port, bool) {
	if name == "" {
		return port{}, false // unnamed ports have no SRV name
	}
	// A port name is an IANA service name: lower case (the API server validates it so; folding it
	// could make two ports one), and with a letter, so that it cannot be read as a port number.
	protocol = strings.ToLower(protocol)
	if !isLabel(name) || !strings.ContainsFunc(name, isLetter) || len(name) > 62 || number < 1 || number > 65535 ||
		(protocol != "tcp" && protocol != "udp" && protocol != "sctp") {
		bad("port %q (%s %d) cannot be an SRV name", name, protocol, number)
		return port{}, false
	}
	return port{Name: name, Protocol: protocol, Port: uint16(number)}, true
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

// parseIP accepts IPv4 and IPv6 addresses, but not IPv4-mapped IPv6 ones: those would be answered
// as AAAA for an address that is really IPv4.
func parseIP(text string) (netip.Addr, bool) {
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

func isLetter(r rune) bool { return 'a' <= r && r <= 'z' }

// isHostname reports whether s (lower case, no trailing dot) is a name of such labels that fits in
// DNS; an underscore is allowed, as service names such as _sip._tcp.example.com have one.
func isHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isLabel(strings.ReplaceAll(l, "_", "a")) {
			return false
		}
	}
	_, ok := dns.IsDomainName(s)
	return ok
}

// keyOf returns the store key of an object or of the tombstone of one.
func keyOf(obj any) string {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return key
}
