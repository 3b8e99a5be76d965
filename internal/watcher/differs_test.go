package watcher

import (
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
)

// TestChanged: an update reaches the queue only when it changes what DNS shows or reports.
func TestChanged(t *testing.T) {
	slim := func(o any) any {
		var out any
		switch v := o.(type) {
		case *api.Service:
			out, _ = object.SlimService(v)
		case *discovery.EndpointSlice:
			out, _ = object.SliceTransform(object.SliceOptions{})(v)
		}
		return out
	}
	base := func() *api.Service {
		s := k8stest.ClusterIPService("prod", "web", []string{"10.0.0.1"}, k8stest.TCP("http", 80))
		s.ResourceVersion = "1"
		return s
	}
	for _, tc := range []struct {
		name   string
		change func(*api.Service)
		want   bool
	}{
		{"nothing but the version", func(*api.Service) {}, false},
		{"labels", func(s *api.Service) { s.Labels = map[string]string{"a": "b"} }, false},
		{"target port", func(s *api.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("web") }, false},
		{"status conditions", func(s *api.Service) { s.Status.Conditions = []meta.Condition{{Type: "Ready"}} }, false},
		// kubetree_external serves the load balancer's ingress and the external IPs.
		{"load balancer ingress", func(s *api.Service) { s.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{IP: "1.2.3.4"}} }, true},
		{"load balancer hostname", func(s *api.Service) {
			s.Status.LoadBalancer.Ingress = []api.LoadBalancerIngress{{Hostname: "lb.example.com"}}
		}, true},
		{"external IPs", func(s *api.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} }, true},
		{"port", func(s *api.Service) { s.Spec.Ports[0].Port = 81 }, true},
		{"port name", func(s *api.Service) { s.Spec.Ports[0].Name = "web" }, true},
		{"protocol", func(s *api.Service) { s.Spec.Ports[0].Protocol = api.ProtocolUDP }, true},
		{"second cluster IP", func(s *api.Service) { s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::1") }, true},
		{"type", func(s *api.Service) { s.Spec.Type = api.ServiceTypeExternalName }, true},
		// Only an ExternalName service is answered from its external name.
		{"external name of a ClusterIP service", func(s *api.Service) { s.Spec.ExternalName = "example.com" }, false},
	} {
		t.Run("service "+tc.name, func(t *testing.T) {
			b := base()
			b.ResourceVersion = "2"
			tc.change(b)
			if got := serviceDiffers(slim(base()), slim(b)); got != tc.want {
				t.Errorf("serviceChanged = %v, want %v", got, tc.want)
			}
		})
	}

	sliceBase := func() *discovery.EndpointSlice {
		s := k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)),
			k8stest.Endpoint{Addrs: []string{"10.0.0.1"}, Hostname: "h", Pod: "p"})
		s.ResourceVersion = "1"
		return s
	}
	for _, tc := range []struct {
		name   string
		change func(*discovery.EndpointSlice)
		want   bool
	}{
		{"nothing but the version", func(*discovery.EndpointSlice) {}, false},
		{"other labels", func(s *discovery.EndpointSlice) { s.Labels["x"] = "y" }, false},
		{"topology", func(s *discovery.EndpointSlice) { n := "node"; s.Endpoints[0].NodeName = &n }, false},
		{"serving", func(s *discovery.EndpointSlice) { y := true; s.Endpoints[0].Conditions.Serving = &y }, false},
		{"service", func(s *discovery.EndpointSlice) { s.Labels[discovery.LabelServiceName] = "other" }, true},
		{"address", func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses = []string{"10.0.0.2"} }, true},
		{"ready", func(s *discovery.EndpointSlice) { n := false; s.Endpoints[0].Conditions.Ready = &n }, true},
		{"hostname", func(s *discovery.EndpointSlice) { h := "g"; s.Endpoints[0].Hostname = &h }, true},
		// The endpoint has a hostname, which names it whatever its pod is called.
		{"pod of an endpoint with a hostname", func(s *discovery.EndpointSlice) { s.Endpoints[0].TargetRef.Name = "q" }, false},
		{"endpoint added", func(s *discovery.EndpointSlice) { s.Endpoints = append(s.Endpoints, s.Endpoints[0]) }, true},
		{"port", func(s *discovery.EndpointSlice) { p := int32(81); s.Ports[0].Port = &p }, true},
		{"address type", func(s *discovery.EndpointSlice) { s.AddressType = discovery.AddressTypeIPv6 }, true},
	} {
		t.Run("slice "+tc.name, func(t *testing.T) {
			b := sliceBase()
			b.ResourceVersion = "2"
			tc.change(b)
			if got := sliceDiffers(slim(sliceBase()), slim(b)); got != tc.want {
				t.Errorf("sliceChanged = %v, want %v", got, tc.want)
			}
		})
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "prod/web"}
	if !serviceDiffers(tomb, slim(base())) || !sliceDiffers(tomb, slim(sliceBase())) {
		t.Error("an update involving something other than the object itself must count as a change")
	}
}

// TestZonalChange: a zone-only change rebuilds the service with zonal (its zonal answers change),
// and is no change at all without it.
func TestZonalChange(t *testing.T) {
	sl := k8stest.InZones(k8stest.Slice("testns", "hdls", "hdls-1", discovery.AddressTypeIPv4, nil,
		k8stest.Endpoint{Addrs: []string{"172.0.0.1"}}, k8stest.Endpoint{Addrs: []string{"172.0.0.2"}}, k8stest.Endpoint{Addrs: []string{"172.0.0.3"}}), "a", "b", "A")
	moved := k8stest.InZones(sl.DeepCopy(), "a", "b", "c")
	for _, o := range []object.SliceOptions{{}, {Zonal: true}} {
		before, _ := object.SliceTransform(o)(sl)
		after, _ := object.SliceTransform(o)(moved)
		if got := sliceDiffers(before, after); got != o.Zonal {
			t.Errorf("zonal %v: a zone-only change is a change: %v, want %v", o.Zonal, got, o.Zonal)
		}
	}
}
