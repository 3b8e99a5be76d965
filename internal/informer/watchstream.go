package informer

import (
	"github.com/kubetree/kubetree/internal/apiclient"

	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubetree/kubetree/internal/wire"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// A watch through a slim REST client (Services, EndpointSlices, pods) is read by one goroutine of ours,
// which decodes each event and hands it to the informer's store itself: an event costs one
// goroutine wake-up after the HTTP/2 connection's own, where client-go's watch decodes in one
// goroutine and the reflector stores in another. The reflector still runs the watch: it opens
// it, is sent what it needs (errors, bookmarks, and every second the version the store has
// reached, as a bookmark), relists on 410 Gone, and watches again when it ends.

// A busy watch is read over HTTP/1.1. Over HTTP/2 every event is handed from the connection's read
// loop to the goroutine that decodes it, a thread wake-up each, and the read loop writes window
// updates; over HTTP/1.1 that goroutine reads the connection itself, which took 15% off kubetree's
// CPU per slice update and a quarter off its CPU per pod change (bench/WRITEPATH.md). But HTTP/1.1 has no PING:
// an API server that stops answering while its connection stays up (internal/apiclient) would go unnoticed
// on it. So a watch goes over HTTP/1.1 only once it has carried busyEvents within busyWindow, and
// stays there only while events keep coming: after http1Silence with nothing read, the PING's own
// bound, the connection is closed, and the reflector watches again over HTTP/2 from the version
// reached. An idle or quiet watch stays on the shared HTTP/2 connection, which costs nothing more.
// Each move is one watch request from the version reached, served from the API server's watch
// cache, nothing missed; a move to HTTP/1.1 may add a TLS handshake. A resource's watch moves to
// HTTP/1.1 at most once per http1Rest, so that bursts with pauses between them cost the API server
// at most one handshake per http1Rest, per resource and replica. The rest counts from the move, not
// from the silence that ended it: a burst that follows a pause long after the last move (pods
// created, then changed) goes over HTTP/1.1 at once, at the same bound.
const (
	busyEvents   = 50
	busyWindow   = 5 * time.Second
	http1Silence = apiclient.ReadIdle + apiclient.PingTimeout
	http1Rest    = 30 * time.Second
)

// watchRoute is one resource's choice of connection for its next watch.
type watchRoute struct {
	busy    atomic.Bool  // its next watch goes over HTTP/1.1
	movedAt atomic.Int64 // when a watch last moved to HTTP/1.1 (UnixNano)
}

// mayMove reports whether a busy watch may move to HTTP/1.1 at now: not within http1Rest of the
// last move, whether that move's watch is still there, went silent or could not open.
func (r *watchRoute) mayMove(now time.Time) bool {
	return now.Sub(time.Unix(0, r.movedAt.Load())) >= http1Rest
}

// move sends the resource's next watch over HTTP/1.1.
func (r *watchRoute) move(now time.Time) {
	r.movedAt.Store(now.UnixNano())
	r.busy.Store(true)
}

// leave sends the resource's next watch over HTTP/2.
func (r *watchRoute) leave() { r.busy.Store(false) }

// resourceVersionEvery is how often the reflector is told the version the store has reached: a
// watch that breaks off is watched again from there, and the events of that last second at most
// are handed to the store again (the same objects, which change nothing DNS shows).
const resourceVersionEvery = time.Second

// streamWatch is one watch request whose events a goroutine of its own reads and applies.
type streamWatch struct {
	ser       *slimSerializers
	route     *watchRoute // the resource's; nil: HTTP/2 only
	http1     bool
	lastEvent atomic.Int64 // over HTTP/1.1: when the last event was read (UnixNano)
	silenced  atomic.Bool  // over HTTP/1.1: ended for reading nothing for http1Silence

	body   io.ReadCloser
	cancel context.CancelFunc
	result chan watch.Event
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// streamWatchOf makes the watch of resource through c with o, over the connection route says (nil:
// HTTP/2 only); New's watch starts it with its store.
func streamWatchOf(ctx context.Context, c *slimClient, resource string, o meta.ListOptions, route *watchRoute) (*streamWatch, error) {
	o.Watch = true
	if c.http1 == nil {
		route = nil
	}
	var rc rest.Interface = c
	http1 := route != nil && route.busy.Load()
	if http1 {
		rc = c.http1
	}
	ctx, cancel := context.WithCancel(ctx)
	body, err := rc.Get().Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Stream(ctx)
	var status apierrors.APIStatus
	if err != nil && http1 && ctx.Err() == nil && !errors.As(err, &status) {
		// No answer over a new connection: the shared HTTP/2 one may still do. (An answer, such as
		// 410 Gone, is the reflector's to act on.)
		route.leave()
		http1 = false
		body, err = c.Get().Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Stream(ctx)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &streamWatch{ser: c.ser, body: body, cancel: cancel, route: route, http1: http1,
		result: make(chan watch.Event), stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// start reads the stream into store until it ends or Stop is called.
func (s *streamWatch) start(store *handingStore) {
	if s.http1 {
		s.lastEvent.Store(time.Now().UnixNano())
		go s.endWhenSilent()
	}
	go s.read(store)
}

// endWhenSilent ends an HTTP/1.1 watch once it has read nothing for http1Silence: its connection may
// be dead, and the reflector watches again over HTTP/2, where the PING would notice.
func (s *streamWatch) endWhenSilent() {
	t := time.NewTimer(http1Silence)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if quiet := time.Since(time.Unix(0, s.lastEvent.Load())); quiet < http1Silence {
			t.Reset(http1Silence - quiet)
			continue
		}
		s.silenced.Store(true)
		s.route.leave()
		s.cancel()
		return
	}
}

func (s *streamWatch) read(store *handingStore) {
	defer close(s.done)
	defer close(s.result)
	defer s.body.Close()
	events := wire.NewWatchEvents(s.body, s.ser.proto.Serializer)
	r := &reading{s: s, told: time.Now()}
	r.since = r.told
	for {
		typ, obj, err := events.Next()
		now := time.Now()
		if s.http1 {
			s.lastEvent.Store(now.UnixNano())
		}
		switch {
		case err != nil:
			s.failed(r, store, err)
			return
		case typ == watch.Error || typ == watch.Bookmark:
			if !s.forward(r, typ, obj) {
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
		r.last = watch.Event{Type: typ, Object: obj}
		if r.movesToHTTP1(now) {
			log.Debugf("%s: %d events within %s: watching over HTTP/1.1", store.name, r.counted, busyWindow)
			return
		}
		if now.Sub(r.told) >= resourceVersionEvery && !r.tell() {
			return
		}
	}
}

// reading is what read keeps between events: the last event applied and not yet told to the
// reflector, when it last told one, and over HTTP/2 the events counted toward busyEvents since.
type reading struct {
	s       *streamWatch
	last    watch.Event
	told    time.Time
	counted int
	since   time.Time
}

// tell hands the reflector the version of the last event applied, as a bookmark; false when the
// watch was stopped first.
func (r *reading) tell() bool {
	if r.last.Object == nil {
		return true
	}
	ok := r.s.send(watch.Event{Type: watch.Bookmark, Object: r.last.Object})
	r.last, r.told = watch.Event{}, time.Now()
	return ok
}

// movesToHTTP1 counts an event applied over HTTP/2 toward busyEvents, and reports whether the watch
// ends so that the reflector watches again from here, over HTTP/1.1.
func (r *reading) movesToHTTP1(now time.Time) bool {
	s := r.s
	if s.http1 || s.route == nil || !s.route.mayMove(now) {
		return false
	}
	if now.Sub(r.since) > busyWindow {
		r.counted, r.since = 0, now
	}
	if r.counted++; r.counted < busyEvents {
		return false
	}
	s.route.move(now)
	r.tell()
	return true
}

// forward hands the reflector what is its own: errors it acts on, and bookmarks, the versions it
// watches from. It reports whether the watch reads on.
func (s *streamWatch) forward(r *reading, typ watch.EventType, obj runtime.Object) bool {
	if typ == watch.Bookmark {
		r.last = watch.Event{}
	} else if !r.tell() {
		return false
	}
	return s.send(watch.Event{Type: typ, Object: obj})
}

// failed ends the watch after a read that failed: the last event's version to the reflector, and an
// error it acts on unless the stream simply ended (or went silent over HTTP/1.1).
func (s *streamWatch) failed(r *reading, store *handingStore, err error) {
	if !r.tell() {
		return
	}
	if s.silenced.Load() {
		log.Debugf("%s: nothing read over HTTP/1.1 for %s: watching over HTTP/2", store.name, http1Silence)
		return
	}
	if err != io.EOF && err != io.ErrUnexpectedEOF && !utilnet.IsProbableEOF(err) && !utilnet.IsTimeout(err) && !errors.Is(err, context.Canceled) {
		s.send(watch.Event{Type: watch.Error, Object: apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding").
			AsObject(fmt.Errorf("unable to decode an event from the watch stream: %w", err))})
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
	})
	<-s.done
}
