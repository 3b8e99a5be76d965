package plugintest

import (
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/watcher"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/typed/apis/v1alpha1"
)

const (
	// Zones is the stanza of the watch tests' server block: two forward zones and a reverse one.
	Zones = "kubetree cluster.local 10.in-addr.arpa"
	// BarrierNS is the namespace of Barrier's objects.
	BarrierNS = "zz-barrier"
)

// Cluster is a kubetree whose watcher runs on a FakeAPI, writing through a RecordingApplier.
type Cluster struct {
	*Plugin
	W       *watcher.Watcher
	API     *k8stest.FakeAPI
	Applied *RecordingApplier
	// Seq numbers the names of Barrier's objects, and of any a test needs fresh.
	Seq atomic.Int64
}

// StartCluster is a Cluster of stanza serving objs, synced.
func StartCluster(t testing.TB, stanza string, objs ...runtime.Object) *Cluster {
	t.Helper()
	return StartClusterWith(t, stanza, nil, objs...)
}

// StartClusterWith lets prepare set hooks on the API and the applier before the watcher starts.
func StartClusterWith(t testing.TB, stanza string, prepare func(*Cluster), objs ...runtime.Object) *Cluster {
	t.Helper()
	k, ap := Wired(t, stanza)
	k.Watch.StartupTimeout = 10 * time.Second
	a := k8stest.NewFakeAPI(objs...)
	rec := &RecordingApplier{Applier: ap}
	w := WatcherFor(t, k, rec, a.Client, a.Versions.Client(), nil)
	c := &Cluster{Plugin: k, W: w, API: a, Applied: rec}
	if prepare != nil {
		prepare(c)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	want := []string{"endpointslices", "namespaces", "services"}
	if k.Watch.NoEndpoints {
		want = want[1:]
	}
	if k.Pods != nil {
		want = append(want, "pods")
		slices.Sort(want)
	}
	if k.Nodes != nil {
		want = append(want, "nodes")
		slices.Sort(want)
	}
	WaitFor(t, "sync and open watches", func() bool { return k.Ready() && slices.Equal(a.Opened(), want) })
	return c
}

// WatcherFor builds k's watcher over client (client-go's fake clientset, which decodes everything
// in full, or one wrapped around it), versions (the metadata-only lists of the same objects, a
// FakeVersions client) and, with multicluster, imports, as newWatcher builds it over a real API
// server from k.Watch, writing through a; the test's end stops it. The test starts it, after
// setting the API's hooks.
func WatcherFor(t testing.TB, k *Plugin, a watcher.Applier, client kubernetes.Interface, versions rest.Interface, imports mcsclient.MulticlusterV1alpha1Interface) *watcher.Watcher {
	t.Helper()
	w, err := watcher.New(k.Watch, a, watcher.Clients{Kube: client, Versions: versions, Imports: imports})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// Barrier returns once every change made through the API before it has been applied to the tree.
// Each informer hands its events to the watcher in order, so a sentinel object per informer handed
// to the applier means that everything before it has been queued, and one key at a time is applied
// in the order queued; a second sentinel, created once the first are applied, covers a key that was
// queued again while it was being applied.
func (c *Cluster) Barrier(t testing.TB) {
	t.Helper()
	n := c.Seq.Add(1)
	name := fmt.Sprintf("%s-%d", BarrierNS, n)
	mark := c.Applied.Mark()
	svc := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: BarrierNS, Name: name, Labels: MatchLabels(c.Watch.LabelSelector)},
		Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone}}
	ns := &api.Namespace{ObjectMeta: meta.ObjectMeta{Name: name, Labels: MatchLabels(c.Watch.NamespaceSelector)}}
	objs := []runtime.Object{svc, ns}
	keys := []string{BarrierNS + "/" + name, "namespace:" + name}
	if !c.Watch.NoEndpoints {
		sl := k8stest.Slice(BarrierNS, name+"-owner", name, discovery.AddressTypeIPv4, nil)
		for k, v := range MatchLabels(c.Watch.LabelSelector) {
			sl.Labels[k] = v
		}
		objs = append(objs, sl)
		keys = append(keys, BarrierNS+"/"+name+"-owner")
	}
	var sentinel netip.Addr
	if c.Pods != nil {
		// Pods do not go through the queue: a pod of the barrier's own is in the index once every
		// pod event before it is.
		sentinel = netip.AddrFrom16([16]byte{0xfd, 0, 0xba, 0xff, 14: byte(n >> 8), 15: byte(n)})
		objs = append(objs, k8stest.WithLabels(k8stest.Pod(BarrierNS, name, sentinel.String()), LabelPairs(c.Watch.LabelSelector)...))
	}
	c.Create(t, objs...)
	c.Applied.Await(t, mark, keys...)
	if sentinel.IsValid() {
		WaitFor(t, "the barrier pod", func() bool { return c.Pods.ClientAt(sentinel) != nil })
	}
	after := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: BarrierNS, Name: name + "-after", Labels: MatchLabels(c.Watch.LabelSelector)},
		Spec: api.ServiceSpec{ClusterIP: api.ClusterIPNone}}
	c.Create(t, after)
	c.Applied.Await(t, mark, BarrierNS+"/"+after.Name)
}

// LabelPairs are the selector's match labels as key, value, key, value...
func LabelPairs(sel *meta.LabelSelector) []string {
	var kv []string
	for k, v := range MatchLabels(sel) {
		kv = append(kv, k, v)
	}
	return kv
}

// MatchLabels are the selector's match labels; none without one.
func MatchLabels(sel *meta.LabelSelector) map[string]string {
	out := map[string]string{}
	if sel != nil {
		for k, v := range sel.MatchLabels {
			out[k] = v
		}
	}
	return out
}

// Create, Update and Remove change objects through the fake API; they do not wait.
func (c *Cluster) Create(t testing.TB, objs ...runtime.Object) { c.API.Create(t, objs...) }
func (c *Cluster) Update(t testing.TB, objs ...runtime.Object) { c.API.Update(t, objs...) }
func (c *Cluster) Remove(t testing.TB, objs ...runtime.Object) { c.API.Delete(t, objs...) }
