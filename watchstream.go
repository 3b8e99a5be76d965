package kubetree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
)

// A watch through a slim REST client (EndpointSlices, pods) is read by one goroutine of ours,
// which decodes each event and hands it to the informer's store itself: an event costs one
// goroutine wake-up after the HTTP/2 connection's own, where client-go's watch decodes in one
// goroutine and the reflector stores in another. The reflector still runs the watch: it opens
// it, is sent what it needs (a streamed list's events until the bookmark that ends them, errors,
// bookmarks, and every second the version the store has reached, as a bookmark), relists on 410
// Gone, and watches again when it ends. A streamed list's watch ends at the list's end: the
// events after it come through a watch of their own, from the list's version.

// resourceVersionEvery is how often the reflector is told the version the store has reached: a
// watch that breaks off is watched again from there, and the events of that last second at most
// are handed to the store again (the same objects, which change nothing DNS shows).
const resourceVersionEvery = time.Second

// streamWatch is one watch request whose events a goroutine of its own reads and applies.
type streamWatch struct {
	ser      *slimSerializers
	streamed bool // a streamed list (sendInitialEvents): the events up to its end go to the reflector

	body   io.ReadCloser
	cancel context.CancelFunc
	result chan watch.Event
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	// stored is closed once the store holds the streamed list; ended ends its collection (relist.go).
	stored chan struct{}
	ended  func()
}

// streamWatchOf makes the watch of resource through c with o; newInformer starts it with its
// store.
func streamWatchOf(ctx context.Context, c rest.Interface, ser *slimSerializers, resource string, o meta.ListOptions) (*streamWatch, error) {
	o.Watch = true
	ctx, cancel := context.WithCancel(ctx)
	body, err := c.Get().Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Stream(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &streamWatch{ser: ser, body: body, cancel: cancel, streamed: o.SendInitialEvents != nil && *o.SendInitialEvents,
		result: make(chan watch.Event), stop: make(chan struct{}), done: make(chan struct{}), stored: make(chan struct{})}, nil
}

// start reads the stream into store until it ends or Stop is called.
func (s *streamWatch) start(store *handingStore) {
	if s.streamed {
		relistStarted()
		s.ended = sync.OnceFunc(func() { relistEnded(); close(s.stored) })
		store.listEnded.Store(&s.ended)
	}
	go s.read(store)
}

func (s *streamWatch) read(store *handingStore) {
	defer close(s.done)
	defer close(s.result)
	defer s.body.Close()
	proto := s.ser.proto
	dec := restwatch.NewDecoder(streaming.NewDecoder(proto.StreamSerializer.Framer.NewFrameReader(s.body), proto.StreamSerializer.Serializer), proto.Serializer)
	defer dec.Close()
	initial := s.streamed
	var last watch.Event // the last event applied, not yet told to the reflector
	told := time.Now()
	tell := func() bool {
		if last.Object == nil {
			return true
		}
		ok := s.send(watch.Event{Type: watch.Bookmark, Object: last.Object})
		last, told = watch.Event{}, time.Now()
		return ok
	}
	for {
		typ, obj, err := dec.Decode()
		if err != nil {
			if !tell() {
				return
			}
			if err != io.EOF && err != io.ErrUnexpectedEOF && !utilnet.IsProbableEOF(err) && !utilnet.IsTimeout(err) && !errors.Is(err, context.Canceled) {
				s.send(watch.Event{Type: watch.Error, Object: apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding").
					AsObject(fmt.Errorf("unable to decode an event from the watch stream: %w", err))})
			}
			return
		}
		switch {
		case initial || typ == watch.Error || typ == watch.Bookmark:
			// The reflector's own: a streamed list it builds in a store of its own, errors it
			// acts on, versions it watches from.
			if typ == watch.Bookmark {
				last = watch.Event{}
			} else if !tell() {
				return
			}
			if !s.send(watch.Event{Type: typ, Object: obj}) {
				return
			}
			if initial && typ == watch.Bookmark && listEnd(obj) {
				// The reflector hands the list to the store now: the events after it wait.
				select {
				case <-s.stored:
				case <-s.stop:
					return
				}
				// The API server compresses a streamed list's watch to its end (5 to 10 minutes),
				// each event after the list in a gzip member of its own, and a watch from a version
				// never (gzip.go): end this one, and the reflector watches on from the list's
				// version, plain, with nothing missed. The bookmark again is an event of this watch
				// to the reflector, which would take a watch that ends within a second without one
				// for a failure, and list again.
				s.send(watch.Event{Type: watch.Bookmark, Object: obj})
				return
			}
			continue
		case typ == watch.Deleted:
			err = store.Delete(obj)
		default:
			err = store.Update(obj) // an add of a known key is an update, as the reflector's
		}
		if err != nil {
			log.Warningf("%s: %v", store.name, err)
		}
		last = watch.Event{Type: typ, Object: obj}
		if time.Since(told) >= resourceVersionEvery && !tell() {
			return
		}
	}
}

// send hands ev to the reflector, unless the watch is stopped first.
func (s *streamWatch) send(ev watch.Event) bool {
	select {
	case s.result <- ev:
		return true
	case <-s.stop:
		return false
	}
}

// ResultChan implements watch.Interface.
func (s *streamWatch) ResultChan() <-chan watch.Event { return s.result }

// Stop implements watch.Interface: the request ends, and Stop returns once the reading goroutine
// has, so that nothing it read reaches the store after the reflector has moved on (to a relist).
func (s *streamWatch) Stop() {
	s.once.Do(func() {
		close(s.stop)
		s.cancel()
		if s.ended != nil {
			s.ended()
		}
	})
	<-s.done
}

// listEnd reports whether a bookmark ends the initial events of a streamed list.
func listEnd(obj any) bool {
	m, err := apimeta.Accessor(obj)
	return err == nil && m.GetAnnotations()[meta.InitialEventsAnnotationKey] == "true"
}
