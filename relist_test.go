package kubetree

import (
	"runtime/debug"
	"testing"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestStreamedListCollectsHarderUntilItsBookmark(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	inner := watch.NewFake()
	w := watchingList(inner)
	if got := debug.SetGCPercent(-2); got != relistGCPercent { // -2 reads without changing... restore below
		t.Errorf("while the list streams in, GC percent is %d, want %d", got, relistGCPercent)
	}
	debug.SetGCPercent(relistGCPercent)

	go func() {
		inner.Add(&api.Service{ObjectMeta: meta.ObjectMeta{Name: "a"}})
		inner.Action(watch.Bookmark, &api.Service{ObjectMeta: meta.ObjectMeta{
			Annotations: map[string]string{meta.InitialEventsAnnotationKey: "true"}}})
		inner.Modify(&api.Service{ObjectMeta: meta.ObjectMeta{Name: "a"}})
	}()
	for _, want := range []watch.EventType{watch.Added, watch.Bookmark, watch.Modified} {
		if ev := <-w.ResultChan(); ev.Type != want {
			t.Fatalf("event %s, want %s: events pass through in order", ev.Type, want)
		}
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after the bookmark, GC percent is %d, want the 100 it was", got)
	}
	w.Stop()
	if _, open := <-w.ResultChan(); open {
		t.Error("the result channel stays open after Stop")
	}
}

func TestStreamedListLeavesGOGCOffAlone(t *testing.T) {
	before := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(before)
	w := watchingList(watch.NewFake())
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("with GOGC=off, GC percent became %d during a list", got)
	}
	w.Stop()
	for range w.ResultChan() {
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("with GOGC=off, GC percent is %d after a list", got)
	}
}
