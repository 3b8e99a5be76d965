package records

import (
	"net/netip"
	"testing"

	"github.com/kubetree/kubetree/internal/object"
)

func TestEndpointLabel(t *testing.T) {
	v4 := object.Endpoint{Addr: netip.MustParseAddr("10.0.0.1")}
	v6 := object.Endpoint{Addr: netip.MustParseAddr("fd00::1")}
	v6end := object.Endpoint{Addr: netip.MustParseAddr("fd00::")}
	named := object.Endpoint{Addr: netip.MustParseAddr("10.0.0.2"), Hostname: "db-0"}
	tests := []struct {
		label string
		e     object.Endpoint
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
		if got := parseEndpointLabel(tc.label).denotes(tc.e); got != tc.want {
			t.Errorf("%q names %v: %v, want %v", tc.label, tc.e, got, tc.want)
		}
	}
}
