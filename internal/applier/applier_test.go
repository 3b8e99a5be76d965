package applier

import (
	"strings"
	"sync/atomic"
	"testing"

	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

func init() { clog.Discard() }

const clusterZone = "cluster.local."

// newTestApplier is an applier of cluster.local and the reverse zones given, with the indexes it
// writes, as the plugin's setup wires it.
func newTestApplier(t testing.TB, reverse ...string) *Applier {
	t.Helper()
	names := append([]string{clusterZone}, reverse...)
	zones := []records.ServedZone{{Name: clusterZone}}
	for _, z := range reverse {
		zones = append(zones, records.ServedZone{Name: z, Reverse: true})
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	a := New(Indexes{Tree: tree.New(names), Reverse: records.NewReverseIndex(names), External: records.NewExternalIndex(), Behind: new(atomic.Pointer[records.Behind])},
		Options{Zones: zones, Build: &records.Builder{TTL: 5, NegativeTTL: 5, Nameserver: "ns.dns." + clusterZone}, Metrics: metrics.New("test://"+top, clusterZone)})
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// stored takes API objects through the informers' transforms, as the watcher stores them.
func stored(t testing.TB, svc *api.Service, sls ...*discovery.EndpointSlice) (*object.StoredService, []*object.StoredSlice) {
	t.Helper()
	obj, err := object.SlimService(svc)
	if err != nil {
		t.Fatal(err)
	}
	var out []*object.StoredSlice
	transform := object.SliceTransform(object.SliceOptions{})
	for _, sl := range sls {
		o, err := transform(sl)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*object.StoredSlice))
	}
	return obj.(*object.StoredService), out
}

// model is what the watcher hands over of a service, assembled.
func model(t testing.TB, svc *api.Service, sls ...*discovery.EndpointSlice) *object.Service {
	t.Helper()
	m, _ := object.Assemble(stored(t, svc, sls...))
	return m
}

// serialNow is the SOA serial of cluster.local.
func (a *Applier) serialNow() uint32 {
	return a.Tree.Get(clusterZone, clusterZone).(*records.FixedSet).SOA[0].(*dns.SOA).Serial
}

// dirtyNow reports whether records changed since the serial last moved.
func dirtyNow(a *Applier) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dirty
}

// TestSerialMovesWithinSecond: two changes in one second each move the serial, the second one
// once the clock has passed the first (the serial stays seconds-based).
func TestSerialMovesWithinSecond(t *testing.T) {
	a := newTestApplier(t)
	a.ApplyNamespace("prod", true)
	k8stest.WaitFor(t, "the first serial to settle", func() bool { return !dirtyNow(a) })
	before := a.serialNow()
	svcA, slsA := stored(t, k8stest.ClusterIPService("prod", "a", []string{"10.0.0.1"}))
	a.ApplyService("prod/a", svcA, slsA, true)
	k8stest.WaitFor(t, "the serial to move for a", func() bool { return a.serialNow() != before })
	first := a.serialNow()
	svcB, slsB := stored(t, k8stest.ClusterIPService("prod", "b", []string{"10.0.0.2"}))
	a.ApplyService("prod/b", svcB, slsB, true)
	k8stest.WaitFor(t, "the serial to move for b", func() bool { return a.serialNow() != first })
	if second := a.serialNow(); !records.SerialBefore(before, first) || !records.SerialBefore(first, second) {
		t.Errorf("serials %d, %d, %d are not increasing", before, first, second)
	}
}

// TestReportsForgottenWithTheService: what a service's objects could not represent is reported
// once per version, and forgotten when the service is deleted, so that the applier holds nothing of
// it.
func TestReportsForgottenWithTheService(t *testing.T) {
	a := newTestApplier(t)
	a.ApplyNamespace("prod", true)
	svc, sls := stored(t, k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1", "not-an-address"}))
	rejected := func() float64 { return testutil.ToFloat64(a.metrics.Rejected) }
	before := rejected()
	a.ApplyService("prod/web", svc, sls, true)
	a.ApplyService("prod/web", svc, sls, true) // the same version again: not reported again
	if got := rejected() - before; got != 1 {
		t.Errorf("rejected grew by %v, want 1", got)
	}
	if _, ok := a.reported["prod/web"]; !ok {
		t.Fatal("the problem of prod/web is not held")
	}
	a.ApplyService("prod/web", nil, nil, true)
	if _, ok := a.reported["prod/web"]; ok {
		t.Errorf("reported still holds prod/web after its deletion")
	}
}
