package kubetree

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/coredns/caddy"

	"github.com/kubetree/kubetree/external"
)

// TestReadmeCorefilesParse: every kubetree stanza in the corefile examples of the README and of the
// pages in docs/ is accepted by parse, with the zones of its server block.
func TestReadmeCorefilesParse(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append([]string{"README.md"}, docs...) {
		t.Run(doc, func(t *testing.T) { corefilesParse(t, doc) })
	}
}

// corefilesParse checks the corefile examples of one document.
func corefilesParse(t *testing.T, doc string) {
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)~~~ corefile\n(.*?)~~~").FindAllStringSubmatch(string(raw), -1)
	if len(blocks) == 0 && doc == "README.md" {
		t.Fatal("no corefile examples in the README")
	}
	for _, b := range blocks {
		lines := strings.Split(b[1], "\n")
		keys := strings.Fields(strings.TrimSuffix(strings.TrimSpace(lines[0]), "{"))
		stanzaOf := func(directive string) (string, bool) {
			start := -1
			for i, l := range lines {
				if f := strings.Fields(l); len(f) > 0 && f[0] == directive {
					start = i
				}
			}
			if start < 0 {
				return "", false
			}
			stanza, depth := "", 0
			for _, l := range lines[start:] {
				stanza += l + "\n"
				depth += strings.Count(l, "{") - strings.Count(l, "}")
				if depth == 0 {
					break
				}
			}
			return stanza, true
		}
		if stanza, ok := stanzaOf("kubetree_external"); ok {
			c := caddy.NewTestController("dns", stanza)
			c.ServerBlockKeys = keys
			if _, err := external.Parse(c); err != nil {
				t.Errorf("%s: example does not parse: %v\n%s", doc, err, stanza)
			}
		}
		stanza, ok := stanzaOf("kubetree")
		if !ok {
			t.Fatalf("example without kubetree:\n%s", b[1])
		}
		c := caddy.NewTestController("dns", stanza)
		c.ServerBlockKeys = keys
		k, err := parse(c)
		if err != nil {
			t.Errorf("%s: example does not parse: %v\n%s", doc, err, stanza)
			continue
		}
		if len(k.forward) == 0 {
			t.Errorf("%s: example has no forward zone: %v", doc, k.Zones)
		}
	}
}
