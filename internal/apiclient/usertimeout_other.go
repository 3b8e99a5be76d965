//go:build !linux

package apiclient

import (
	"syscall"
	"time"
)

// tcpUserTimeout is Linux's; elsewhere the HTTP/2 health check alone finds dead connections.
func tcpUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
