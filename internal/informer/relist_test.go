package informer

import (
	"runtime/debug"
	"testing"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestListCollectsHarderUntilItIsStored: from the first page of a list to the store holding it, the
// collector runs at ListGCPercent; the pages of one list lower it once.
func TestListCollectsHarderUntilItIsStored(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	store := newHandingStore("services", func(obj any) (any, error) { return obj, nil })
	var added []string
	chain := handlerChain{cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { added = append(added, obj.(*api.Service).Name) }}}
	store.handlers.Store(&chain)
	store.listStarted()
	if got := debug.SetGCPercent(ListGCPercent); got != ListGCPercent {
		t.Errorf("while the list is read, GC percent is %d, want %d", got, ListGCPercent)
	}
	store.listStarted() // its second page
	if err := store.Replace([]any{&api.Service{ObjectMeta: meta.ObjectMeta{Name: "a"}}}, "1"); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("once the list is stored, GC percent is %d, want the 100 it was", got)
	}
	if len(added) != 1 || added[0] != "a" {
		t.Errorf("the list's objects were handed over as %v, want [a]", added)
	}
	select {
	case <-store.synced:
	default:
		t.Error("the store is not done syncing after its first list")
	}
}

func TestFailedListEndsItsCollection(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	store := newHandingStore("services", nil)
	store.listStarted()
	store.endList()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("a list that failed before it was stored leaves GC percent at %d, want 100", got)
	}
}

func TestListLeavesGOGCOffAlone(t *testing.T) {
	before := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(before)
	store := newHandingStore("services", nil)
	store.listStarted()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("with GOGC=off, GC percent became %d during a list", got)
	}
	store.endList()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("with GOGC=off, GC percent is %d after a list", got)
	}
}

// TestListStartedPutsTheGCPercentBack: the GC percent is the process's; lists that overlap lower
// it once, and once the last of them has ended it is the value it had before the first, whatever
// that was; an ended called again changes nothing.
func TestListStartedPutsTheGCPercentBack(t *testing.T) {
	before := debug.SetGCPercent(150)
	defer debug.SetGCPercent(before)
	gcPercent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	first := ListStarted()
	second := ListStarted()
	if got := gcPercent(); got != ListGCPercent {
		t.Fatalf("during two lists, GC percent is %d, want %d", got, ListGCPercent)
	}
	first()
	first()
	if got := gcPercent(); got != ListGCPercent {
		t.Errorf("while one list is still under way, GC percent is %d, want %d", got, ListGCPercent)
	}
	second()
	if got := gcPercent(); got != 150 {
		t.Errorf("after the last list, GC percent is %d, want the 150 it was", got)
	}
	second()
	if got := gcPercent(); got != 150 || listing.n != 0 {
		t.Errorf("an ended called twice: GC percent %d, %d lists under way; want 150 and none", got, listing.n)
	}
}
