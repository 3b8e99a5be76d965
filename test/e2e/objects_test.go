package e2e

import (
	"fmt"
	"testing"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t testing.TB, name string) string {
	t.Helper()
	_, err := env.client.CoreV1().Namespaces().Create(bg, &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: name}}, meta.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No controller-manager runs to empty a deleted namespace: its services and slices would
		// stay and be served to the tests that follow.
		if list, err := env.client.CoreV1().Services(name).List(bg, meta.ListOptions{}); err == nil {
			for _, s := range list.Items { // services have no deletecollection
				env.client.CoreV1().Services(name).Delete(bg, s.Name, meta.DeleteOptions{})
			}
		}
		env.client.DiscoveryV1().EndpointSlices(name).DeleteCollection(bg, meta.DeleteOptions{}, meta.ListOptions{})
		zero := int64(0) // no kubelet runs to finish a graceful deletion
		env.client.CoreV1().Pods(name).DeleteCollection(bg, meta.DeleteOptions{GracePeriodSeconds: &zero}, meta.ListOptions{})
		env.client.CoreV1().Namespaces().Delete(bg, name, meta.DeleteOptions{})
	})
	return name
}

func createService(t testing.TB, s *api.Service) *api.Service {
	t.Helper()
	out, err := env.client.CoreV1().Services(s.Namespace).Create(bg, s, meta.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func deleteService(t testing.TB, ns, name string) {
	t.Helper()
	if err := env.client.CoreV1().Services(ns).Delete(bg, name, meta.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func applySlice(t testing.TB, s *discovery.EndpointSlice) {
	t.Helper()
	c := env.client.DiscoveryV1().EndpointSlices(s.Namespace)
	cur, err := c.Get(bg, s.Name, meta.GetOptions{})
	if err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = c.Update(bg, s, meta.UpdateOptions{})
	} else {
		_, err = c.Create(bg, s, meta.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func clusterIP(ns, name string, dualStack bool, ports ...api.ServicePort) *api.Service {
	s := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name}, Spec: api.ServiceSpec{Ports: ports}}
	if dualStack {
		policy := api.IPFamilyPolicyRequireDualStack
		s.Spec.IPFamilyPolicy = &policy
	}
	return s
}

func headless(ns, name string, ports ...api.ServicePort) *api.Service {
	return &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone, Ports: ports}}
}

func externalName(ns, name, target string) *api.Service {
	return &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec: api.ServiceSpec{Type: api.ServiceTypeExternalName, ExternalName: target}}
}

func tcpPort(name string, port int32) api.ServicePort {
	return api.ServicePort{Name: name, Protocol: api.ProtocolTCP, Port: port}
}

// endpoint is one endpoint of a slice: an address, maybe a hostname, ready or not.
type endpoint struct {
	ip, hostname string
	notReady     bool
}

func endpointSlice(ns, svc, name string, ports []discovery.EndpointPort, eps ...endpoint) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  meta.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, e := range eps {
		if len(e.ip) > 0 && !isV4(e.ip) {
			s.AddressType = discovery.AddressTypeIPv6
		}
		ready := !e.notReady
		d := discovery.Endpoint{Addresses: []string{e.ip}, Conditions: discovery.EndpointConditions{Ready: &ready}}
		if e.hostname != "" {
			h := e.hostname
			d.Hostname = &h
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

func slicePort(name string, port int32) discovery.EndpointPort {
	n, p, proto := name, port, api.ProtocolTCP
	return discovery.EndpointPort{Name: &n, Port: &p, Protocol: &proto}
}

func isV4(ip string) bool {
	for _, c := range ip {
		if c == ':' {
			return false
		}
	}
	return true
}

func svcName(ns, name string) string { return fmt.Sprintf("%s.%s.svc.cluster.local.", name, ns) }

// runningPod creates a pod and gives it the status a kubelet would: Running, with addrs as its
// addresses. No kubelet runs here; loopback addresses let a test send queries from the pod's address.
func runningPod(t testing.TB, ns, name string, labels map[string]string, addrs ...string) {
	t.Helper()
	p := &api.Pod{ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "none"}}}}
	created, err := env.client.CoreV1().Pods(ns).Create(bg, p, meta.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = api.PodStatus{Phase: api.PodRunning, PodIP: addrs[0]}
	for _, a := range addrs {
		created.Status.PodIPs = append(created.Status.PodIPs, api.PodIP{IP: a})
	}
	if _, err := env.client.CoreV1().Pods(ns).UpdateStatus(bg, created, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
