package transport

import (
	"sync"
	"sync/atomic"
)

// budget bounds the bytes of requests that have been read from sockets but not yet answered
// (for produce: not yet committed), counted as the capacity of the buffers that hold them.
// When it is exhausted the event loop (or stream reader) that wants more room waits inside its
// read, so the kernel's socket buffers fill and TCP pushes back on producers. A stream reader
// is a loop of one connection here: everything below said of a loop holds for it.
//
// A frame's buffer grows as its bytes arrive (Transport.growFrame), and each growth takes its
// bytes from the budget before the buffer is allocated: a frame still arriving ("in transit")
// holds what it has received, not what its length prefix declares.
//
// Only the loop that owns a frame in transit can complete it, so a loop must never wait for
// budget that frames in transit hold: it would wait for itself (or for another loop that
// waits for it). A loop therefore waits only while complete frames hold budget — those are
// released (Request.Release) by the handler's goroutines, which must never wait on a loop (in
// Inlet: the batch log's completer for produce, connection workers for everything else). When the budget is exhausted and everything held
// is in transit, waiting could last forever (a client that declares a large frame and stops
// sending holds its bytes until its connection goes), so the growth is decided at once:
//   - the oldest frame in transit is admitted, over the limit if need be, so some frame
//     always makes progress (and a single frame larger than the whole budget is served);
//   - a frame whose bytes have all arrived is admitted: it is complete at once, and from then
//     on released by others (the overshoot is what one loop has buffered, per loop);
//   - any other frame is refused, and its connection closed (Handler.Refused is told).
//
// Bytes that no loop may wait for are counted too, in extra, without waiting and without
// a lock: replies not yet written to the socket (Conn.reply until the socket has taken them;
// a client that does not read holds them as long as it likes) and the unframed bytes of a
// held connection (Conn.hold: bytes gnet has read for a connection that is not being framed).
// They count against the limit, so they push frames towards the decision above, but a loop
// never waits for them: the wait below is only for complete frames, which their handlers
// release whatever any client does (a request that parks, such as a long-poll Fetch, gives
// its bytes back first: Request.Shed). Fetch replies take at most half the limit together
// (ReplyRoom), so replies alone cannot leave frames only the decision.
//
// Memory for request frames is thus bounded by the budget, plus the oldest frame in transit
// (at most the largest frame a connection may send), plus what the loops have buffered. A workload whose frames in
// transit at one moment exceed the budget gets refusals: size the budget above
// (connections × the largest request).
type budget struct {
	mu      sync.Mutex
	cond    sync.Cond
	limit   int64
	used    int64        // every held byte of request frames
	partial int64        // bytes held by frames in transit
	extra   atomic.Int64 // replies not yet written, held connections' unframed bytes: never waited for

	// Frames in transit, oldest first, linked through Request.older/newer.
	oldest, newest *Request
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond.L = &b.mu
	return b
}

// begin puts r, a frame whose bytes are about to arrive, in transit.
func (b *budget) begin(r *Request) {
	b.mu.Lock()
	r.older, r.newer = b.newest, nil
	if b.newest != nil {
		b.newest.newer = r
	} else {
		b.oldest = r
	}
	b.newest = r
	b.mu.Unlock()
}

// grow takes n more bytes for r, a frame in transit (begin); arrived tells that every byte of
// r is already buffered. It returns false, taking nothing, when r is refused (see budget).
func (b *budget) grow(r *Request, n int64, arrived bool) bool {
	b.mu.Lock()
	for b.over(n) && b.used > b.partial {
		b.cond.Wait() // complete frames hold budget: released by others
	}
	if b.over(n) && !arrived && b.oldest != r {
		b.mu.Unlock()
		return false
	}
	b.used += n
	b.partial += n
	r.size += n
	b.mu.Unlock()
	return true
}

// complete takes r out of transit (all its bytes have arrived, or its connection has gone):
// from now on its bytes are released by someone other than a loop.
func (b *budget) complete(r *Request) {
	b.mu.Lock()
	if r.older != nil {
		r.older.newer = r.newer
	} else {
		b.oldest = r.newer
	}
	if r.newer != nil {
		r.newer.older = r.older
	} else {
		b.newest = r.older
	}
	r.older, r.newer = nil, nil
	b.partial -= r.size
	b.mu.Unlock()
}

// over tells whether n more bytes would pass the limit; b.mu is held.
func (b *budget) over(n int64) bool { return b.used+b.extra.Load()+n > b.limit }

// addExtra counts n (negative: returns) bytes no loop waits for: replies not yet written.
// It never waits and takes no lock.
func (b *budget) addExtra(n int64) {
	if b.extra.Add(n) < 0 {
		panic("BUG: transport: in-flight budget's unwaited bytes went negative")
	}
}

// tryExtra takes n bytes no loop waits for if the limit has room for them (a held
// connection's unframed bytes); false takes nothing.
func (b *budget) tryExtra(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over(n) {
		return false
	}
	b.extra.Add(n)
	return true
}

// replyRoom is what Fetch replies may still take: half the limit less every reply not yet
// written (and held connection's unframed bytes), at least 0.
func (b *budget) replyRoom() int64 { return max(0, b.limit/2-b.extra.Load()) }

// release returns n bytes of a complete frame.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used < 0 || b.partial > b.used {
		panic("BUG: transport: in-flight budget released more than acquired")
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}

// held is the bytes held now (metrics): frames, unwritten replies, held unframed bytes.
func (b *budget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used + b.extra.Load()
}

// acquire takes n bytes for a frame that is already complete (tests and benchmarks).
func (b *budget) acquire(n int64) {
	b.mu.Lock()
	for b.over(n) && b.used > b.partial {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
}
