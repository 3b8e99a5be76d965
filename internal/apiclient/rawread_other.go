//go:build !linux || race

package apiclient

import (
	"context"
	"net"
)

// withRawReads is Linux's (rawread_linux.go). Elsewhere, and in a build with the race detector,
// connections read as usual: the detector learns that what one goroutine wrote to a socket
// happened before another read it only from the runtime's own reads and writes, and would report
// the tests' in-process API servers as racing with their clients.
func withRawReads(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return dial
}
