package plugin_test

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/whoami"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/plugintest"

	"github.com/miekg/dns"
)

// packingWriter packs each reply as a server's writer does (dns.Msg.Pack, a new buffer each time)
// and keeps nothing: the cost of a reply's records shows in ServeDNS's, as it does in a server's
// CPU per query.
type packingWriter struct {
	*plugintest.FixedAddrWriter
	packed int
}

// WriteMsg implements dns.ResponseWriter.
func (w *packingWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	w.packed += len(b)
	return err
}

// BenchmarkServeDNSAgainstWhoami measures each query on kubetree and on CoreDNS's whoami (one A
// and one SRV record built per reply: the floor of a plugin's cost), side by side, through the
// server's scrub and a writer that packs: compare ns/op. A server adds the same reading, writing
// and scheduling to both (bench/ measures that whole, by process).
func BenchmarkServeDNSAgainstWhoami(b *testing.B) {
	kt, _ := comparedHandlers(b)
	benchmarkSideBySide(b, []namedHandler{{"kubetree", kt}, {"whoami", whoami.Whoami{}}},
		func(b *testing.B, h namedHandler, r *dns.Msg) {
			w := &packingWriter{FixedAddrWriter: plugintest.NewServerWriter()}
			for b.Loop() {
				h.ServeDNS(context.Background(), request.NewScrubWriter(r, w), r)
			}
			if w.packed == 0 {
				b.Fatalf("%s wrote no reply to %s", h.name, r.Question[0].Name)
			}
		})
}
