package apiclient

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"

	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// gzipAPI serves a list of slices and a watch of them in protobuf, gzipped as kube-apiserver v1.37
// does when asked (gzipped false: as if not asked): the list in one gzip member, the watch one
// member per event (its perFlushGzipWriter: write, flush, close, flush the HTTP/2 stream). Each
// watch event after the first waits for next, so that a client that waits for more than the
// event it was sent (the next member's header) hangs; cut, when not nil, changes the compressed
// list before it is sent.
type gzipAPI struct {
	t        *testing.T
	slices   []discovery.EndpointSlice
	gzipped  bool
	cut      func([]byte) []byte
	next     chan struct{}
	asked    atomic.Value // the Accept-Encoding of the last request
	compress atomic.Int32 // responses sent gzipped
}

func (f *gzipAPI) serve(w http.ResponseWriter, r *http.Request) {
	info := k8stest.ProtobufInfo(f.t)
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, discovery.SchemeGroupVersion)
	f.asked.Store(r.Header.Get("Accept-Encoding"))
	gz := f.gzipped && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
	w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
		f.compress.Add(1)
	}
	if r.URL.Query().Get("watch") != "true" {
		var b bytes.Buffer
		list := &discovery.EndpointSliceList{ListMeta: meta.ListMeta{ResourceVersion: "200"}, Items: f.slices}
		if err := enc.Encode(list, &b); err != nil {
			f.t.Error(err)
			return
		}
		if gz {
			b = gzipped(f.t, b.Bytes())
			if f.cut != nil {
				b = *bytes.NewBuffer(f.cut(b.Bytes()))
			}
		}
		w.Write(b.Bytes())
		return
	}
	events := k8stest.NewEventWriter(f.t, w, gz)
	for i := range f.slices {
		if i > 0 {
			select {
			case <-f.next:
			case <-r.Context().Done():
				return
			}
		}
		events.Send(watch.Added, &f.slices[i])
	}
	<-r.Context().Done()
}

func gzipped(t *testing.T, b []byte) bytes.Buffer {
	t.Helper()
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// countingBodies counts the response bodies a transport hands out and how many were closed.
type countingBodies struct {
	next           http.RoundTripper
	opened, closed atomic.Int32
}

func (c *countingBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		c.opened.Add(1)
		resp.Body = &closeCounted{ReadCloser: resp.Body, closed: &c.closed}
	}
	return resp, err
}

type closeCounted struct {
	io.ReadCloser
	closed *atomic.Int32
	once   atomic.Bool
}

func (c *closeCounted) Close() error {
	if c.once.CompareAndSwap(false, true) {
		c.closed.Add(1)
	}
	return c.ReadCloser.Close()
}

// gzipAPIClient is a protobuf clientset for f through kubetree's transport, whose bodies are counted.
func gzipAPIClient(t *testing.T, f *gzipAPI) (kubernetes.Interface, *countingBodies) {
	_, rc := k8stest.TLSServer(t, f.serve)
	cfg, err := WithDeadConnectionDetection(rc)
	if err != nil {
		t.Fatal(err)
	}
	gt := cfg.Transport.(ownTransport).RoundTripper.(gzipTransport)
	bodies := &countingBodies{next: gt.next}
	cfg.Transport = gzipTransport{next: bodies}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, bodies
}

// TestGzipTransport: kubetree asks for gzip, and a list and a watch decode the same whether the
// API server compresses them or not; each watch event arrives while the stream stays open (not
// one event late), and every response body is closed.
func TestGzipTransport(t *testing.T) {
	slices := k8stest.Slices(40)
	var got [2][]discovery.EndpointSlice
	for i, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			f := &gzipAPI{t: t, slices: slices, gzipped: gz, next: make(chan struct{})}
			client, bodies := gzipAPIClient(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			list, err := client.DiscoveryV1().EndpointSlices("").List(ctx, meta.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if f.asked.Load() != "gzip" {
				t.Errorf("asked with Accept-Encoding %q, want gzip", f.asked.Load())
			}
			if list.ResourceVersion != "200" || len(list.Items) != len(slices) {
				t.Fatalf("list at %q with %d slices, want 200 and %d", list.ResourceVersion, len(list.Items), len(slices))
			}
			got[i] = list.Items

			w, err := client.DiscoveryV1().EndpointSlices("").Watch(ctx, meta.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for j := range slices {
				select {
				case ev := <-w.ResultChan():
					s, ok := ev.Object.(*discovery.EndpointSlice)
					if !ok || ev.Type != watch.Added || !reflect.DeepEqual(*s, list.Items[j]) {
						t.Fatalf("event %d: %s %#v, want ADDED %s", j, ev.Type, ev.Object, list.Items[j].Name)
					}
				case <-ctx.Done():
					t.Fatalf("event %d did not arrive before the next was sent", j)
				}
				if j < len(slices)-1 {
					f.next <- struct{}{}
				}
			}
			w.Stop()
			if want := map[bool]int32{false: 0, true: 2}[gz]; f.compress.Load() != want {
				t.Errorf("%d responses gzipped, want %d", f.compress.Load(), want)
			}
			k8stest.WaitFor(t, "every response body closed", func() bool { return bodies.closed.Load() == bodies.opened.Load() })
			if bodies.opened.Load() != 2 {
				t.Errorf("%d responses, want 2", bodies.opened.Load())
			}
		})
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Error("the list decoded differently with gzip")
	}
}

// TestGzipTruncated: a list whose gzip stream is cut off or corrupt is an error, never a shorter
// list.
func TestGzipTruncated(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func([]byte) []byte
	}{
		{"header only", func(b []byte) []byte { return b[:10] }},
		{"half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"no trailer", func(b []byte) []byte { return b[:len(b)-8] }},
		{"checksum wrong", func(b []byte) []byte {
			b = bytes.Clone(b)
			b[len(b)-8] ^= 1
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &gzipAPI{t: t, slices: k8stest.Slices(40), gzipped: true, cut: tc.cut}
			client, bodies := gzipAPIClient(t, f)
			list, err := client.DiscoveryV1().EndpointSlices("").List(context.Background(), meta.ListOptions{})
			if err == nil {
				t.Fatalf("a list of %d slices from a broken stream, want an error", len(list.Items))
			}
			t.Logf("%s: %v", tc.name, err)
			k8stest.WaitFor(t, "the response body closed", func() bool { return bodies.closed.Load() == bodies.opened.Load() })
		})
	}
}

// TestGzipBody: what the decoder makes of a stream of members (a watch's): each member's data as
// it comes; the end of the body after a whole member is the stream's clean end (a watch knows
// the end of its streamed list by its bookmark, not by the body's end); a cut inside a member is
// io.ErrUnexpectedEOF; a gzip body with no member at all (a watch that ended before its first
// event) is empty.
func TestGzipBody(t *testing.T) {
	one, two := gzipped(t, []byte("first event")), gzipped(t, []byte("second event"))
	stream := append(one.Bytes(), two.Bytes()...)
	const all = "first eventsecond event"
	for _, tc := range []struct {
		name string
		body []byte
		want string // all of it, or with err what it must have read at least
		err  error
	}{
		{"two members", stream, all, nil},
		{"cut between members", stream[:one.Len()], "first event", nil},
		{"cut inside the second", stream[:one.Len()+14], "first event", io.ErrUnexpectedEOF},
		{"cut inside the first", stream[:one.Len()-3], "", io.ErrUnexpectedEOF},
		{"empty", nil, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			closed := &atomic.Int32{}
			b := &gzipBody{body: &closeCounted{ReadCloser: io.NopCloser(bytes.NewReader(tc.body)), closed: closed}}
			got, err := io.ReadAll(b)
			ok := string(got) == tc.want
			if tc.err != nil { // what was read before the cut: at least the whole members, never more than sent
				ok = strings.HasPrefix(string(got), tc.want) && strings.HasPrefix(all, string(got))
			}
			if !ok || !errors.Is(err, tc.err) {
				t.Errorf("read %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
			b.Close()
			if closed.Load() != 1 {
				t.Error("Close did not close the response body")
			}
		})
	}
}

// TestGzipOnlyAsked: a request that says what it accepts, or is not a GET, is sent as it is and its
// response left as it came.
func TestGzipOnlyAsked(t *testing.T) {
	var seen atomic.Value
	_, rc := k8stest.TLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Method + " " + r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Encoding", "gzip")
		b := gzipped(t, []byte("raw"))
		w.Write(b.Bytes())
	})
	cfg, err := WithDeadConnectionDetection(rc)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := rest.HTTPClientFor(cfg)
	for _, tc := range []struct{ method, accept, seen string }{
		{"GET", "identity", "GET identity"},
		{"POST", "", "POST "},
	} {
		req, _ := http.NewRequest(tc.method, rc.Host, nil)
		if tc.accept != "" {
			req.Header.Set("Accept-Encoding", tc.accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if seen.Load() != tc.seen || resp.Header.Get("Content-Encoding") != "gzip" || bytes.Equal(body, []byte("raw")) {
			t.Errorf("%s with %q: the server saw %q, the client got %q encoded %q; want it untouched",
				tc.method, tc.accept, seen.Load(), body, resp.Header.Get("Content-Encoding"))
		}
	}
}

// BenchmarkGzipEvents: decoding watch events as kube-apiserver sends them after a streamed list
// (each EndpointSlice of ten endpoints a gzip member of its own), with net/http's decoder
// (compress/gzip) and with gzipBody's; per event, beside reading them uncompressed.
func BenchmarkGzipEvents(b *testing.B) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		b.Fatal("no protobuf serializer")
	}
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, discovery.SchemeGroupVersion)
	const events = 1000
	var plain, zipped bytes.Buffer
	slices := k8stest.Slices(events)
	for i := range slices {
		var obj, frame bytes.Buffer
		if err := enc.Encode(&slices[i], &obj); err != nil {
			b.Fatal(err)
		}
		ev := &meta.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: obj.Bytes()}}
		if err := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&frame), info.StreamSerializer.Serializer).Encode(ev); err != nil {
			b.Fatal(err)
		}
		plain.Write(frame.Bytes())
		zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestSpeed)
		zw.Write(frame.Bytes())
		zw.Flush()
		zw.Close()
	}
	b.Logf("%d events: %d bytes, %d gzipped", events, plain.Len(), zipped.Len())
	buf := make([]byte, 32<<10)
	for _, tc := range []struct {
		name string
		src  []byte
		body func(io.Reader) io.Reader
	}{
		{"uncompressed", plain.Bytes(), func(r io.Reader) io.Reader { return r }},
		{"compress-gzip", zipped.Bytes(), func(r io.Reader) io.Reader {
			zr, err := gzip.NewReader(r)
			if err != nil {
				b.Fatal(err)
			}
			return zr
		}},
		{"klauspost", zipped.Bytes(), func(r io.Reader) io.Reader { return &gzipBody{body: io.NopCloser(r)} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				// Small reads, as the watch decoder's: a frame's length, then its bytes.
				r := tc.body(onlyReader{bytes.NewReader(tc.src)})
				for {
					if _, err := r.Read(buf[:1500]); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}

// onlyReader hides every method but Read, as an HTTP/2 response body has no ReadByte.
type onlyReader struct{ io.Reader }
