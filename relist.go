package kubetree

import (
	"runtime/debug"
	"sync"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// While a list streams in, every object is decoded, slimmed and dropped, and the old state is
// still held: with the default GOGC of 100 the heap may grow to twice what is live before the
// collector runs, which at a relist is twice the old and the new state together. This is the
// moment CoreDNS pods are OOM-killed at their memory limit, so while any informer of any instance
// is (re)listing, the collector runs at relistGCPercent, and afterwards the setting is put back.
const relistGCPercent = 25

var relisting struct {
	sync.Mutex
	n     int
	saved int
	owned bool // we lowered it, so we put it back
}

func relistStarted() {
	relisting.Lock()
	defer relisting.Unlock()
	relisting.n++
	if relisting.n > 1 {
		return
	}
	prev := debug.SetGCPercent(relistGCPercent)
	// GOGC=off (a memory limit instead) or already as low: the operator's choice stands.
	if prev < 0 || prev <= relistGCPercent {
		debug.SetGCPercent(prev)
		relisting.owned = false
		return
	}
	relisting.saved, relisting.owned = prev, true
}

func relistEnded() {
	relisting.Lock()
	defer relisting.Unlock()
	relisting.n--
	if relisting.n == 0 && relisting.owned {
		debug.SetGCPercent(relisting.saved)
		relisting.owned = false
	}
}

// streamedList wraps the watch of a streamed list (sendInitialEvents): the list has arrived at the
// bookmark that ends the initial events, or when the watch ends.
type streamedList struct {
	watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func watchingList(w watch.Interface) watch.Interface {
	relistStarted()
	s := &streamedList{Interface: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go s.forward()
	return s
}

func (s *streamedList) forward() {
	ended := sync.OnceFunc(relistEnded)
	defer ended()
	defer close(s.out)
	for ev := range s.Interface.ResultChan() {
		if ev.Type == watch.Bookmark && initialEventsEnd(ev.Object) {
			ended()
		}
		select {
		case s.out <- ev:
		case <-s.stop:
			return
		}
	}
}

func (s *streamedList) ResultChan() <-chan watch.Event { return s.out }

func (s *streamedList) Stop() {
	s.once.Do(func() { close(s.stop) })
	s.Interface.Stop()
}

func initialEventsEnd(obj any) bool {
	m, err := apimeta.Accessor(obj)
	return err == nil && m.GetAnnotations()[meta.InitialEventsAnnotationKey] == "true"
}
