package watcher

import (
	"context"

	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServingEndpoints counts the endpoints of pod namespace/name that the EndpointSlices of its
// namespace list as serving (conditions.serving true or unset). kube-proxy keeps the conntrack
// entries of a serving endpoint, so packets that follow those entries still reach the pod; once
// none is serving it deletes them (CleanStaleEntries in k8s.io/kubernetes/pkg/proxy/conntrack).
// A read of the API server's own state, not the informers' (which stop at shutdown, and keep
// no condition but readiness): it runs a few times while the pod shuts down.
func (w *Watcher) ServingEndpoints(ctx context.Context, namespace, name string) (int, error) {
	l, err := w.kube.DiscoveryV1().EndpointSlices(namespace).List(ctx, meta.ListOptions{}) // from etcd: the state kube-proxy is being told
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range l.Items {
		n += servingAs(&l.Items[i], name)
	}
	return n, nil
}

// servingAs counts the serving endpoints of slice s whose target is pod name.
func servingAs(s *discovery.EndpointSlice, name string) int {
	n := 0
	for _, e := range s.Endpoints {
		if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || e.TargetRef.Name != name {
			continue
		}
		if e.Conditions.Serving == nil || *e.Conditions.Serving {
			n++
		}
	}
	return n
}
