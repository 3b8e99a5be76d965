package watcher

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"

	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A DNS pod leaves kube-proxy's rules in two steps, each at a kube-proxy sync on every node: when
// it is deleted its endpoint turns not ready (terminating), and kube-proxy sends it no new flow;
// when its readiness probe fails the endpoint turns not serving, and kube-proxy deletes the
// conntrack entries still leading to it (CleanStaleEntries in k8s.io/kubernetes/pkg/proxy/conntrack),
// so that the packets that followed them go to a serving pod. An answer to a question in flight
// at that deletion comes back from the pod's own address, finds no socket and is lost: the
// resolver asks again 5 s later (docs/operations.md, "Rollouts").
//
// Withdrawing: if a kube-proxy sees both steps at one sync (its sync came late, or /ready failed
// at once), it deletes the entries while new flows still come, and loses their answers. So at
// SIGTERM each kubetree instance (Watcher.Withdraw, from the root's OnShutdown, which runs before
// every final shutdown and so before *ready* fails /ready) keeps the pod ready until no
// EndpointSlice lists it as ready and kube-proxy has had a sync to take it out of its rules.
//
// Draining: a UDP lookup from a source port that an earlier lookup used in the last 30 s follows
// that port's conntrack entry to the pod the earlier one went to, whatever kube-proxy's rules say
// since, until the entry is deleted. So at its final shutdown each instance (Watcher.Drain, from
// the root's OnFinalShutdown: after *ready* has closed /ready, whose failed probes turn the
// endpoint not serving, and *health*'s lameduck, before the listeners close) keeps the server
// answering until no EndpointSlice lists its pod as serving and kube-proxy has had a sync to
// delete the entries. A question in flight at that deletion is still lost: only a client that
// keeps one UDP socket has one then, and no server can keep its answer.

// DrainTiming bounds a wait: the slices are read every poll; proxySync is what kube-proxy takes
// from a slice's change to its sync (its minimum sync period is 1 s), at least; after it, where
// the server counts the queries it gets, a drain goes on until none has come for quiet (a
// kube-proxy that syncs late, on a busy node, still sends them); limit stops the wait when the
// endpoint never turns (probes too slow, no RBAC). The withdraw's and the drain's limits and
// health's lameduck fit the default 30 s grace period.
type DrainTiming struct{ poll, proxySync, quiet, limit time.Duration }

// DefaultWithdraw is what kubetree waits with at SIGTERM before /ready fails; the endpoint turns
// not ready as soon as the pod is deleted, so its limit is short.
var DefaultWithdraw = DrainTiming{poll: 250 * time.Millisecond, proxySync: 2 * time.Second, limit: 5 * time.Second}

// DefaultDrain is what kubetree waits with at its final shutdown.
var DefaultDrain = DrainTiming{poll: 250 * time.Millisecond, proxySync: 2 * time.Second, quiet: time.Second, limit: 20 * time.Second}

// QueryCount counts the queries the server has received so far over UDP, whose answers a deleted
// conntrack entry can lose; nil where it does not count them.
type QueryCount func() uint64

// endpointsFunc counts the endpoints of pod namespace/name in the API server's slices that are
// in one state (ready, serving).
type endpointsFunc func(ctx context.Context, namespace, name string) (int, error)

// withdraw waits until pod namespace/name has no ready endpoint and kube-proxy has had
// t.proxySync to take it out of its rules, or t.limit is over. Outside a pod (name "") it
// returns at once.
func withdraw(ready endpointsFunc, namespace, name string, t DrainTiming) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.limit)
	defer cancel()
	log.Infof("withdrawing: ready until no EndpointSlice of %s lists pod %s as ready (at most %s)", namespace, name, t.limit)
	if untilNone(ctx, ready, namespace, name, "ready", t) {
		sleep(ctx, t.proxySync)
	}
}

// drain waits until pod namespace/name has no serving endpoint and kube-proxy has had
// t.proxySync to act on it and, with queries, until no query has come for t.quiet, or t.limit is
// over. Outside a pod (name "") it returns at once.
func drain(serving endpointsFunc, queries QueryCount, namespace, name string, t DrainTiming) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.limit)
	defer cancel()
	log.Infof("draining: answering until no EndpointSlice of %s lists pod %s as serving (at most %s)", namespace, name, t.limit)
	if untilNone(ctx, serving, namespace, name, "serving", t) {
		untilQuiet(ctx, queries, t)
	}
}

// untilNone reads count every t.poll until pod namespace/name has no endpoint in state (true),
// or the slices may not be read, or ctx ends (false); it logs how it ended.
func untilNone(ctx context.Context, count endpointsFunc, namespace, name, state string, t DrainTiming) bool {
	start := time.Now()
	for {
		n, err := count(ctx, namespace, name)
		switch {
		case err == nil && n == 0:
			log.Infof("pod %s is not a %s endpoint after %s; answering %s more for kube-proxy", name, state, time.Since(start).Round(time.Millisecond), t.proxySync)
			return true
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			log.Warningf("cannot list the EndpointSlices of %s (%v): going on without waiting for kube-proxy", namespace, err)
			return false
		}
		select {
		case <-ctx.Done():
			log.Warningf("pod %s is still a %s endpoint after %s (%d; last error: %v): going on; a readiness probe of a shorter period turns it sooner",
				name, state, time.Since(start).Round(time.Millisecond), n, err)
			return false
		case <-time.After(t.poll):
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// untilQuiet answers for t.proxySync, then, with queries, until none has come for t.quiet or ctx
// ends; it logs how many came meanwhile, the sign of a kube-proxy later than t.proxySync.
func untilQuiet(ctx context.Context, queries QueryCount, t DrainTiming) {
	start := time.Now()
	if queries == nil {
		sleep(ctx, t.proxySync)
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

// Withdraw keeps the pod ready, at SIGTERM before any final shutdown, until it is no ready
// endpoint and kube-proxy has had its sync (withdraw); outside a pod it returns at once.
func (w *Watcher) Withdraw(t DrainTiming) {
	withdrawn.Do(func() {
		namespace, name := ownPod()
		withdraw(w.ReadyEndpoints, namespace, name, t)
	})
}

// withdrawn and drained make the waits once a process: a SIGTERM shuts down every instance (one
// per server block with kubetree), and the pod is withdrawn and drained after the first.
var withdrawn, drained sync.Once

// Drain waits, at the server's final shutdown, until the pod this process runs in is no serving
// endpoint, kube-proxy has had its sync and, with queries, no query comes any more (drain);
// outside a pod it returns at once.
func (w *Watcher) Drain(t DrainTiming, queries QueryCount) {
	drained.Do(func() {
		namespace, name := ownPod()
		drain(w.ServingEndpoints, queries, namespace, name, t)
	})
}

// ServingEndpoints counts the endpoints of pod namespace/name that the EndpointSlices of its
// namespace list as serving (conditions.serving true or unset). kube-proxy keeps the conntrack
// entries of a serving endpoint, so packets that follow those entries still reach the pod; once
// none is serving it deletes them (CleanStaleEntries in k8s.io/kubernetes/pkg/proxy/conntrack).
// A read of the API server's own state, not the informers' (which stop at shutdown, and keep
// no condition but readiness): it runs a few times while the pod shuts down.
func (w *Watcher) ServingEndpoints(ctx context.Context, namespace, name string) (int, error) {
	return w.podEndpoints(ctx, namespace, name, func(c discovery.EndpointConditions) bool { return c.Serving == nil || *c.Serving })
}

// ReadyEndpoints counts the endpoints of pod namespace/name that the EndpointSlices of its
// namespace list as ready (conditions.ready true or unset): kube-proxy sends new flows to them.
func (w *Watcher) ReadyEndpoints(ctx context.Context, namespace, name string) (int, error) {
	return w.podEndpoints(ctx, namespace, name, func(c discovery.EndpointConditions) bool { return c.Ready == nil || *c.Ready })
}

// podEndpoints counts the endpoints of pod namespace/name in the slices of its namespace whose
// conditions meet in.
func (w *Watcher) podEndpoints(ctx context.Context, namespace, name string, in func(discovery.EndpointConditions) bool) (int, error) {
	l, err := w.kube.DiscoveryV1().EndpointSlices(namespace).List(ctx, meta.ListOptions{}) // from etcd: the state kube-proxy is being told
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range l.Items {
		for _, e := range l.Items[i].Endpoints {
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" && e.TargetRef.Name == name && in(e.Conditions) {
				n++
			}
		}
	}
	return n, nil
}
