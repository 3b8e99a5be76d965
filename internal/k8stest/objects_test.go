package k8stest

import (
	"maps"
	"testing"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)

func TestClusterIPService(t *testing.T) {
	s := ClusterIPService("prod", "web", []string{"10.0.0.1", "fd00::1"}, TCP("http", 80))
	if s.Spec.ClusterIP != "10.0.0.1" || len(s.Spec.ClusterIPs) != 2 || s.Spec.Type != api.ServiceTypeClusterIP {
		t.Errorf("with IPs: clusterIP %q, clusterIPs %v, type %s", s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Type)
	}
	// Without IPs nothing is set: a real API server refuses a clusterIPs[0] of "".
	s = DualStack(ClusterIPService("prod", "web", nil))
	if s.Spec.ClusterIP != "" || s.Spec.ClusterIPs != nil {
		t.Errorf("without IPs: clusterIP %q, clusterIPs %v, want neither", s.Spec.ClusterIP, s.Spec.ClusterIPs)
	}
	if p := s.Spec.IPFamilyPolicy; p == nil || *p != api.IPFamilyPolicyRequireDualStack {
		t.Errorf("DualStack: ipFamilyPolicy %v", p)
	}
}

func TestSlice(t *testing.T) {
	s := Slice("prod", "db", "db-1", discovery.AddressTypeIPv4, SlicePorts(SlicePort("pg", api.ProtocolTCP, 5432)),
		Endpoint{Addrs: []string{"10.0.0.1"}, Hostname: "db-0", Pod: "db-0", Zone: "a"},
		Endpoint{Addrs: []string{"10.0.0.2"}, NotReady: true},
		Endpoint{Addrs: []string{"10.0.0.3"}, Unknown: true})
	if s.Labels[discovery.LabelServiceName] != "db" || s.Namespace != "prod" || s.Name != "db-1" || len(s.Endpoints) != 3 {
		t.Fatalf("slice %+v", s)
	}
	first, notReady, unknown := s.Endpoints[0], s.Endpoints[1], s.Endpoints[2]
	if *first.Hostname != "db-0" || *first.Zone != "a" || !*first.Conditions.Ready ||
		first.TargetRef.Kind != "Pod" || first.TargetRef.Name != "db-0" || first.TargetRef.Namespace != "prod" {
		t.Errorf("first endpoint %+v", first)
	}
	if *notReady.Conditions.Ready || notReady.Hostname != nil || notReady.TargetRef != nil || notReady.Zone != nil {
		t.Errorf("not-ready endpoint %+v", notReady)
	}
	if unknown.Conditions.Ready != nil {
		t.Errorf("unknown endpoint: ready %v, want unset", *unknown.Conditions.Ready)
	}
	if p := s.Ports[0]; *p.Name != "pg" || *p.Port != 5432 || *p.Protocol != api.ProtocolTCP {
		t.Errorf("port %s/%d/%s", *p.Name, *p.Port, *p.Protocol)
	}
}

func TestImportSlice(t *testing.T) {
	s := ImportSlice("prod", "db", "east", "db-east", discovery.AddressTypeIPv4, nil)
	want := map[string]string{mcs.LabelServiceName: "db", mcs.LabelSourceCluster: "east"}
	if !maps.Equal(s.Labels, want) {
		t.Errorf("labels %v, want %v", s.Labels, want)
	}
	if s = ImportSlice("prod", "db", "", "db-x", discovery.AddressTypeIPv4, nil); len(s.Labels) != 1 {
		t.Errorf("no cluster: labels %v, want only the service name", s.Labels)
	}
}

// WithLabels must not write into a label map that another object shares.
func TestWithLabelsCopies(t *testing.T) {
	a := Namespace("a")
	a.Labels = map[string]string{"team": "x"}
	b := Namespace("b")
	b.Labels = a.Labels
	WithLabels(b, "env", "prod")
	if len(a.Labels) != 1 || b.Labels["team"] != "x" || b.Labels["env"] != "prod" {
		t.Errorf("a %v, b %v", a.Labels, b.Labels)
	}
}
