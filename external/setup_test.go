package external

import (
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		stanza string
		err    string // "" for success
		zones  []string
		ttl    uint32
		apex   string
		head   bool
	}{
		{stanza: "kubetree_external example.org", zones: []string{"example.org."}, ttl: 5, apex: "dns"},
		{stanza: "kubetree_external example.org example.net {\n ttl 30\n apex ns\n headless\n fallthrough\n}",
			zones: []string{"example.org.", "example.net."}, ttl: 30, apex: "ns", head: true},
		{stanza: "kubetree_external example.org {\n ttl 30 60\n apex ns x\n}", zones: []string{"example.org."}, ttl: 30, apex: "ns"},
		{stanza: "kubetree_external example.org {\n ttl 3601\n}", err: "ttl must be"},
		{stanza: "kubetree_external example.org {\n ttl x\n}", err: "ttl must be"},
		{stanza: "kubetree_external example.org {\n ttl\n}", err: "Wrong argument count"},
		{stanza: "kubetree_external example.org {\n apex\n}", err: "Wrong argument count"},
		{stanza: "kubetree_external example.org {\n headless yes\n}", err: "Wrong argument count"},
		{stanza: "kubetree_external example.org {\n resync 1m\n}", err: "unknown property 'resync'"},
		{stanza: "kubetree_external example.org\nkubetree_external example.net", err: plugin.ErrOnce.Error()},
	} {
		e, err := Parse(caddy.NewTestController("dns", tc.stanza))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.stanza, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.stanza, err)
			continue
		}
		if strings.Join(e.Zones, " ") != strings.Join(tc.zones, " ") || e.ttl != tc.ttl || e.apex != tc.apex || e.headless != tc.head {
			t.Errorf("%q: zones %v ttl %d apex %q headless %v", tc.stanza, e.Zones, e.ttl, e.apex, e.headless)
		}
	}
}
