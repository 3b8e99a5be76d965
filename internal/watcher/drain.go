package watcher

import (
	"context"
	"os"
	"strings"
	"time"

	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Draining: a UDP lookup from a source port that an earlier lookup used in the last 30 s follows
// that port's conntrack entry to the pod the earlier one went to, whatever kube-proxy's rules say
// since; kube-proxy deletes those entries only once the pod's endpoint stops serving. A DNS pod
// that stops answering before then loses such lookups, each answered only on the resolver's retry
// 5 s later (docs/operations.md, "Rollouts"). So at its final shutdown each kubetree instance
// (Watcher.Drain, from the root's OnFinalShutdown) keeps the server answering until no
// EndpointSlice lists its pod as serving and kube-proxy has had a sync to delete the entries. It
// runs among the final shutdowns in plugin order: after *ready* has closed /ready (whose failed
// probes turn the endpoint not serving) and *health*'s lameduck, before the listeners close.

// DrainTiming bounds the wait: the slices are read every poll; proxySync is what kube-proxy takes
// from a slice's change to its conntrack cleanup (its minimum sync period is 1 s), at least;
// after it, where the server counts the queries it gets, the wait goes on until none has come for
// quiet (a kube-proxy that syncs late, on a busy node, still sends them); limit stops the wait
// when the endpoint never turns (probes too slow, no RBAC), inside the default 30 s grace period
// with health's lameduck.
type DrainTiming struct{ poll, proxySync, quiet, limit time.Duration }

// DefaultDrain is what kubetree waits with.
var DefaultDrain = DrainTiming{poll: 250 * time.Millisecond, proxySync: 2 * time.Second, quiet: time.Second, limit: 20 * time.Second}

// QueryCount counts the queries the server has received so far; nil where it does not count them.
type QueryCount func() uint64

// servingFunc counts the serving endpoints of pod namespace/name in the API server's slices.
type servingFunc func(ctx context.Context, namespace, name string) (int, error)

// drain waits until pod namespace/name has no serving endpoint and kube-proxy has had
// t.proxySync to act on it and, with queries, until no query has come for t.quiet, or t.limit is
// over. Outside a pod (name "") it returns at once.
func drain(serving servingFunc, queries QueryCount, namespace, name string, t DrainTiming) {
	if name == "" {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), t.limit)
	defer cancel()
	log.Infof("draining: answering until no EndpointSlice of %s lists pod %s as serving (at most %s)", namespace, name, t.limit)
	for {
		n, err := serving(ctx, namespace, name)
		switch {
		case err == nil && n == 0:
			log.Infof("draining: pod %s is not a serving endpoint after %s; answering %s more for kube-proxy", name, time.Since(start).Round(time.Millisecond), t.proxySync)
			untilQuiet(ctx, queries, t)
			return
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			log.Warningf("draining: cannot list the EndpointSlices of %s (%v): stopping without waiting for kube-proxy", namespace, err)
			return
		}
		select {
		case <-ctx.Done():
			log.Warningf("draining: pod %s is still a serving endpoint after %s (%d; last error: %v): stopping; a readiness probe of a shorter period turns it sooner",
				name, t.limit, n, err)
			return
		case <-time.After(t.poll):
		}
	}
}

// untilQuiet answers for t.proxySync, then, with queries, until none has come for t.quiet or ctx
// ends; it logs how many came meanwhile, the sign of a kube-proxy later than t.proxySync.
func untilQuiet(ctx context.Context, queries QueryCount, t DrainTiming) {
	start := time.Now()
	if queries == nil {
		time.Sleep(t.proxySync)
		return
	}
	first := queries()
	last, lastAt := first, start
	for {
		select {
		case <-ctx.Done():
			log.Warningf("draining: %d queries came in the %s since the endpoint stopped serving, the last %s ago: stopping at the limit",
				last-first, time.Since(start).Round(time.Millisecond), time.Since(lastAt).Round(time.Millisecond))
			return
		case <-time.After(t.poll):
		}
		if n := queries(); n != last {
			last, lastAt = n, time.Now()
		}
		if time.Since(start) >= t.proxySync && time.Since(lastAt) >= t.quiet {
			log.Infof("draining: %d queries came in the %s since the endpoint stopped serving, none in the last %s: stopping",
				last-first, time.Since(start).Round(time.Millisecond), time.Since(lastAt).Round(time.Millisecond))
			return
		}
	}
}

// ownPod names the pod this process runs in: POD_NAMESPACE and POD_NAME when the pod's spec sets
// them (the downward API), else its service account's namespace and its hostname, which the
// kubelet makes the pod's name. Both "" outside a pod.
func ownPod() (namespace, name string) {
	namespace, name = os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if namespace == "" {
		b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return "", ""
		}
		namespace = strings.TrimSpace(string(b))
	}
	if name == "" {
		name, _ = os.Hostname()
	}
	if namespace == "" || name == "" {
		return "", ""
	}
	return namespace, name
}

// Drain waits, at the server's final shutdown, until the pod this process runs in is no serving
// endpoint, kube-proxy has had its sync and, with queries, no query comes any more (drain);
// outside a pod it returns at once.
func (w *Watcher) Drain(t DrainTiming, queries QueryCount) {
	namespace, name := ownPod()
	drain(w.ServingEndpoints, queries, namespace, name, t)
}

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
