package plugintest

import (
	"net"

	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

// CaptureWriter keeps the reply without packing it (so that benchmarks count the plugin's own
// allocations), and counts the writes.
type CaptureWriter struct {
	test.ResponseWriter
	Msg    *dns.Msg
	Writes int
}

// WriteMsg implements dns.ResponseWriter.
func (w *CaptureWriter) WriteMsg(m *dns.Msg) error { w.Writes++; w.Msg = m; return nil }

// FixedAddrWriter records the reply and names one remote address without allocating it.
type FixedAddrWriter struct {
	CaptureWriter
	Addr net.Addr
}

// RemoteAddr implements dns.ResponseWriter.
func (w *FixedAddrWriter) RemoteAddr() net.Addr { return w.Addr }

// NewServerWriter is a writer for benchmarks that, as a server's, names its client without
// allocating (test.ResponseWriter makes a new address each time it is asked): a benchmark's
// allocations are then the plugin's own.
func NewServerWriter() *FixedAddrWriter {
	return &FixedAddrWriter{Addr: &net.UDPAddr{IP: net.IPv4(10, 240, 0, 1), Port: 40212}}
}
