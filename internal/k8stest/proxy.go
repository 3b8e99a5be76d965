package k8stest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a target, and can fail the way a dead
// host or a black-holed path does: Freeze stops the connections open at that moment, passing no
// byte in either direction and closing nothing (no FIN, no RST), so that only a timeout or a
// health check can find them dead. Switch sends the connections that follow elsewhere, as a load
// balancer moving off a dead host does.
type Proxy struct {
	l  net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	target string
	frozen chan struct{} // closed by Freeze: the connections accepted before then stop
	conns  []net.Conn
	closed bool
}

// NewProxy starts a Proxy to target ("host:port") on 127.0.0.1; t's cleanup closes it and every
// connection it holds, and waits for its goroutines.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{l: l, target: target, frozen: make(chan struct{})}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// Addr is the address ("127.0.0.1:port") to connect to instead of the target.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Freeze stops every connection open now; connections accepted later pass bytes as before.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.frozen)
	p.frozen = make(chan struct{})
}

// Switch sends the connections accepted from now on to target; open ones stay where they are.
func (p *Proxy) Switch(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

func (p *Proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		// Where it goes and what freezes it are fixed when it is accepted: a Freeze during the
		// dial stops it too.
		p.mu.Lock()
		target, frozen := p.target, p.frozen
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { pipe(out, in, frozen) })
		p.wg.Go(func() { pipe(in, out, frozen) })
	}
}

// pipe copies src to dst until frozen is closed, and then drops what it read and leaves both
// connections open; or until either connection fails or ends, and then closes dst, so that the
// other pipe of the pair ends too.
func pipe(dst, src net.Conn, frozen <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-frozen:
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *Proxy) close() {
	p.l.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
