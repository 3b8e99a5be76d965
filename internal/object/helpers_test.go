package object

import (
	"fmt"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slim takes the objects through the informers' transforms.
func slim(t testing.TB, svc *api.Service, sls []*discovery.EndpointSlice, podNames bool) (*StoredService, []*StoredSlice) {
	t.Helper()
	obj, err := SlimService(svc)
	if err != nil {
		t.Fatal(err)
	}
	var out []*StoredSlice
	transform := SliceTransform(SliceOptions{PodNames: podNames})
	for _, sl := range sls {
		o, err := transform(sl)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*StoredSlice))
	}
	return obj.(*StoredService), out
}

// modelOf takes API objects through the informers' transforms and Assemble, as the watcher does.
func modelOf(t testing.TB, svc *api.Service, sls []*discovery.EndpointSlice, podNames bool) (*Service, []Problem) {
	t.Helper()
	stored, storedSlices := slim(t, svc, sls, podNames)
	return Assemble(stored, storedSlices)
}

// endsInitialEvents reports whether obj carries the annotation of the bookmark that ends a streamed
// list, which the reflector looks for.
func endsInitialEvents(obj any) bool {
	m, err := apimeta.Accessor(obj)
	return err == nil && m.GetAnnotations()[meta.InitialEventsAnnotationKey] == "true"
}

// hundredEndpoints is a slice of 100 ready endpoints with their pods and zones, every other one
// with a hostname, as a headless service's slice is.
func hundredEndpoints() *discovery.EndpointSlice {
	eps := make([]k8stest.Endpoint, 100)
	for i := range eps {
		eps[i] = k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.128.%d.%d", i/250, i%250+1)}, Pod: fmt.Sprintf("db-%d", i),
			Zone: fmt.Sprintf("zone-%c", 'a'+i%3)}
		if i%2 == 0 {
			eps[i].Hostname = fmt.Sprintf("host%d", i)
		}
	}
	return k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4,
		k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)), eps...)
}
