package watcher

import (
	"context"
	"testing"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// kube-proxy keeps the conntrack entries of a serving endpoint: a pod is still reached through
// them while any slice of its namespace lists it serving, whether ready or terminating.
func TestServingEndpointsOfAPod(t *testing.T) {
	yes, no := true, false
	endpoint := func(pod string, serving *bool) discovery.Endpoint {
		return discovery.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: &api.ObjectReference{Kind: "Pod", Name: pod},
			Conditions: discovery.EndpointConditions{Serving: serving, Terminating: &yes}}
	}
	slice := func(ns, name string, eps ...discovery.Endpoint) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name}, AddressType: discovery.AddressTypeIPv4, Endpoints: eps}
	}
	unnamed := endpoint("dns-a", nil)
	unnamed.TargetRef = nil
	w := &Watcher{kube: fake.NewClientset(
		slice("kube-system", "kube-dns-v4", endpoint("dns-a", nil), endpoint("dns-b", &no), unnamed),
		slice("kube-system", "kube-dns-v6", endpoint("dns-a", &yes), endpoint("dns-b", &no)),
		slice("other", "elsewhere", endpoint("dns-b", &yes)),
	)}
	for pod, want := range map[string]int{"dns-a": 2, "dns-b": 0, "dns-c": 0} {
		got, err := w.ServingEndpoints(context.Background(), "kube-system", pod)
		if err != nil || got != want {
			t.Errorf("ServingEndpoints(kube-system, %s) = %d, %v; want %d", pod, got, err, want)
		}
	}
}
