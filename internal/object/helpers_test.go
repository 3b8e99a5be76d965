package object

import (
	"net/netip"
	"testing"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
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

// addrs parses addresses, for a model's expected fields.
func addrs(texts ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(texts))
	for _, s := range texts {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
