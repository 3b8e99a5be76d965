package informer

import (
	"fmt"
	"testing"
)

// TestKeyQueue: a key queued twice is handed out once, TryGet takes one only if one is queued, a key added while it is handled comes
// back after Done, a drained queue lets go of its map, and a shut-down queue hands out what it
// holds, then says so.
func TestKeyQueue(t *testing.T) {
	q := NewKeyQueue()
	q.Add("a")
	q.Add("b")
	q.Add("a")
	if q.Len() != 2 {
		t.Fatalf("%d keys queued, want 2", q.Len())
	}
	a, _ := q.Get()
	q.Add(a) // while handled: queued again once done, not before
	if b, _ := q.Get(); a != "a" || b != "b" || q.Len() != 0 {
		t.Fatalf("got %q then %q with %d left", a, b, q.Len())
	}
	q.Done("b")
	q.Done(a)
	if again, _ := q.Get(); again != "a" {
		t.Fatalf("a key added while handled came back as %q", again)
	}
	q.Done("a")
	if k, ok := q.TryGet(); ok {
		t.Fatalf("an empty queue gave %q", k)
	}
	q.Add("e")
	if k, ok := q.TryGet(); k != "e" || !ok {
		t.Fatalf("TryGet gave %q (%v), want the key queued", k, ok)
	}
	q.Done("e")

	for i := range 2 * shrinkAbove {
		q.Add(fmt.Sprint(i))
	}
	for range 2 * shrinkAbove {
		k, _ := q.Get()
		q.Done(k)
	}
	if q.peak != 0 || q.keys != nil {
		t.Errorf("a drained queue still holds room for %d keys (array %d)", q.peak, cap(q.keys))
	}

	q.Add("c")
	q.ShutDown()
	q.Add("d")
	if k, shutdown := q.Get(); k != "c" || shutdown {
		t.Errorf("after shutdown, got %q (%v), want what was queued before it", k, shutdown)
	}
	if _, shutdown := q.Get(); !shutdown {
		t.Errorf("a drained, shut-down queue does not say so")
	}
}
