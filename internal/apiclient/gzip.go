package apiclient

import (
	"io"
	"net/http"

	"github.com/klauspost/compress/gzip"
)

// What kube-apiserver v1.37 compresses, when a request says Accept-Encoding: gzip
// (k8s.io/apiserver/pkg/endpoints/handlers): a list, at gzip level 1, once its response passes
// 128 KiB (responsewriters.defaultGzipThresholdBytes; a smaller one goes as it is), and a watch only
// if it is a streamed list (sendInitialEvents, the WatchListCompression gate, on by default since
// 1.37): from the first event to the watch's end, one gzip member per flush, each event alone a
// member of its own. kubetree never asks for a streamed list (internal/informer's plainLists), so
// its lists are compressed and its watches, from a resource version, never are.
//
// net/http would decode with compress/gzip; klauspost/compress decodes a member of one event in
// 0.86x its CPU (BenchmarkGzipEvents), most of it spent reading the member's Huffman tables. The
// transport's DisableCompression stays on so that net/http neither asks nor decodes, and
// gzipTransport does both. bench/WRITEPATH.md has what it costs and saves.

// gzipTransport asks for gzip on every GET (lists and watches) that does not say what it accepts,
// and decodes a gzip response as it is read: a list is decoded as it streams, never held whole.
type gzipTransport struct {
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t gzipTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet || r.Header.Get("Accept-Encoding") != "" {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper does not change its caller's request
	r.Header.Set("Accept-Encoding", "gzip")
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
		return resp, err
	}
	resp.Body = &gzipBody{body: resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return resp, nil
}

// WrappedRoundTripper lets client-go reach the http.Transport underneath (utilnet.RoundTripperWrapper).
func (t gzipTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// gzipBody decodes a gzip response body. Its decoder (about 42 KiB: a 32 KiB window, the Huffman
// tables, a 4 KiB read buffer) is made at the first Read, as net/http's, so that RoundTrip does not
// wait for the first bytes of a watch; a watch holds it for as long as it is open, a list until it
// is read. kubetree's watches are never compressed, so it holds one per list being read.
type gzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error
}

func (b *gzipBody) Read(p []byte) (int, error) {
	if b.zr == nil {
		if b.err != nil {
			return 0, b.err
		}
		// An empty body is a clean end (a watch that ended before its first event): io.EOF.
		zr, err := gzip.NewReader(b.body)
		if err != nil {
			b.err = err
			return 0, err
		}
		b.zr = zr
	}
	// A stream cut off inside a member is io.ErrUnexpectedEOF, a corrupt one gzip.ErrChecksum or a
	// flate error: never a clean end.
	return b.zr.Read(p)
}

// Close closes the response body: that ends the request. The decoder holds nothing to release
// (its Close only reports its error), and a watch's Stop may close the body while another
// goroutine reads it, so Close leaves the decoder alone.
func (b *gzipBody) Close() error { return b.body.Close() }
