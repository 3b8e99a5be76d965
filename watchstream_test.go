package kubetree

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	discovery "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kubetree/kubetree/internal/object"
)

// TestStreamedListWatchEndsAtItsEnd: the API server compresses a streamed list's watch, and with it
// every later event, until the watch times out. The watch of a streamed list ends once the list is
// stored, and the reflector watches on from the list's version, in a watch the API server does
// not compress: no relist, and the first change after the list arrives through the plain watch.
func TestStreamedListWatchEndsAtItsEnd(t *testing.T) {
	slices := testSlices(3)
	listEnded := make(chan struct{})
	var mu sync.Mutex
	var asked []url.Values
	_, rc := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		asked = append(asked, q)
		n := len(asked)
		mu.Unlock()
		events := newEventWriter(t, w, strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"))
		switch {
		case n == 1 && q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			for i := range slices {
				slices[i].ResourceVersion = "10" + string(rune('0'+i))
				events.send(watch.Added, &slices[i])
			}
			events.send(watch.Bookmark, &discovery.EndpointSlice{ObjectMeta: meta.ObjectMeta{ResourceVersion: "200",
				Annotations: map[string]string{meta.InitialEventsAnnotationKey: "true"}}})
			<-r.Context().Done()
			close(listEnded)
		case n == 2 && q.Get("watch") == "true":
			changed := slices[0].DeepCopy()
			changed.ResourceVersion = "201"
			changed.Endpoints[0].Addresses = []string{"10.9.9.9"}
			events.send(watch.Modified, changed)
			<-r.Context().Done()
		default:
			t.Errorf("request %d: %v, want a streamed list's watch, then a watch from its version", n, q)
			http.Error(w, "unexpected", http.StatusInternalServerError)
		}
	})
	cfg, err := withDeadConnectionDetection(rc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sliceREST(cfg, object.SliceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, watchFn := slimListWatch(c, "endpointslices")
	inf := newInformer(c, newServerMetrics("dns://:53", "cluster.local."), "endpointslices", &object.StoredSlice{},
		object.SliceTransform(object.SliceOptions{}), "",
		func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) { return list(ctx, "", o) }, watchFn)
	updated := make(chan string, 10)
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		if m, err := apimeta.Accessor(obj); err == nil {
			updated <- m.GetResourceVersion()
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.run(ctx)

	waitFor(t, "the list's watch to end", func() bool {
		select {
		case <-listEnded:
			return true
		default:
			return false
		}
	})
	waitFor(t, "the change after the list", func() bool {
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
