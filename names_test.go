package kubetree

import (
	"net/netip"
	"testing"
)

func TestMatchZone(t *testing.T) {
	zones := []string{"cluster.local.", "svc.cluster.local.", "10.in-addr.arpa.", "in-addr.arpa."}
	tests := []struct {
		qname, want string
	}{
		{"web.prod.svc.cluster.local.", "svc.cluster.local."},
		{"svc.cluster.local.", "svc.cluster.local."},
		{"pod.cluster.local.", "cluster.local."},
		{"cluster.local.", "cluster.local."},
		{"Web.Prod.SVC.Cluster.Local.", "svc.cluster.local."},
		{"CLUSTER.LOCAL.", "cluster.local."},
		{"1.0.0.10.in-addr.arpa.", "10.in-addr.arpa."},
		{"1.0.0.110.in-addr.arpa.", "in-addr.arpa."},
		{"local.", ""},
		{"xcluster.local.", ""},
		{"cluster.local.example.org.", ""},
		{"example.org.", ""},
		{".", ""},
		{`a\.cluster.local.`, ""},
		{`a\\.cluster.local.`, "cluster.local."},
		{`a\.svc.cluster.local.`, "cluster.local."},
	}
	for _, tc := range tests {
		got := ""
		if i := matchZone(zones, tc.qname); i >= 0 {
			got = zones[i]
		}
		if got != tc.want {
			t.Errorf("matchZone(%q) = %q, want %q", tc.qname, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { matchZone(zones, "Web.Prod.SVC.Cluster.Local.") }); n != 0 {
		t.Errorf("matchZone allocates %v times", n)
	}
}

func TestEndpointLabel(t *testing.T) {
	v4 := endpoint{Addr: netip.MustParseAddr("10.0.0.1")}
	v6 := endpoint{Addr: netip.MustParseAddr("fd00::1")}
	v6end := endpoint{Addr: netip.MustParseAddr("fd00::")}
	named := endpoint{Addr: netip.MustParseAddr("10.0.0.2"), Hostname: "db-0"}
	tests := []struct {
		label string
		e     endpoint
		want  bool
	}{
		{"10-0-0-1", v4, true},
		{"10-0-0-01", v4, false},
		{"10-0-0-2", v4, false},
		{"fd00--1", v6, true},
		{"FD00--1", v6, true},
		{"fd00-0-0-0-0-0-0-1", v6, false}, // only the compressed spelling names it
		{"fd00--0", v6end, true},
		{"db-0", named, true},
		{"DB-0", named, true},
		{"10-0-0-2", named, false}, // an endpoint with a hostname is named by it alone
		{"nope", v4, false},
		{"", v4, false},
	}
	for _, tc := range tests {
		if got := parseEndpointLabel(tc.label).names(tc.e); got != tc.want {
			t.Errorf("%q names %v: %v, want %v", tc.label, tc.e, got, tc.want)
		}
	}
}
