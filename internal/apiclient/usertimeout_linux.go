package apiclient

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpUserTimeout sets TCP_USER_TIMEOUT on a dialled socket: sent data that stays unacknowledged
// for d fails the connection.
func tcpUserTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
		}); cerr != nil {
			return cerr
		}
		return err
	}
}
