package kubetree

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// The informers keep only what DNS needs of each object: these transforms run before an object is
// stored, so the rest is garbage as soon as it has been decoded.

func slimService(obj any) (any, error) {
	s, ok := obj.(*api.Service)
	if !ok {
		return obj, nil // a tombstone: deletes go by key
	}
	ports := make([]api.ServicePort, 0, len(s.Spec.Ports))
	for _, p := range s.Spec.Ports {
		ports = append(ports, api.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	return &api.Service{
		ObjectMeta: meta.ObjectMeta{Name: s.Name, Namespace: s.Namespace, ResourceVersion: s.ResourceVersion},
		Spec: api.ServiceSpec{
			Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs,
			ExternalName: s.Spec.ExternalName, Ports: ports,
		},
	}, nil
}

func slimSlice(obj any) (any, error) {
	s, ok := obj.(*discovery.EndpointSlice)
	if !ok {
		return obj, nil
	}
	eps := make([]discovery.Endpoint, 0, len(s.Endpoints))
	for _, e := range s.Endpoints {
		ep := discovery.Endpoint{Addresses: e.Addresses, Hostname: e.Hostname}
		ep.Conditions.Ready = e.Conditions.Ready
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
			ep.TargetRef = &api.ObjectReference{Kind: "Pod", Name: e.TargetRef.Name}
		}
		eps = append(eps, ep)
	}
	var labels map[string]string
	if svc := s.Labels[discovery.LabelServiceName]; svc != "" {
		labels = map[string]string{discovery.LabelServiceName: svc}
	}
	return &discovery.EndpointSlice{
		ObjectMeta:  meta.ObjectMeta{Name: s.Name, Namespace: s.Namespace, ResourceVersion: s.ResourceVersion, Labels: labels},
		AddressType: s.AddressType,
		Endpoints:   eps,
		Ports:       s.Ports,
	}, nil
}

func slimNamespace(obj any) (any, error) {
	n, ok := obj.(*api.Namespace)
	if !ok {
		return obj, nil
	}
	return &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion}}, nil
}

// serviceOf names the service an EndpointSlice belongs to, as a store key; "" if none.
func serviceOf(s *discovery.EndpointSlice) string {
	name := s.Labels[discovery.LabelServiceName]
	if name == "" {
		return ""
	}
	return s.Namespace + "/" + name
}

// problem is a part of an API object that cannot be represented in DNS.
type problem struct {
	object  string // "service ns/name" or "endpointslice ns/name"
	version string // the object's resourceVersion: each version is reported once
	text    string
}

// toModel converts a Service and its EndpointSlices into what the record builder needs. Whatever
// cannot be represented in DNS is left out and described in the returned problems; a service whose
// own name cannot be represented is nil.
func toModel(svc *api.Service, slices []*discovery.EndpointSlice, podNames bool) (*service, []problem) {
	var problems []problem
	badIn := func(kind string, m *meta.ObjectMeta) func(string, ...any) {
		return func(format string, args ...any) {
			problems = append(problems, problem{object: kind + " " + m.Namespace + "/" + m.Name,
				version: m.ResourceVersion, text: fmt.Sprintf(format, args...)})
		}
	}
	bad := badIn("service", &svc.ObjectMeta)

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
		s.ExternalName = target + "."
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
			if ip, ok := parseIP(text); ok {
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
	for _, sl := range slices {
		if sl.AddressType != discovery.AddressTypeIPv4 && sl.AddressType != discovery.AddressTypeIPv6 {
			continue // FQDN slices are not served, as in the in-tree plugin
		}
		bad := badIn("endpointslice", &sl.ObjectMeta)
		var m endpointSlice
		for _, p := range sl.Ports {
			if p.Name == nil || p.Port == nil {
				continue
			}
			proto := string(api.ProtocolTCP)
			if p.Protocol != nil {
				proto = string(*p.Protocol)
			}
			if pt, ok := toPort(*p.Name, proto, *p.Port, bad); ok {
				m.Ports = append(m.Ports, pt)
			}
		}
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			ep := endpoint{Hostname: endpointName(e, podNames, bad)}
			for _, text := range e.Addresses {
				ip, ok := parseIP(text)
				if !ok || ip.Is4() != (sl.AddressType == discovery.AddressTypeIPv4) {
					bad("endpoint address %q in slice %s is not an %s address", text, sl.Name, sl.AddressType)
					continue
				}
				ep.Addrs = append(ep.Addrs, ip)
			}
			if len(ep.Addrs) > 0 {
				m.Endpoints = append(m.Endpoints, ep)
			}
		}
		s.Slices = append(s.Slices, m)
	}
	return s, problems
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
func endpointName(e discovery.Endpoint, podNames bool, bad func(string, ...any)) string {
	if e.Hostname != nil && *e.Hostname != "" {
		if h := strings.ToLower(*e.Hostname); isLabel(h) {
			return h
		}
		bad("endpoint hostname %q is not a DNS label", *e.Hostname)
	}
	if podNames && e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
		if n := strings.ToLower(e.TargetRef.Name); isLabel(n) {
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
