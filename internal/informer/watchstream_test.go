package informer

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubetree/kubetree/internal/apiclient"
	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/wire"
)

// TestStreamedListWatchEndsAtItsEnd: the API server compresses a streamed list's watch, and with it
// every later event, until the watch times out. The watch of a streamed list ends once the list is
// stored, and the reflector watches on from the list's version, in a watch the API server does
// not compress: no relist, and the first change after the list arrives through the plain watch.
func TestStreamedListWatchEndsAtItsEnd(t *testing.T) {
	slices := k8stest.Slices(3)
	listEnded := make(chan struct{})
	var mu sync.Mutex
	var asked []url.Values
	_, rc := k8stest.TLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		asked = append(asked, q)
		n := len(asked)
		mu.Unlock()
		events := k8stest.NewEventWriter(t, w, strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"))
		switch {
		case n == 1 && q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			for i := range slices {
				slices[i].ResourceVersion = "10" + string(rune('0'+i))
				events.Send(watch.Added, &slices[i])
			}
			events.Send(watch.Bookmark, &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{ResourceVersion: "200",
				Annotations: map[string]string{meta.InitialEventsAnnotationKey: "true"}}})
			<-r.Context().Done()
			close(listEnded)
		case n == 2 && q.Get("watch") == "true":
			changed := slices[0].DeepCopy()
			changed.ResourceVersion = "201"
			changed.Endpoints[0].Addresses = []string{"10.9.9.9"}
			events.Send(watch.Modified, changed)
			<-r.Context().Done()
		default:
			t.Errorf("request %d: %v, want a streamed list's watch, then a watch from its version", n, q)
			http.Error(w, "unexpected", http.StatusInternalServerError)
		}
	})
	inf, updated := watchSlices(t, rc)

	k8stest.WaitFor(t, "the list's watch to end", func() bool {
		select {
		case <-listEnded:
			return true
		default:
			return false
		}
	})
	k8stest.WaitFor(t, "the change after the list", func() bool {
		select {
		case rv := <-updated:
			return rv == "201"
		default:
			return false
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("%d requests, want the streamed list's watch and the watch after it", len(asked))
	}
	after := asked[1]
	if after.Get("resourceVersion") != "200" || after.Has("sendInitialEvents") {
		t.Errorf("the watch after the list asked %v, want resourceVersion 200 and no initial events", after)
	}
	if got := len(inf.GetStore().List()); got != len(slices) {
		t.Errorf("the store holds %d slices, want %d", got, len(slices))
	}
}

// watchSlices runs an informer of EndpointSlices through kubetree's transport to rc's server, until
// the test ends, and reports the resource version of every update it takes.
func watchSlices(t *testing.T, rc *rest.Config) (*Informer, <-chan string) {
	t.Helper()
	cfg, err := apiclient.WithDeadConnectionDetection(rc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := SlimREST(cfg, "/apis", discovery.SchemeGroupVersion, func(fallback runtime.Decoder) runtime.Serializer {
		return wire.NewSliceCodec(object.SliceOptions{}, fallback)
	})
	if err != nil {
		t.Fatal(err)
	}
	list, watchFn := SlimListWatch(c, "endpointslices")
	inf := New(c, metrics.New("dns://:53", "cluster.local."), "endpointslices", &object.StoredSlice{},
		object.SliceTransform(object.SliceOptions{}), "",
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) { return list(ctx, "", o) }, watchFn)
	updated := make(chan string, 4*busyEvents)
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		if m, err := apimeta.Accessor(obj); err == nil {
			updated <- m.GetResourceVersion()
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.Run(ctx)
	return inf, updated
}

// TestBusyWatchOverHTTP1: a watch that carries busyEvents within busyWindow is watched again, from
// the version it reached, over HTTP/1.1; when nothing comes over that for http1Silence (a frozen
// connection looks the same), it is closed, and the resource is watched again over HTTP/2, where
// the PING watches the connection, and stays there however busy, as it moved to HTTP/1.1 within
// http1Rest. Nothing is missed and nothing is listed again.
func TestBusyWatchOverHTTP1(t *testing.T) {
	slices := k8stest.Slices(1)
	version := func(n int) string { return strconv.Itoa(200 + n) }
	change := func(n int) *discovery.EndpointSlice {
		changed := slices[0].DeepCopy()
		changed.ResourceVersion = version(n)
		changed.Endpoints[0].Addresses = []string{fmt.Sprintf("10.9.%d.%d", n/250, n%250)}
		return changed
	}
	type request struct {
		proto  int
		query  url.Values
		closed bool // the client closed it (not the server)
	}
	var mu sync.Mutex
	var asked []*request
	_, rc := k8stest.TLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		req := &request{proto: r.ProtoMajor, query: q}
		asked = append(asked, req)
		n := len(asked)
		mu.Unlock()
		defer func() {
			mu.Lock()
			req.closed = true
			mu.Unlock()
		}()
		events := k8stest.NewEventWriter(t, w, false)
		switch {
		case n == 1 && q.Get("sendInitialEvents") == "true":
			slices[0].ResourceVersion = version(0)
			events.Send(watch.Added, &slices[0])
			events.Send(watch.Bookmark, &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{ResourceVersion: version(0),
				Annotations: map[string]string{meta.InitialEventsAnnotationKey: "true"}}})
		case n == 2: // the watch after the list: busy
			for i := 1; i <= busyEvents; i++ {
				events.Send(watch.Modified, change(i))
			}
		case n == 3: // over HTTP/1.1: one change, then nothing, as a frozen connection
			events.Send(watch.Modified, change(busyEvents+1))
		case n == 4: // over HTTP/2 again, busy, and it stays
			for i := busyEvents + 2; i <= 2*busyEvents+2; i++ {
				events.Send(watch.Modified, change(i))
			}
		default:
			t.Errorf("request %d: %v, want no more", n, q)
		}
		<-r.Context().Done()
	})
	_, updated := watchSlices(t, rc)
	last := version(2*busyEvents + 2) // after more than busyEvents on the fourth watch
	k8stest.WaitFor(t, "the change after the HTTP/1.1 watch", func() bool {
		for {
			select {
			case rv := <-updated:
				if rv == last {
					return true
				}
			default:
				return false
			}
		}
	})
	k8stest.WaitFor(t, "the silent HTTP/1.1 watch's connection to close", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(asked) > 2 && asked[2].closed
	})

	mu.Lock()
	defer mu.Unlock()
	want := []struct {
		proto int
		from  string
	}{{2, ""}, {2, version(0)}, {1, version(busyEvents)}, {2, version(busyEvents + 1)}}
	if len(asked) != len(want) {
		t.Fatalf("%d requests, want %d: the streamed list, the watch after it, the busy watch over HTTP/1.1, the watch after its silence, which stays", len(asked), len(want))
	}
	for i, w := range want {
		got := asked[i]
		if got.proto != w.proto || got.query.Get("watch") != "true" || (i > 0 && (got.query.Get("resourceVersion") != w.from || got.query.Has("sendInitialEvents"))) {
			t.Errorf("request %d: HTTP/%d %v, want a watch over HTTP/%d from version %q", i+1, got.proto, got.query, w.proto, w.from)
		}
	}
}

// TestWatchMovesToHTTP1OncePerRest: a resource's watch moves to HTTP/1.1 at most once per
// http1Rest (each move may cost the API server a TLS handshake), counted from the move: leaving
// HTTP/1.1 early, for a silence or a failed request, does not shorten the rest, and leaving it
// late does not lengthen it.
func TestWatchMovesToHTTP1OncePerRest(t *testing.T) {
	var route watchRoute
	start := time.Now()
	if !route.mayMove(start) {
		t.Fatal("a resource that never moved may not move")
	}
	route.move(start)
	if !route.busy.Load() {
		t.Fatal("after a move the next watch is not over HTTP/1.1")
	}
	route.leave() // silent at once
	if route.busy.Load() {
		t.Fatal("after leaving the next watch is still over HTTP/1.1")
	}
	if route.mayMove(start.Add(http1Rest - time.Second)) {
		t.Errorf("moved again %s after the last move, want %s at least", http1Rest-time.Second, http1Rest)
	}
	if !route.mayMove(start.Add(http1Rest)) {
		t.Errorf("may not move %s after the last move", http1Rest)
	}

	// Busy for ten minutes, then silent (pods created), then busy again (pods changed): it moves
	// at once.
	moved := start.Add(time.Hour)
	route.move(moved)
	route.leave()
	if !route.mayMove(moved.Add(10 * time.Minute)) {
		t.Errorf("a watch that left HTTP/1.1 ten minutes after its move may not move back at once")
	}
}
