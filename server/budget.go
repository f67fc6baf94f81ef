package server

import "sync"

// budget bounds the bytes of requests that have been read from sockets but not yet answered
// (for produce: not yet committed). When it is exhausted the event loop that wants to start a
// new frame waits inside OnTraffic, so the kernel's socket buffers fill and TCP pushes back on
// producers.
//
// A frame takes its budget when its length prefix is read, before its bytes arrive (so the
// buffer it is copied into is paid for), and stays "partial" until its last byte is copied.
// Only the loop that owns a partial frame can complete it, so a loop must never wait for
// budget that partial frames hold: it would wait for itself (or for another loop that waits
// for it). A loop therefore waits only while complete frames hold budget — those are released
// by goroutines that never wait on a loop (the batch log's completer for produce, connection
// workers for everything else) — and is admitted, over the limit if need be, once all that
// remains held is partial. The overshoot is bounded by the frames in transit, each at most
// --max-request-bytes. The same rule admits a single frame larger than the whole budget when
// nothing complete is queued.
type budget struct {
	mu      sync.Mutex
	cond    sync.Cond
	limit   int64
	used    int64 // every held byte
	partial int64 // bytes held by frames still being read
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond.L = &b.mu
	return b
}

// acquirePartial takes n bytes for a frame whose bytes are about to be read.
func (b *budget) acquirePartial(n int64) {
	b.mu.Lock()
	for b.used+n > b.limit && b.used > b.partial {
		b.cond.Wait()
	}
	b.used += n
	b.partial += n
	b.mu.Unlock()
}

// complete marks n bytes of a frame as fully read: from now on they are released by someone
// other than a loop.
func (b *budget) complete(n int64) {
	b.mu.Lock()
	b.partial -= n
	b.mu.Unlock()
}

// release returns n bytes of a complete frame.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used < 0 || b.partial > b.used {
		panic("BUG: server: in-flight budget released more than acquired")
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}

// acquire takes n bytes for a frame that is already complete (tests and benchmarks).
func (b *budget) acquire(n int64) {
	b.acquirePartial(n)
	b.complete(n)
}
