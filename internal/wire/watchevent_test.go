package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/kubetree/kubetree/internal/object"
	api "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

// protobufInfo is client-go's protobuf serializer, as the API server's.
func protobufInfo() runtime.SerializerInfo {
	for _, i := range scheme.Codecs.SupportedMediaTypes() {
		if i.MediaType == runtime.ContentTypeProtobuf {
			return i
		}
	}
	panic("no protobuf serializer in client-go's scheme")
}

// watchStream encodes events as the API server writes a protobuf watch: each object in its
// envelope, in a WatchEvent, framed by its length.
func watchStream(t testing.TB, events ...watch.Event) []byte {
	t.Helper()
	info := protobufInfo()
	var out bytes.Buffer
	enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&out), info.StreamSerializer.Serializer)
	for _, ev := range events {
		raw := asAPIServer(t, ev.Object)
		if err := enc.Encode(&meta.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// podWatchEvents are a pod watch's events of every type: the largest pod first, so that every
// later frame is read over it, the same pod again with another address, a bookmark, and a 410.
func podWatchEvents() []watch.Event {
	pods := codecPods()
	moved := pods[0].DeepCopy()
	moved.Status.PodIPs = []api.PodIP{{IP: "10.244.9.9"}}
	gone := apierrors.NewResourceExpired("too old resource version")
	events := []watch.Event{{Type: watch.Added, Object: pods[0]}}
	for _, p := range pods[1:] {
		events = append(events, watch.Event{Type: watch.Added, Object: p})
	}
	return append(events,
		watch.Event{Type: watch.Modified, Object: moved},
		watch.Event{Type: watch.Deleted, Object: pods[1]},
		watch.Event{Type: watch.Bookmark, Object: &api.Pod{ObjectMeta: meta.ObjectMeta{ResourceVersion: "5000"}}},
		watch.Event{Type: watch.Error, Object: &gone.ErrStatus})
}

// eventsUntilError reads events until next fails, and returns them with that error.
func eventsUntilError(next func() (watch.EventType, runtime.Object, error)) ([]watch.Event, error) {
	var out []watch.Event
	for {
		typ, obj, err := next()
		if err != nil {
			return out, err
		}
		out = append(out, watch.Event{Type: typ, Object: obj})
	}
}

// TestWatchEventsAsClientGo: a watch stream read by WatchEvents gives the events client-go's
// watch decoder gives, with the same codec; and each object stays as decoded after later events
// are read into the same buffer (the codecs keep nothing of it). The stream arrives a byte at a
// time, as a slow connection delivers it.
func TestWatchEventsAsClientGo(t *testing.T) {
	stream := watchStream(t, podWatchEvents()...)
	x := object.NewPodStore(false)
	codec := NewPodCodec(x, scheme.Codecs.UniversalDeserializer())

	got, err := eventsUntilError(NewWatchEvents(iotest.OneByteReader(bytes.NewReader(stream)), codec).Next)
	if err != io.EOF {
		t.Fatalf("at the stream's end: %v, want io.EOF", err)
	}
	info := protobufInfo()
	clientGo := restwatch.NewDecoder(streaming.NewDecoder(info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))),
		info.StreamSerializer.Serializer), codec)
	want, err := eventsUntilError(clientGo.Decode)
	if err != io.EOF {
		t.Fatalf("client-go's decoder at the stream's end: %v", err)
	}
	if len(want) != len(podWatchEvents()) {
		t.Fatalf("client-go's decoder read %d events, want %d", len(want), len(podWatchEvents()))
	}
	if !reflect.DeepEqual(got, want) {
		for i := range max(len(got), len(want)) {
			if i >= len(got) || i >= len(want) || !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("event %d: %+v, client-go's decoder %+v", i, got[min(i, len(got)-1)], want[min(i, len(want)-1)])
			}
		}
	}
	if s, ok := got[len(got)-1].Object.(*meta.Status); !ok || !apierrors.IsResourceExpired(apierrors.FromObject(s)) {
		t.Errorf("the watch error: %#v, want a 410 Gone Status", got[len(got)-1].Object)
	}
}

// TestWatchEventsBrokenStreams: a stream that ends between events ends with io.EOF; one cut
// inside an event, with io.ErrUnexpectedEOF (the watch broke, not ended); an event that is not
// one, with an error; none of them panics.
func TestWatchEventsBrokenStreams(t *testing.T) {
	codec := NewPodCodec(object.NewPodStore(false), scheme.Codecs.UniversalDeserializer())
	first := watchStream(t, podWatchEvents()[0])
	stream := watchStream(t, podWatchEvents()[:2]...)
	for cut := len(first) + 1; cut < len(stream); cut++ {
		got, err := eventsUntilError(NewWatchEvents(bytes.NewReader(stream[:cut]), codec).Next)
		if len(got) != 1 || err != io.ErrUnexpectedEOF {
			t.Fatalf("cut %d bytes into the second event: %d events, %v; want 1 and io.ErrUnexpectedEOF", cut-len(first), len(got), err)
		}
	}
	if got, err := eventsUntilError(NewWatchEvents(bytes.NewReader(first), codec).Next); len(got) != 1 || err != io.EOF {
		t.Errorf("one whole event: %d events, %v; want 1 and io.EOF", len(got), err)
	}

	bad := map[string]watch.Event{
		"an unknown type": {Type: "RENAMED", Object: codecPods()[0]},
		"no type":         {Type: "", Object: codecPods()[0]},
	}
	for name, ev := range bad {
		if _, _, err := NewWatchEvents(bytes.NewReader(watchStream(t, ev)), codec).Next(); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff}
	if _, _, err := NewWatchEvents(bytes.NewReader(huge), codec).Next(); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a frame of 4 GiB announced: %v, want it refused before it is read", err)
	}
}

// FuzzWatchEvents: whatever bytes arrive, reading them as a watch stream returns events and then
// an error, and never panics.
func FuzzWatchEvents(f *testing.F) {
	f.Add(watchStream(f, podWatchEvents()...))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{})
	codec := NewPodCodec(object.NewPodStore(false), scheme.Codecs.UniversalDeserializer())
	f.Fuzz(func(t *testing.T, data []byte) {
		events := NewWatchEvents(bytes.NewReader(data), codec)
		for range len(data) + 1 {
			if _, _, err := events.Next(); err != nil {
				return
			}
		}
		t.Fatalf("more events than bytes")
	})
}

// BenchmarkWatchEvents reads pod changes from a watch stream as client-go's watch decoder does,
// and as WatchEvents does; both with the slim pod codec.
func BenchmarkWatchEvents(b *testing.B) {
	pod := codecPods()[0]
	var events []watch.Event
	for range 1000 {
		events = append(events, watch.Event{Type: watch.Modified, Object: pod})
	}
	stream := watchStream(b, events...)
	codec := NewPodCodec(object.NewPodStore(false), scheme.Codecs.UniversalDeserializer())
	info := protobufInfo()
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dec := restwatch.NewDecoder(streaming.NewDecoder(info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))),
				info.StreamSerializer.Serializer), codec)
			eventsUntilError(dec.Decode)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
	})
	b.Run("WatchEvents", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			eventsUntilError(NewWatchEvents(bytes.NewReader(stream), codec).Next)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
	})
}
