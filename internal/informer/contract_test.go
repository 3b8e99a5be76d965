package informer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/metrics"

	api "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// The contract: where Informer says it behaves as client-go's shared informer does, the same API
// server hands its handlers the same events, in the same order, as it hands a SharedIndexInformer's.
// Each informer has a scripted API server of its own, and every step of the script is played to
// both: the first list, changes through the watch, a watch that fails with 410 Gone and the relist
// after it (with what changed while no watch was open), and the watch after the relist.
//
// Resync is not part of the contract: Informer has no resync period (kubetree acts on changes
// only; a periodic resync would hand every object over again for nothing, and what a watch
// missed is the audit's to find), so client-go's runs without one too, and the last step shows
// that a resync asked of Informer's store hands nothing over.

// TestInformerAsClientGo plays each step to both informers and checks that both handed over the
// events the step wants, in order.
func TestInformerAsClientGo(t *testing.T) {
	ours, theirs := newScript(), newScript()
	oursSeen, theirsSeen := runOurs(t, ours), runClientGo(t, theirs)
	gone := apierrors.NewResourceExpired("too old resource version")
	for _, step := range []struct {
		name string
		play func(*script)
		want []string
	}{
		{"the first list: adds, in the list's order, as the initial list's", func(s *script) {
			s.answerList("2", service("a", "1"), service("b", "2"))
		}, []string{"add prod/a@1 initial", "add prod/b@2 initial"}},
		{"the watch: adds, updates and deletes in order; an add of a known key is an update", func(s *script) {
			s.send(watch.Added, service("c", "3"))
			s.send(watch.Modified, service("a", "4"))
			s.send(watch.Deleted, service("b", "5"))
			s.send(watch.Added, service("a", "6"))
		}, []string{"add prod/c@3", "update prod/a@1 to prod/a@4", "delete prod/b@5", "update prod/a@4 to prod/a@6"}},
		{"410 Gone and the relist: what went while no watch was open is a tombstone, before the list's updates and adds", func(s *script) {
			s.answerList("8", service("a", "6"), service("d", "8")) // c went, d came
			s.send(watch.Error, &gone.ErrStatus)
		}, []string{"delete tombstone prod/c of prod/c@3", "update prod/a@6 to prod/a@6", "add prod/d@8"}},
		{"the watch after the relist", func(s *script) {
			s.send(watch.Modified, service("d", "9"))
			s.send(watch.Deleted, service("a", "10"))
		}, []string{"update prod/d@8 to prod/d@9", "delete prod/a@10"}},
	} {
		markOurs, markTheirs := len(oursSeen.all()), len(theirsSeen.all())
		step.play(ours)
		step.play(theirs)
		got := oursSeen.after(t, markOurs, len(step.want))
		want := theirsSeen.after(t, markTheirs, len(step.want))
		if !slices.Equal(want, step.want) {
			t.Fatalf("%s: client-go's informer handed over %q, the step wants %q", step.name, want, step.want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Informer handed over %q, client-go's %q", step.name, got, want)
		}
	}

	t.Run("resync is not claimed", func(t *testing.T) {
		before := len(oursSeen.all())
		if err := oursSeen.informer.ReflectorStore().Resync(); err != nil {
			t.Fatal(err)
		}
		if got := oursSeen.all()[before:]; len(got) != 0 {
			t.Errorf("a resync handed over %q, want nothing", got)
		}
	})
}

// script is one informer's API server: the lists it answers, the last again when asked once more,
// and the watches the informer opens, which the steps send events through.
type script struct {
	mu      sync.Mutex
	lists   []*api.ServiceList
	asked   int
	watches chan *watch.FakeWatcher
	current *watch.FakeWatcher // the watch events go to; nil until the next is opened
}

func newScript() *script { return &script{watches: make(chan *watch.FakeWatcher, 4)} }

// answerList makes the next list the API server answers hold objs at version rv.
func (s *script) answerList(rv string, objs ...*api.Service) {
	l := &api.ServiceList{ListMeta: meta.ListMeta{ResourceVersion: rv}}
	for _, o := range objs {
		l.Items = append(l.Items, *o)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, l)
}

// list answers a list: the next one the script holds, or while it holds none yet, an error the
// informer retries after.
func (s *script) list(context.Context, meta.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asked >= len(s.lists) {
		return nil, apierrors.NewServiceUnavailable("no list yet")
	}
	s.asked++
	return s.lists[s.asked-1].DeepCopy(), nil
}

// watch opens a watch the steps send events through.
func (s *script) watch(context.Context, meta.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	s.watches <- w
	return w, nil
}

// send sends an event through the open watch, waiting for the informer to open one if none is; an
// error ends the watch, as the API server's does.
func (s *script) send(typ watch.EventType, obj runtime.Object) {
	if s.current == nil {
		select {
		case s.current = <-s.watches:
		case <-time.After(10 * time.Second):
			panic("the informer opened no watch")
		}
	}
	s.current.Action(typ, obj)
	if typ == watch.Error {
		s.current = nil
	}
}

// seen records what an informer's handlers were handed, one line per event.
type seen struct {
	mu       sync.Mutex
	events   []string
	informer *Informer // ours; nil for client-go's
}

func (r *seen) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *seen) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// after waits for n events after the first mark, and returns every event after mark.
func (r *seen) after(t *testing.T, mark, n int) []string {
	t.Helper()
	k8stest.WaitFor(t, fmt.Sprintf("%d events", n), func() bool { return len(r.all()) >= mark+n })
	return r.all()[mark:]
}

// handlers record each event with the versions of its objects, and an add with whether it came
// with the initial list.
func (r *seen) handlers() cache.ResourceEventHandlerDetailedFuncs {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial {
				r.add("add %s initial", id(obj))
			} else {
				r.add("add %s", id(obj))
			}
		},
		UpdateFunc: func(old, new any) { r.add("update %s to %s", id(old), id(new)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				r.add("delete tombstone %s of %s", t.Key, id(t.Obj))
				return
			}
			r.add("delete %s", id(obj))
		},
	}
}

// runOurs runs an Informer of s's services until the test ends.
func runOurs(t *testing.T, s *script) *seen {
	inf := New(metrics.New("test://contract", "cluster.local."), "services", &api.Service{},
		func(obj any) (any, error) { return obj, nil }, "", s.list, s.watch)
	r := &seen{informer: inf}
	inf.AddEventHandler(r.handlers())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.Run(ctx)
	return r
}

// runClientGo runs client-go's shared informer of s's services, without a resync period, until
// the test ends; it lists, then watches, as ours does (plainLists).
func runClientGo(t *testing.T, s *script) *seen {
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{ListWithContextFunc: s.list, WatchFuncWithContext: s.watch}, plainLists{})
	inf := cache.NewSharedIndexInformer(lw, &api.Service{}, 0, cache.Indexers{})
	r := &seen{}
	if _, err := inf.AddEventHandler(r.handlers()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	return r
}

func service(name, version string) *api.Service {
	return &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: name, ResourceVersion: version}}
}

// id is an object's key and version.
func id(obj any) string {
	m, err := apimeta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return m.GetNamespace() + "/" + m.GetName() + "@" + m.GetResourceVersion()
}
