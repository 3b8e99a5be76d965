package measure

import (
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/clientcmd"
)

// CountingProxy forwards TCP connections from a loopback port to the API server and counts the
// bytes each way.
type CountingProxy struct {
	l        net.Listener
	target   string
	Down, Up atomic.Int64 // from the API server, to it
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	once     sync.Once
}

func newCountingProxy(target string) (*CountingProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CountingProxy{l: l, target: target}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *CountingProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { copyCounting(out, in, &p.Up) })
		p.wg.Go(func() { copyCounting(in, out, &p.Down) })
	}
}

// copyCounting copies until either side closes, then closes both.
func copyCounting(dst, src net.Conn, n *atomic.Int64) {
	_, _ = io.Copy(&countingWriter{dst, n}, src)
	dst.Close()
	src.Close()
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// Close stops the proxy and closes its connections; it can be called more than once.
func (p *CountingProxy) Close() {
	p.once.Do(func() {
		p.l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}

// Proxied starts a counting proxy to target and writes a copy of kubeconfig that goes through it.
func Proxied(dir, name, kubeconfig, target string) (*CountingProxy, string, error) {
	p, err := newCountingProxy(target)
	if err != nil {
		return nil, "", err
	}
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		p.Close()
		return nil, "", err
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + p.l.Addr().String()
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		p.Close()
		return nil, "", err
	}
	return p, path, nil
}
