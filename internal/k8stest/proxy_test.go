package k8stest

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echo is a TCP server that answers each line with its name and the line.
func echo(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(name + " " + line))
				}
			}()
		}
	}()
	return l.Addr().String()
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// say sends a line and returns the reply, or the error of waiting up to wait for it.
func say(c net.Conn, r *bufio.Reader, line string, wait time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestProxy(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	p := NewProxy(t, a)
	old, oldR := dial(t, p)
	if got, err := say(old, oldR, "1", 5*time.Second); got != "a 1\n" || err != nil {
		t.Fatalf("through the proxy: %q, %v; want a's answer", got, err)
	}

	p.Switch(b)
	if got, err := say(old, oldR, "2", 5*time.Second); got != "a 2\n" || err != nil {
		t.Fatalf("an open connection after Switch: %q, %v; want it still at a", got, err)
	}
	fresh, freshR := dial(t, p)
	if got, err := say(fresh, freshR, "3", 5*time.Second); got != "b 3\n" || err != nil {
		t.Fatalf("a new connection after Switch: %q, %v; want b's answer", got, err)
	}

	p.Freeze()
	// A frozen connection answers nothing, and is not closed: the read times out, no EOF.
	if got, err := say(old, oldR, "4", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a frozen connection: %q, %v; want a timeout", got, err)
	}
	if _, err := say(fresh, freshR, "5", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the other connection open at Freeze: %v; want a timeout", err)
	}
	later, laterR := dial(t, p)
	if got, err := say(later, laterR, "6", 5*time.Second); got != "b 6\n" || err != nil {
		t.Fatalf("a connection after Freeze: %q, %v; want b's answer", got, err)
	}
}
