//go:build linux && !race

package apiclient

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// rawPair is a loopback TCP connection dialled through withRawReads, and its other end.
func rawPair(t *testing.T) (conn net.Conn, peer *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	conn, err = withRawReads((&net.Dialer{}).DialContext)(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := conn.(*rawReadConn); !ok {
		t.Fatalf("dialled %T, want a *rawReadConn", conn)
	}
	c := <-accepted
	if c == nil {
		t.Fatal("nothing accepted")
	}
	t.Cleanup(func() { conn.Close(); c.Close() })
	return conn, c.(*net.TCPConn)
}

// TestRawReadConn: a connection that reads with raw system calls reads as any net.Conn: what was
// sent, in order, waiting for it when nothing is there yet; io.EOF when the other end closes; a
// timeout at its read deadline; net.ErrClosed when closed while it waits; and the error of a
// connection reset.
func TestRawReadConn(t *testing.T) {
	t.Run("data, waiting, EOF", func(t *testing.T) {
		conn, peer := rawPair(t)
		go func() {
			for _, part := range []string{"watch ", "events ", "arrive"} {
				time.Sleep(20 * time.Millisecond) // the reader waits in the poller
				peer.Write([]byte(part))
			}
			peer.Close()
		}()
		got, err := io.ReadAll(conn)
		if err != nil || string(got) != "watch events arrive" {
			t.Errorf("read %q, %v; want %q and the end", got, err, "watch events arrive")
		}
		if n, err := conn.Read(make([]byte, 8)); n != 0 || err != io.EOF {
			t.Errorf("after the end: %d, %v; want io.EOF", n, err)
		}
	})
	t.Run("a small buffer", func(t *testing.T) {
		conn, peer := rawPair(t)
		peer.Write([]byte("abcdef"))
		b := make([]byte, 4)
		if n, err := io.ReadFull(conn, b); n != 4 || err != nil || string(b) != "abcd" {
			t.Errorf("read %q, %v; want %q", b[:n], err, "abcd")
		}
		if n, err := conn.Read(b); n != 2 || err != nil || string(b[:n]) != "ef" {
			t.Errorf("then %q, %v; want %q", b[:n], err, "ef")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		conn, _ := rawPair(t)
		conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := conn.Read(make([]byte, 8))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("at the deadline: %v, want a timeout", err)
		}
	})
	t.Run("closed while waiting", func(t *testing.T) {
		conn, _ := rawPair(t)
		go func() {
			time.Sleep(50 * time.Millisecond)
			conn.Close()
		}()
		if _, err := conn.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("closed while reading: %v, want net.ErrClosed", err)
		}
	})
	t.Run("reset", func(t *testing.T) {
		conn, peer := rawPair(t)
		peer.SetLinger(0) // close with a RST
		peer.Close()
		_, err := conn.Read(make([]byte, 8))
		var op *net.OpError
		if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &op) || op.Op != "read" {
			t.Errorf("after a reset: %v, want read: ECONNRESET", err)
		}
	})
}
