package k8stest

import (
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TLSServer is an HTTP/2 server with TLS that wants a bearer token, and a rest.Config for it; t's
// cleanup closes it.
func TLSServer(t testing.TB, handler http.HandlerFunc) (*httptest.Server, *rest.Config) {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		handler(w, r)
	}))
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return s, &rest.Config{Host: s.URL, BearerToken: "secret-token", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// Slices are n EndpointSlices of ten endpoints each, in namespace ns, of services svc-0 to svc-<n-1>.
func Slices(n int) []discovery.EndpointSlice {
	var out []discovery.EndpointSlice
	for i := range n {
		var eps []Endpoint
		for j := range 10 {
			eps = append(eps, Endpoint{Addrs: []string{fmt.Sprintf("10.1.%d.%d", i, j)}, Hostname: fmt.Sprintf("host-%d", j)})
		}
		s := Slice("ns", fmt.Sprintf("svc-%d", i), fmt.Sprintf("svc-%d-abc", i), discovery.AddressTypeIPv4,
			SlicePorts(SlicePort("http", "TCP", 80)), eps...)
		s.ResourceVersion = fmt.Sprint(100 + i)
		out = append(out, *s)
	}
	return out
}

// ProtobufInfo is client-go's protobuf serializer, which the API server's matches.
func ProtobufInfo(t testing.TB) runtime.SerializerInfo {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	return info
}

// EventWriter writes protobuf watch events of EndpointSlices, each flushed alone, and when
// compressed in a gzip member of its own, flushed before the member ends, as kube-apiserver does
// (perFlushGzipWriter).
type EventWriter struct {
	t    testing.TB
	w    http.ResponseWriter
	gzip bool
	info runtime.SerializerInfo
}

// NewEventWriter starts a watch response on w, gzipped when gz.
func NewEventWriter(t testing.TB, w http.ResponseWriter, gz bool) *EventWriter {
	info := ProtobufInfo(t)
	w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	return &EventWriter{t: t, w: w, gzip: gz, info: info}
}

// Send writes one event and flushes it.
func (e *EventWriter) Send(typ watch.EventType, obj runtime.Object) {
	raw, ok := encodeProtobuf(e.t, obj)
	if !ok {
		return
	}
	var out io.Writer = e.w
	var zw *gzip.Writer
	if e.gzip {
		zw, _ = gzip.NewWriterLevel(e.w, gzip.BestSpeed)
		out = zw
	}
	ev := &meta.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw.Bytes()}}
	if err := streaming.NewEncoder(e.info.StreamSerializer.Framer.NewFrameWriter(out), e.info.StreamSerializer.Serializer).Encode(ev); err != nil {
		e.t.Error(err)
		return
	}
	if zw != nil { // the event's data in a block of its own, then the member's end
		zw.Flush()
		zw.Close()
	}
	e.w.(http.Flusher).Flush()
}

// WriteList writes a protobuf list of EndpointSlices at resourceVersion as the API server answers
// a list, gzipped when gz, in pieces of 512 bytes each flushed alone, as a long list arrives.
func WriteList(t testing.TB, w http.ResponseWriter, gz bool, resourceVersion string, items []discovery.EndpointSlice) {
	raw, ok := encodeProtobuf(t, &discovery.EndpointSliceList{ListMeta: meta.ListMeta{ResourceVersion: resourceVersion}, Items: items})
	if !ok {
		return
	}
	w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
	var out io.Writer = w
	var zw *gzip.Writer
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
		zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
		out = zw
	}
	w.WriteHeader(http.StatusOK)
	for b := raw.Bytes(); len(b) > 0; {
		n := min(len(b), 512)
		if _, err := out.Write(b[:n]); err != nil {
			return
		}
		if zw != nil {
			zw.Flush()
		}
		w.(http.Flusher).Flush()
		b = b[n:]
	}
	if zw != nil {
		zw.Close()
	}
}

// encodeProtobuf is obj (of discovery/v1, or a Status) in protobuf, as the API server encodes it.
func encodeProtobuf(t testing.TB, obj runtime.Object) (*bytes.Buffer, bool) {
	var raw bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(ProtobufInfo(t).Serializer, discovery.SchemeGroupVersion).Encode(obj, &raw); err != nil {
		t.Error(err)
		return nil, false
	}
	return &raw, true
}
