package server

import "sync"

// budget bounds the bytes of requests that have been read from sockets but not yet answered
// (for produce: not yet committed). When it is exhausted the event loop that wants more waits
// inside OnTraffic, so the kernel's socket buffers fill and TCP pushes back on producers.
//
// Invariant: only goroutines that are not event loops release (the batch log's completer for
// produce, connection workers for everything else); a loop waiting here can therefore always
// be woken. A single frame larger than the whole budget is admitted when nothing else is held,
// so an oversized (but allowed) request cannot wait forever.
type budget struct {
	mu    sync.Mutex
	cond  sync.Cond
	limit int64
	used  int64
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond.L = &b.mu
	return b
}

func (b *budget) acquire(n int64) {
	b.mu.Lock()
	for b.used > 0 && b.used+n > b.limit {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		panic("BUG: server: in-flight budget released more than acquired")
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
