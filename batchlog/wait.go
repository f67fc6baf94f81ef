package batchlog

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Waiter is how a long poll waits for the partitions it reads: Watch registers it on each,
// and the completer signals C when the high watermark of one of them advances, right after
// publishing it. Writes to other partitions do not signal it. C holds at most one signal, so a
// waiter that is busy when several advances land sees one; a signal may be stale (an advance
// it has already read), never missing for an advance published after Watch returned.
//
// A Waiter is used by one goroutine at a time; Stop unregisters it from every partition, after
// which nothing signals it, and it may be watched again (GetWaiter, PutWaiter pool them).
type Waiter struct {
	ch    chan struct{}
	parts []*Partition
}

// partWaiters is a partition's registered waiters. n mirrors len(list) so that the completer
// looks at a partition nobody waits on with one atomic load and no lock.
type partWaiters struct {
	n    atomic.Int32
	mu   sync.Mutex
	list []*Waiter
}

var waiterPool = sync.Pool{New: func() any { return &Waiter{ch: make(chan struct{}, 1)} }}

// GetWaiter is a Waiter watching nothing.
func GetWaiter() *Waiter { return waiterPool.Get().(*Waiter) }

// PutWaiter stops w and gives it back to the pool.
func PutWaiter(w *Waiter) {
	w.Stop()
	waiterPool.Put(w)
}

// C is signalled when a watched partition's high watermark advances.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Watch registers w on p. An advance of p published after Watch returns signals w: a reader
// that watches first and then reads the high watermark misses none. A partition watched twice
// (a fetch may name one twice) is registered twice, which costs nothing but a second signal
// into the same slot, and Stop removes both.
func (w *Waiter) Watch(p *Partition) {
	w.parts = append(w.parts, p)
	pw := &p.waiters
	pw.mu.Lock()
	pw.list = append(pw.list, w)
	pw.n.Store(int32(len(pw.list)))
	pw.mu.Unlock()
}

// Stop unregisters w from every partition it watches and clears a pending signal.
func (w *Waiter) Stop() {
	for i, p := range w.parts {
		pw := &p.waiters
		pw.mu.Lock()
		if j := slices.Index(pw.list, w); j >= 0 {
			last := len(pw.list) - 1
			pw.list[j] = pw.list[last]
			pw.list[last] = nil
			pw.list = pw.list[:last]
		}
		pw.n.Store(int32(len(pw.list)))
		pw.mu.Unlock()
		w.parts[i] = nil
	}
	w.parts = w.parts[:0]
	select {
	case <-w.ch:
	default:
	}
}

// wake signals p's waiters (the completer, after publishing p's new high watermark). With no
// waiter it costs one atomic load.
func (p *Partition) wake() {
	pw := &p.waiters
	if pw.n.Load() == 0 {
		return
	}
	pw.mu.Lock()
	for _, w := range pw.list {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	pw.mu.Unlock()
}
