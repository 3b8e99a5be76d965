//go:build linux && !race

package apiclient

import (
	"context"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// withRawReads makes dial's TCP connections read with raw system calls (rawReadConn).
func withRawReads(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		tcp, ok := c.(*net.TCPConn)
		if !ok {
			return c, nil
		}
		raw, err := tcp.SyscallConn()
		if err != nil {
			return c, nil
		}
		return &rawReadConn{TCPConn: tcp, raw: raw}, nil
	}
}

// rawReadConn reads its socket with a raw read(2), which skips the Go runtime's system call
// bookkeeping. The socket is non-blocking and a read returns at once; when it has nothing, the
// runtime's poller waits, as for any connection (deadlines and Close included). What that skips:
// when the process has been idle (every P idle, as a DNS server is between pod changes), the
// runtime's monitor thread (sysmon) sleeps until a goroutine enters a system call, which wakes it;
// it then sleeps 20 µs once or twice, finds every P idle again and goes back to sleep. With one
// watch event per wake-up, kubetree's context switches per pod change went from 3.5 to 1.0 without
// it, and its CPU per change down by a third (bench/WRITEPATH.md).
type rawReadConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

// Read implements net.Conn.
func (c *rawReadConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // the poller waits for data
			}
			n, errno = int(r), e
			return true
		}
	})
	if err == nil && errno != 0 {
		n, err = 0, os.NewSyscallError("read", errno)
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}
