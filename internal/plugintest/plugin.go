// Package plugintest is the harness of the plugin's tests: the root's own and those under test/
// that need the whole plugin. It builds a Kubetree from a Corefile stanza as setup does
// (kubetree.NewForTests), runs the real watcher against client-go's fake clientset, made to behave
// like an API server where the watcher depends on it (internal/k8stest's FakeAPI), and checks
// what the plugin then answers.
// Every negative check (a name is gone, a key was not queued, a counter did not move) follows
// Barrier, which proves that every event sent before it has been applied: no sleeps.
//
// It is a package of its own, and not a file of the root's tests, because the tests of several
// packages share it. It imports the root, as the root's tests do; no production package imports it
// (test/repo's TestLayers).
package plugintest

import (
	"context"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree"
	"github.com/kubetree/kubetree/internal/applier"
	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Plugin is a Kubetree with the parts a test looks into.
type Plugin struct {
	*kubetree.Kubetree
	*kubetree.TestParts
}

// Wired is a Kubetree parsed from stanza and wired as setup wires it, with no watcher: tests that
// publish through the applier themselves start here.
func Wired(t testing.TB, stanza string) (*Plugin, *applier.Applier) {
	t.Helper()
	return wiredWith(t, stanza, kubetree.TestStandIns{Upstream: StubUpstream{Answer: UpstreamAnswer}})
}

// WiredWithHostSearch is Wired with a host search path, as setup reads it from resolv.conf.
func WiredWithHostSearch(t testing.TB, stanza string, search []string) (*Plugin, *applier.Applier) {
	t.Helper()
	return wiredWith(t, stanza, kubetree.TestStandIns{HostSearch: search})
}

// wiredWith is Wired with the stand-ins s for what setup takes from the server and the host.
func wiredWith(t testing.TB, stanza string, s kubetree.TestStandIns) (*Plugin, *applier.Applier) {
	t.Helper()
	// Series per top-level test: a fuzz target's inputs share theirs.
	top, _, _ := strings.Cut(t.Name(), "/")
	s.Server = "test://" + top
	k, parts, err := kubetree.NewForTests(caddy.NewTestController("dns", stanza), s)
	if err != nil {
		t.Fatalf("parse %q: %v", stanza, err)
	}
	return &Plugin{Kubetree: k, TestParts: parts}, parts.Applier
}

// Slim takes the objects through the informers' transforms.
func Slim(t testing.TB, svc *api.Service, sls []*discovery.EndpointSlice, podNames bool) (*object.StoredService, []*object.StoredSlice) {
	t.Helper()
	obj, err := object.SlimService(svc)
	if err != nil {
		t.Fatal(err)
	}
	var out []*object.StoredSlice
	transform := object.SliceTransform(object.SliceOptions{PodNames: podNames})
	for _, sl := range sls {
		o, err := transform(sl)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*object.StoredSlice))
	}
	return obj.(*object.StoredService), out
}

// UpstreamAnswer is what StubUpstream answers for every name outside our zones.
const UpstreamAnswer = "192.0.2.1"

// StubUpstream answers every name outside our zones with one A record, as the rest of a CoreDNS
// chain (forward) would: the tests' one stand-in upstream.
// With Truncated, its replies have TC set, as an upstream's whose answer did not fit.
type StubUpstream struct {
	Answer    string
	Truncated bool
}

// Lookup implements query.Upstream.
func (u StubUpstream) Lookup(_ context.Context, state request.Request, name string, typ uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, typ)
	m.Truncated = u.Truncated
	if typ == dns.TypeA {
		rr, _ := dns.NewRR(name + " 30 IN A " + u.Answer)
		m.Answer = append(m.Answer, rr)
	}
	return m, nil
}
