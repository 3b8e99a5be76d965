package query

import (
	"errors"
	"net"

	"github.com/miekg/dns"
)

// InternalWriter keeps the reply of an internal query (the self-probe's, explain's), which comes
// from Client: from nowhere on the network when nil.
type InternalWriter struct {
	Msg    *dns.Msg
	Client net.Addr
}

var (
	loopback         = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	errInternalWrite = errors.New("an internal query takes a reply message, not bytes")
)

// WriteMsg keeps m.
func (w *InternalWriter) WriteMsg(m *dns.Msg) error { w.Msg = m; return nil }

// Write refuses bytes: the handler writes messages.
func (w *InternalWriter) Write([]byte) (int, error) { return 0, errInternalWrite }

// LocalAddr is 127.0.0.1.
func (w *InternalWriter) LocalAddr() net.Addr { return loopback }

// RemoteAddr is Client, or 127.0.0.1 without one.
func (w *InternalWriter) RemoteAddr() net.Addr {
	if w.Client == nil {
		return loopback
	}
	return w.Client
}

func (w *InternalWriter) Close() error        { return nil }
func (w *InternalWriter) TsigStatus() error   { return nil }
func (w *InternalWriter) TsigTimersOnly(bool) {}
func (w *InternalWriter) Hijack()             {}
