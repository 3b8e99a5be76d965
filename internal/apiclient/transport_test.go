package apiclient

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestTransportKeepsTLSAndAuth: the transport of our own still verifies the server against the
// configured CA, still authenticates, speaks HTTP/2 (whose health check finds dead connections), and
// asks for gzip (gzipTransport).
func TestTransportKeepsTLSAndAuth(t *testing.T) {
	_, rc := k8stest.TLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto+" "+r.Header.Get("Accept-Encoding"))
	})
	cfg, err := WithDeadConnectionDetection(rc)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(rc.Host)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "HTTP/2.0 gzip" {
		t.Fatalf("got %s %q, want 200 over HTTP/2.0 with Accept-Encoding gzip", resp.Status, body)
	}
	// The busy watches' HTTP/1.1 (HTTP1Config) keeps the same TLS, authentication and gzip.
	client1, err := rest.HTTPClientFor(HTTP1Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	resp, err = client1.Get(rc.Host)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "HTTP/1.1 gzip" {
		t.Fatalf("got %s %q, want 200 over HTTP/1.1 with Accept-Encoding gzip", resp.Status, body)
	}

	untrusted := *rc
	untrusted.TLSClientConfig = rest.TLSClientConfig{}
	cfg, err = WithDeadConnectionDetection(&untrusted)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*rest.Config{cfg, HTTP1Config(cfg)} {
		client, _ = rest.HTTPClientFor(c)
		if resp, err := client.Get(rc.Host); err == nil {
			resp.Body.Close()
			t.Fatal("a server the CA does not vouch for was trusted")
		}
	}
}

// TestDeadConnectionFound: a watch-like response that stops arriving because the path to the
// server froze (no bytes, no FIN, no RST) fails, instead of waiting forever, once the HTTP/2 health
// check gets no answer.
func TestDeadConnectionFound(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s, rc := k8stest.TLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // a watch with nothing to say
		case <-release:
		case <-r.Context().Done():
		}
	})
	p := k8stest.NewProxy(t, s.Listener.Addr().String())
	rc.Host = "https://" + p.Addr()
	rc.TLSClientConfig.ServerName = "example.com" // the httptest certificate's name
	_, ctx, body := openStream(t, rc)
	p.Freeze()
	start := time.Now()
	_, err := io.Copy(io.Discard, body)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the stream over a frozen connection ended with %v after %s, want a connection error", err, time.Since(start))
	}
	t.Logf("a frozen connection failed after %s: %v", time.Since(start).Round(100*time.Millisecond), err)
}

// TestMaxInflight: with apiserver_max_inflight N, at most N requests are under way at once, as in
// the in-tree plugin, whichever client of the instance makes them; the others wait their turn.
func TestMaxInflight(t *testing.T) {
	var mu sync.Mutex
	now, peak := 0, 0
	release := make(chan struct{})
	_, rc := k8stest.TLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		now++
		peak = max(peak, now)
		mu.Unlock()
		<-release
		mu.Lock()
		now--
		mu.Unlock()
	})
	rc.Wrap(maxInflight(2))
	cfg, err := WithDeadConnectionDetection(rc)
	if err != nil {
		t.Fatal(err)
	}
	// One limit for every client of the instance: here one over HTTP/2 and one over HTTP/1.1.
	client2, _ := rest.HTTPClientFor(cfg)
	client1, _ := rest.HTTPClientFor(HTTP1Config(cfg))
	var wg sync.WaitGroup
	for i := range 5 {
		client := []*http.Client{client2, client1}[i%2]
		wg.Go(func() {
			if resp, err := client.Get(rc.Host); err == nil {
				resp.Body.Close()
			}
		})
	}
	k8stest.WaitFor(t, "two requests at the server", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return now == 2
	})
	time.Sleep(200 * time.Millisecond) // the other three have had time to get past a limit that does not hold
	close(release)
	wg.Wait()
	if peak != 2 {
		t.Errorf("%d requests at the server at once, want at most 2", peak)
	}
}

// TestCloseConnections: an instance's shutdown closes every connection its transport dialed, one
// that still carries a stream included (closing idle connections would leave that one open).
func TestCloseConnections(t *testing.T) {
	_, rc := k8stest.TLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a watch with nothing to say
	})
	cfg, ctx, body := openStream(t, rc)
	ctx1, body1 := openStreamThrough(t, HTTP1Config(cfg))
	Close(cfg)
	if _, err := io.Copy(io.Discard, body); err == nil || ctx.Err() != nil {
		t.Fatalf("the stream ended with %v (context: %v) once its connection was closed, want a connection error", err, ctx.Err())
	}
	if _, err := io.Copy(io.Discard, body1); err == nil || ctx1.Err() != nil {
		t.Fatalf("the HTTP/1.1 stream ended with %v (context: %v) once its connection was closed, want a connection error", err, ctx1.Err())
	}
}

// openStream opens a GET through kubetree's transport (WithDeadConnectionDetection) to rc's server,
// as a watch is opened: the transport's configuration, the request's context (a minute) and the
// response body, closed when the test ends.
func openStream(t *testing.T, rc *rest.Config) (*rest.Config, context.Context, io.ReadCloser) {
	t.Helper()
	cfg, err := WithDeadConnectionDetection(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, body := openStreamThrough(t, cfg)
	return cfg, ctx, body
}

// openStreamThrough opens a GET as openStream does, through cfg as it is.
func openStreamThrough(t *testing.T, cfg *rest.Config) (context.Context, io.ReadCloser) {
	t.Helper()
	client, _ := rest.HTTPClientFor(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", cfg.Host, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return ctx, resp.Body
}
