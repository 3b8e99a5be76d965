package kubetree

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// cluster is a kubetree fed by client-go's fake clientset through the real watcher.
type cluster struct {
	k      *Kubetree
	client *fake.Clientset
	w      *watcher
}

// newCluster parses the stanza, starts the watcher on a fake clientset holding objs, and waits
// until the first sync is served and every watch is open (so later changes are seen).
func newCluster(t testing.TB, stanza string, objs ...runtime.Object) *cluster {
	t.Helper()
	k, err := parse(caddy.NewTestController("dns", stanza))
	if err != nil {
		t.Fatalf("parse %q: %v", stanza, err)
	}
	k.tree = NewTree(k.Zones, k.apex)
	client := fake.NewClientset(objs...)
	var mu sync.Mutex
	watching := map[string]bool{}
	client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		watching[a.GetResource().Resource] = true
		mu.Unlock()
		return false, nil, nil
	})
	w, err := newWatcherFromClient(k, client)
	if err != nil {
		t.Fatal(err)
	}
	k.cfg.startupTimeout = 10 * time.Second
	if err := w.start(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.stop() })
	want := 3
	if k.cfg.noEndpoints {
		want = 2
	}
	waitFor(t, "sync and open watches", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return k.Ready() && len(watching) == want
	})
	return &cluster{k: k, client: client, w: w}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Object builders, so that tests read like the cluster they describe.

func namespace(name string) *api.Namespace {
	return &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: name}}
}

func svcPorts(ports ...api.ServicePort) []api.ServicePort { return ports }

func tcp(name string, port int32) api.ServicePort {
	return api.ServicePort{Name: name, Protocol: api.ProtocolTCP, Port: port}
}

func udp(name string, port int32) api.ServicePort {
	return api.ServicePort{Name: name, Protocol: api.ProtocolUDP, Port: port}
}

func clusterIPService(ns, name string, ips []string, ports ...api.ServicePort) *api.Service {
	return &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec:       api.ServiceSpec{Type: api.ServiceTypeClusterIP, ClusterIP: ips[0], ClusterIPs: ips, Ports: ports},
	}
}

func headlessService(ns, name string, ports ...api.ServicePort) *api.Service {
	return &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec:       api.ServiceSpec{Type: api.ServiceTypeClusterIP, ClusterIP: api.ClusterIPNone, ClusterIPs: []string{api.ClusterIPNone}, Ports: ports},
	}
}

func externalNameService(ns, name, target string) *api.Service {
	return &api.Service{
		ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: name},
		Spec:       api.ServiceSpec{Type: api.ServiceTypeExternalName, ExternalName: target},
	}
}

// ep is one endpoint: its addresses, and optionally a hostname, a pod name and readiness.
type ep struct {
	addrs    []string
	hostname string
	pod      string
	notReady bool
	unknown  bool // ready left nil: counts as ready
}

func slice(ns, svc, name string, family discovery.AddressType, ports []discovery.EndpointPort, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  meta.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: family,
		Ports:       ports,
	}
	for _, e := range eps {
		d := discovery.Endpoint{Addresses: e.addrs}
		if e.hostname != "" {
			h := e.hostname
			d.Hostname = &h
		}
		if e.pod != "" {
			d.TargetRef = &api.ObjectReference{Kind: "Pod", Name: e.pod, Namespace: ns}
		}
		if !e.unknown {
			ready := !e.notReady
			d.Conditions.Ready = &ready
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

func slicePort(name string, proto api.Protocol, port int32) discovery.EndpointPort {
	n, p, pr := name, port, proto
	return discovery.EndpointPort{Name: &n, Port: &p, Protocol: &pr}
}

func slicePorts(ports ...discovery.EndpointPort) []discovery.EndpointPort { return ports }

// stubUpstream answers every name outside our zones with one A record, as the rest of a CoreDNS
// chain (forward) would.
type stubUpstream struct{ answer string }

func (u stubUpstream) Lookup(_ context.Context, state request.Request, name string, typ uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, typ)
	if typ == dns.TypeA {
		rr, _ := dns.NewRR(name + " 30 IN A " + u.answer)
		m.Answer = append(m.Answer, rr)
	}
	return m, nil
}
