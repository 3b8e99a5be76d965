package watcher

import (
	"context"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// kube-proxy sends new flows to ready endpoints only: a terminating pod's endpoint is not ready,
// whether or not it still serves.
func TestReadyEndpointsOfAPod(t *testing.T) {
	yes, no := true, false
	endpoint := func(pod string, ready *bool) discovery.Endpoint {
		return discovery.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: &api.ObjectReference{Kind: "Pod", Name: pod},
			Conditions: discovery.EndpointConditions{Ready: ready, Serving: &yes}}
	}
	w := &Watcher{kube: fake.NewClientset(
		&discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-v4"}, AddressType: discovery.AddressTypeIPv4,
			Endpoints: []discovery.Endpoint{endpoint("dns-a", nil), endpoint("dns-b", &no), endpoint("dns-c", &yes)}},
	)}
	for pod, want := range map[string]int{"dns-a": 1, "dns-b": 0, "dns-c": 1, "dns-d": 0} {
		got, err := w.ReadyEndpoints(context.Background(), "kube-system", pod)
		if err != nil || got != want {
			t.Errorf("ReadyEndpoints(kube-system, %s) = %d, %v; want %d", pod, got, err, want)
		}
	}
}

// At SIGTERM a kubetree pod stays ready until no EndpointSlice lists it as ready (terminating, it
// gets no new flow once kube-proxy has synced) and kube-proxy has had its sync; only then may
// /ready fail, so that no kube-proxy takes it out of its rules and deletes its conntrack entries
// at one sync.
func TestWithdrawAtSIGTERM(t *testing.T) {
	quick := DrainTiming{poll: time.Millisecond, proxySync: 20 * time.Millisecond, limit: time.Minute}

	t.Run("ready until its endpoint is not ready, then one kube-proxy sync", func(t *testing.T) {
		calls := 0
		var turned time.Time
		withdraw(func(_ context.Context, ns, name string) (int, error) {
			calls++
			if ns != "kube-system" || name != "coredns-1" {
				t.Errorf("asked about %s/%s, want kube-system/coredns-1", ns, name)
			}
			if calls <= 3 { // the endpoint slice controller has not seen the deletion yet
				return 1, nil
			}
			turned = time.Now()
			return 0, nil
		}, "kube-system", "coredns-1", quick)
		if calls != 4 {
			t.Errorf("withdraw returned after %d reads of the slices, want 4: the last one finds the pod not ready", calls)
		}
		if since := time.Since(turned); since < quick.proxySync {
			t.Errorf("withdraw returned %s after the endpoint turned not ready, want at least kube-proxy's sync, %s", since, quick.proxySync)
		}
	})
	t.Run("stops waiting at the limit, without the sync", func(t *testing.T) {
		limited := quick
		limited.proxySync, limited.limit = time.Hour, 20*time.Millisecond
		calls := 0
		done := make(chan struct{})
		go func() {
			withdraw(func(context.Context, string, string) (int, error) { calls++; return 1, nil }, "kube-system", "coredns-1", limited)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("withdraw still waits a minute after its limit")
		}
		if calls == 0 {
			t.Error("stopped at the limit without reading the slices")
		}
	})
	t.Run("stops waiting when the slices are forbidden", func(t *testing.T) {
		calls := 0
		forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", nil)
		withdraw(func(context.Context, string, string) (int, error) { calls++; return 0, forbidden }, "kube-system", "coredns-1", quick)
		if calls != 1 {
			t.Errorf("forbidden: %d reads, want 1", calls)
		}
	})
	t.Run("outside a pod, no wait", func(t *testing.T) {
		withdraw(func(context.Context, string, string) (int, error) {
			t.Error("read the slices with no pod to look for")
			return 0, nil
		}, "", "", quick)
	})
}

// At its final shutdown a kubetree pod goes on answering until no EndpointSlice lists it as
// serving (then kube-proxy deletes the conntrack entries that still lead to it), and only then
// lets the listeners close; a pod that never stops serving, or whose slices it may not read,
// stops waiting.
func TestDrainAtShutdown(t *testing.T) {
	quick := DrainTiming{poll: time.Millisecond, proxySync: time.Millisecond, limit: time.Minute}

	t.Run("answers until its endpoint stops serving", func(t *testing.T) {
		calls := 0
		drain(func(_ context.Context, ns, name string) (int, error) {
			calls++
			if ns != "kube-system" || name != "coredns-1" {
				t.Errorf("asked about %s/%s, want kube-system/coredns-1", ns, name)
			}
			if calls <= 3 { // the kubelet's probe has not failed yet: still serving
				return 1, nil
			}
			return 0, nil
		}, nil, "kube-system", "coredns-1", quick)
		if calls != 4 {
			t.Errorf("drain returned after %d reads of the slices, want 4: the last one finds the pod not serving", calls)
		}
	})
	t.Run("then answers until the queries stop coming", func(t *testing.T) {
		quiet := quick
		quiet.quiet = 30 * time.Millisecond
		var reads int
		var stoppedAt time.Time
		queries := func() uint64 {
			reads++
			if reads <= 20 { // kube-proxy on some node has not synced: queries still come
				stoppedAt = time.Now()
				return uint64(reads)
			}
			return 20
		}
		notServing := func(context.Context, string, string) (int, error) { return 0, nil }
		drain(notServing, queries, "kube-system", "coredns-1", quiet)
		if reads <= 20 {
			t.Fatalf("drain returned after %d reads of the query count, while queries still came", reads)
		}
		if since := time.Since(stoppedAt); since < quiet.quiet {
			t.Errorf("drain returned %s after the last query, want at least %s", since, quiet.quiet)
		}
	})
	t.Run("stops waiting for quiet at the limit", func(t *testing.T) {
		busy := quick
		busy.quiet, busy.limit = time.Hour, 50*time.Millisecond
		var n uint64
		drain(func(context.Context, string, string) (int, error) { return 0, nil }, func() uint64 { n++; return n }, "kube-system", "coredns-1", busy)
		if n < 2 {
			t.Errorf("read the query count %d times: it did not wait for the queries to stop", n)
		}
	})
	t.Run("stops waiting at the limit", func(t *testing.T) {
		limited := quick
		limited.limit = 20 * time.Millisecond
		calls := 0
		drain(func(context.Context, string, string) (int, error) { calls++; return 1, nil }, nil, "kube-system", "coredns-1", limited)
		if calls == 0 {
			t.Error("stopped at the limit without reading the slices")
		}
	})
	t.Run("stops waiting when the slices are forbidden", func(t *testing.T) {
		calls := 0
		forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", nil)
		drain(func(context.Context, string, string) (int, error) { calls++; return 0, forbidden }, nil, "kube-system", "coredns-1", quick)
		if calls != 1 {
			t.Errorf("forbidden: %d reads, want 1", calls)
		}
	})
	t.Run("outside a pod, no wait", func(t *testing.T) {
		drain(func(context.Context, string, string) (int, error) {
			t.Error("read the slices with no pod to look for")
			return 0, nil
		}, nil, "", "", quick)
	})
}
