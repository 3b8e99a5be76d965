// Package k8stest builds the Kubernetes objects that kubetree's tests give a fake clientset or a
// real API server, so that a test reads like the cluster it describes, and holds Proxy, a TCP
// path to an API server that a test can freeze, and MetadataList, objects as the API server sends
// a metadata-only list. It is for tests only: no production code imports it.
package k8stest

import (
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)

// Namespace is a namespace with nothing but its name.
func Namespace(name string) *api.Namespace {
	return &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: name}}
}

// SvcPorts lists a service's ports, for tables that hold them apart from the service.
func SvcPorts(ports ...api.ServicePort) []api.ServicePort { return ports }

// TCP is a named TCP service port.
func TCP(name string, port int32) api.ServicePort {
	return api.ServicePort{Name: name, Protocol: api.ProtocolTCP, Port: port}
}

// UDP is a named UDP service port.
func UDP(name string, port int32) api.ServicePort {
	return api.ServicePort{Name: name, Protocol: api.ProtocolUDP, Port: port}
}

// ClusterIPService is a ClusterIP service with the given cluster IPs (spec.clusterIPs, the first
// also as spec.clusterIP). With none, it has no cluster IP yet: a real API server allocates one.
func ClusterIPService(ns, name string, ips []string, ports ...api.ServicePort) *api.Service {
	s := &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec:       api.ServiceSpec{Type: api.ServiceTypeClusterIP, Ports: ports},
	}
	if len(ips) > 0 {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ips[0], ips
	}
	return s
}

// DualStack asks for a cluster IP of each family (ipFamilyPolicy RequireDualStack), for a real
// API server to allocate; it changes and returns s.
func DualStack(s *api.Service) *api.Service {
	policy := api.IPFamilyPolicyRequireDualStack
	s.Spec.IPFamilyPolicy = &policy
	return s
}

// HeadlessService is a ClusterIP service without a cluster IP (clusterIP None).
func HeadlessService(ns, name string, ports ...api.ServicePort) *api.Service {
	return &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec: api.ServiceSpec{Type: api.ServiceTypeClusterIP, ClusterIP: api.ClusterIPNone,
			ClusterIPs: []string{api.ClusterIPNone}, Ports: ports},
	}
}

// ExternalNameService is an ExternalName service: an alias of target.
func ExternalNameService(ns, name, target string) *api.Service {
	return &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec:       api.ServiceSpec{Type: api.ServiceTypeExternalName, ExternalName: target},
	}
}

// Pod is a running pod with the given addresses (its status.podIPs; the first is also
// status.podIP).
func Pod(ns, name string, addrs ...string) *api.Pod {
	p := &api.Pod{ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name}, Status: api.PodStatus{Phase: api.PodRunning}}
	for _, a := range addrs {
		p.Status.PodIPs = append(p.Status.PodIPs, api.PodIP{IP: a})
	}
	if len(addrs) > 0 {
		p.Status.PodIP = addrs[0]
	}
	return p
}

// Endpoint is one endpoint of a Slice: its addresses, and optionally a hostname, the pod it is
// (a targetRef in the slice's namespace), its readiness and its topology zone.
type Endpoint struct {
	Addrs    []string
	Hostname string
	Pod      string
	NotReady bool
	Unknown  bool // ready left unset, which counts as ready
	Zone     string
	Node     string   // nodeName
	ForZones []string // hints.forZones
	ForNodes []string // hints.forNodes
	// Terminating sets conditions.terminating and conditions.serving (true unless NotServing), as
	// the endpoint slice controller does for a pod being deleted; a terminating endpoint is
	// never ready, so give NotReady too.
	Terminating, NotServing bool
}

// Slice is an EndpointSlice of service svc (its kubernetes.io/service-name label); an
// EndpointSlice holds addresses of one family.
func Slice(ns, svc, name string, family discovery.AddressType, ports []discovery.EndpointPort, eps ...Endpoint) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  meta.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: family,
		Ports:       ports,
	}
	for _, e := range eps {
		d := discovery.Endpoint{Addresses: e.Addrs}
		if e.Hostname != "" {
			d.Hostname = new(e.Hostname)
		}
		if e.Pod != "" {
			d.TargetRef = &api.ObjectReference{Kind: "Pod", Name: e.Pod, Namespace: ns}
		}
		if !e.Unknown {
			d.Conditions.Ready = new(!e.NotReady)
		}
		if e.Zone != "" {
			d.Zone = new(e.Zone)
		}
		if e.Node != "" {
			d.NodeName = new(e.Node)
		}
		if e.ForZones != nil || e.ForNodes != nil {
			d.Hints = &discovery.EndpointHints{}
			for _, z := range e.ForZones {
				d.Hints.ForZones = append(d.Hints.ForZones, discovery.ForZone{Name: z})
			}
			for _, n := range e.ForNodes {
				d.Hints.ForNodes = append(d.Hints.ForNodes, discovery.ForNode{Name: n})
			}
		}
		if e.Terminating || e.NotServing {
			d.Conditions.Serving, d.Conditions.Terminating = new(!e.NotServing), new(e.Terminating)
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

// Node is a Node in a topology zone (its topology.kubernetes.io/zone label; none when zone is "").
func Node(name, zone string) *api.Node {
	n := &api.Node{ObjectMeta: meta.ObjectMeta{Name: name}}
	if zone != "" {
		n.Labels = map[string]string{api.LabelTopologyZone: zone}
	}
	return n
}

// OnNode is p scheduled to node.
func OnNode(p *api.Pod, node string) *api.Pod {
	p.Spec.NodeName = node
	return p
}

// SlicePort is a named port of an EndpointSlice.
func SlicePort(name string, proto api.Protocol, port int32) discovery.EndpointPort {
	return discovery.EndpointPort{Name: new(name), Port: new(port), Protocol: new(proto)}
}

// SlicePorts lists an EndpointSlice's ports.
func SlicePorts(ports ...discovery.EndpointPort) []discovery.EndpointPort { return ports }

// ServiceImport is a multi-cluster ServiceImport of the given type; a ClusterSetIP import has ips.
func ServiceImport(ns, name string, kind mcs.ServiceImportType, ips []string, ports ...mcs.ServicePort) *mcs.ServiceImport {
	return &mcs.ServiceImport{ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec: mcs.ServiceImportSpec{Type: kind, IPs: ips, Ports: ports}}
}

// ImportSlice is a Slice of ServiceImport imp, as exported by cluster ("": without the
// source-cluster label): it carries the multi-cluster labels instead of a service's.
func ImportSlice(ns, imp, cluster, name string, family discovery.AddressType, ports []discovery.EndpointPort, eps ...Endpoint) *discovery.EndpointSlice {
	s := Slice(ns, imp, name, family, ports, eps...)
	s.Labels = map[string]string{mcs.LabelServiceName: imp}
	if cluster != "" {
		s.Labels[mcs.LabelSourceCluster] = cluster
	}
	return s
}

// WithLabels adds labels, given as key, value pairs, to a copy of o's label map (o's old map is
// left as it was: another object may share it), and returns o.
func WithLabels[T meta.Object](o T, kv ...string) T {
	l := map[string]string{}
	for k, v := range o.GetLabels() {
		l[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	o.SetLabels(l)
	return o
}

// WithRV sets o's resourceVersion and returns o.
func WithRV(o runtime.Object, rv string) runtime.Object {
	m, _ := apimeta.Accessor(o)
	m.SetResourceVersion(rv)
	return o
}

// InZones puts the slice's endpoints, in order, in the given topology zones ("" leaves one without).
func InZones(s *discovery.EndpointSlice, zones ...string) *discovery.EndpointSlice {
	for i, z := range zones {
		if z != "" {
			s.Endpoints[i].Zone = &z
		}
	}
	return s
}
