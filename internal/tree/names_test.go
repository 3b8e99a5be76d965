package tree

import (
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
		if i := MatchZone(zones, tc.qname); i >= 0 {
			got = zones[i]
		}
		if got != tc.want {
			t.Errorf("MatchZone(%q) = %q, want %q", tc.qname, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { MatchZone(zones, "Web.Prod.SVC.Cluster.Local.") }); n != 0 {
		t.Errorf("MatchZone allocates %v times", n)
	}
}
