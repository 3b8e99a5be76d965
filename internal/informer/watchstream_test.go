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

// TestListsThenWatchesFromTheListsVersion: the informer lists (never a streamed list: plainLists),
// from the watch cache (resourceVersion 0) and gzip-compressed, reads the list as it streams in,
// and watches on from the list's version: the first change after the list arrives through the
// watch, with nothing listed again.
func TestListsThenWatchesFromTheListsVersion(t *testing.T) {
	slices := k8stest.Slices(50)
	var mu sync.Mutex
	var asked []url.Values
	_, rc := k8stest.TLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		asked = append(asked, q)
		n := len(asked)
		mu.Unlock()
		gz := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
		switch {
		case n == 1 && q.Get("watch") != "true":
			if !gz {
				t.Errorf("the list asked %q, want gzip", r.Header.Get("Accept-Encoding"))
			}
			k8stest.WriteList(t, w, gz, "200", slices)
		case n == 2 && q.Get("watch") == "true":
			events := k8stest.NewEventWriter(t, w, false)
			changed := slices[0].DeepCopy()
			changed.ResourceVersion = "201"
			changed.Endpoints[0].Addresses = []string{"10.9.9.9"}
			events.Send(watch.Modified, changed)
			<-r.Context().Done()
		default:
			t.Errorf("request %d: %v, want a list, then a watch from its version", n, q)
			http.Error(w, "unexpected", http.StatusInternalServerError)
		}
	})
	inf, updated := watchSlices(t, rc)

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
		t.Fatalf("%d requests, want the list and the watch after it", len(asked))
	}
	if list := asked[0]; list.Get("resourceVersion") != "0" || list.Has("sendInitialEvents") {
		t.Errorf("the list asked %v, want resourceVersion 0 (the watch cache) and no initial events", list)
	}
	if after := asked[1]; after.Get("resourceVersion") != "200" || after.Has("sendInitialEvents") {
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
	inf := New(metrics.New("dns://:53", "cluster.local."), "endpointslices", &object.StoredSlice{},
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
		if n == 1 { // the list
			k8stest.WriteList(t, w, false, version(0), slices)
			return
		}
		events := k8stest.NewEventWriter(t, w, false)
		switch {
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
	}{{2, "0"}, {2, version(0)}, {1, version(busyEvents)}, {2, version(busyEvents + 1)}}
	if len(asked) != len(want) {
		t.Fatalf("%d requests, want %d: the list, the watch after it, the busy watch over HTTP/1.1, the watch after its silence, which stays", len(asked), len(want))
	}
	for i, w := range want {
		got := asked[i]
		if i == 0 {
			if got.proto != w.proto || got.query.Get("watch") == "true" {
				t.Errorf("request 1: HTTP/%d %v, want a list over HTTP/%d", got.proto, got.query, w.proto)
			}
			continue
		}
		if got.proto != w.proto || got.query.Get("watch") != "true" || got.query.Get("resourceVersion") != w.from {
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
