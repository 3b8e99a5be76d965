package informer

import (
	"runtime/debug"
	"sync"
	"time"
)

// While a list streams in, every object is decoded, slimmed and dropped, and the old state is
// still held: with the default GOGC of 100 the heap may grow to twice what is live before the
// collector runs, which at a relist is twice the old and the new state together. This is the
// moment CoreDNS pods are OOM-killed at their memory limit, so while any informer of any instance
// is (re)listing, or a watcher is building its first tree, the collector runs at ListGCPercent,
// and afterwards the setting is put back. The collection that follows would size the heap by
// what the list left behind (its temporary store, the objects it replaced), so listSettle after
// the last list ends the heap is collected and what is free returned to the system at once.
const (
	ListGCPercent = 25
	listSettle    = time.Second
)

// listing counts the lists under way in the process, and holds the GC percent they replaced.
var listing struct {
	sync.Mutex
	n     int
	saved int
	owned bool // we lowered it, so we put it back
}

// ListStarted lowers the collector's GC percent to ListGCPercent for a list (or for the first tree
// a watcher builds of its lists) until ended is called, by the caller's defer or by whatever ends
// the list. ended may be called more than once; the first call counts.
func ListStarted() (ended func()) {
	listing.Lock()
	defer listing.Unlock()
	if listing.n++; listing.n == 1 {
		// The GC percent is the whole process's setting, not this informer's: CoreDNS, every
		// plugin and every server block collect by it. So it is lowered only while a list is under
		// way, never below what the operator chose (GOGC=off, with a memory limit instead, or a
		// value as low stands), and listEnded puts back the value it had once the last list ends.
		prev := debug.SetGCPercent(ListGCPercent)
		listing.saved, listing.owned = prev, prev > ListGCPercent
		if !listing.owned {
			debug.SetGCPercent(prev)
		}
	}
	return sync.OnceFunc(listEnded)
}

// listEnded ends one list; after the last, the GC percent is what it was before the first.
func listEnded() {
	listing.Lock()
	defer listing.Unlock()
	listing.n--
	if listing.n == 0 && listing.owned {
		debug.SetGCPercent(listing.saved)
		listing.owned = false
		time.AfterFunc(listSettle, settled)
	}
}

// settled returns the memory of the lists to the system, unless another list has begun since.
func settled() {
	listing.Lock()
	busy := listing.n > 0
	listing.Unlock()
	if !busy {
		debug.FreeOSMemory()
	}
}
