package informer

import "sync"

// KeyQueue is a controller's queue of keys, with client-go's workqueue semantics: a key queued
// twice is handled once, and a key added while it is handled is queued again when it is done.
// Unlike client-go's queue, it gives back what it grew to: the first list queues every service at
// once, and a Go map never shrinks, so a queue that once held 100,000 keys kept room for them
// (5 MB) for good.
type KeyQueue struct {
	mu   sync.Mutex
	cond *sync.Cond
	keys []string
	// dirty are the keys waiting (queued, or added again while handled); processing the ones taken
	// and not yet given back; peak the most dirty has held since it was last made.
	dirty, processing map[string]struct{}
	peak              int
	shutdown          bool
}

// shrinkAbove is the size a drained queue's map must have reached to be made anew.
const shrinkAbove = 1024

// NewKeyQueue returns an empty queue.
func NewKeyQueue() *KeyQueue {
	q := &KeyQueue{dirty: map[string]struct{}{}, processing: map[string]struct{}{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues key, unless it is queued already; a key being handled is queued once it is done.
func (q *KeyQueue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.dirty[key]; ok || q.shutdown {
		return
	}
	q.dirty[key] = struct{}{}
	q.peak = max(q.peak, len(q.dirty))
	if _, ok := q.processing[key]; ok {
		return
	}
	q.keys = append(q.keys, key)
	q.cond.Signal()
}

// Len is the number of keys queued.
func (q *KeyQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.keys)
}

// Get waits for a key and takes it; shutdown is true once the queue is shut down.
func (q *KeyQueue) Get() (key string, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.keys) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if len(q.keys) == 0 {
		return "", true
	}
	return q.take(), false
}

// TryGet takes a key if one is queued; ok is false if none is.
func (q *KeyQueue) TryGet() (key string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.keys) == 0 {
		return "", false
	}
	return q.take(), true
}

// take takes the first queued key; the caller holds the lock.
func (q *KeyQueue) take() (key string) {
	key, q.keys[0] = q.keys[0], ""
	q.keys = q.keys[1:]
	if len(q.keys) == 0 {
		q.keys = nil // the array the first list grew
	}
	q.processing[key] = struct{}{}
	delete(q.dirty, key)
	if len(q.dirty) == 0 && q.peak > shrinkAbove {
		q.dirty, q.peak = map[string]struct{}{}, 0
	}
	return key
}

// Done gives key back after handling it, and queues it again if it was added meanwhile.
func (q *KeyQueue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if _, ok := q.dirty[key]; ok {
		q.keys = append(q.keys, key)
		q.cond.Signal()
	}
}

// ShutDown makes Get return shutdown once the keys queued are taken, and Add do nothing.
func (q *KeyQueue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
}
