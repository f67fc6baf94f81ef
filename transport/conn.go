package transport

import (
	"encoding/binary"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Writer is what reply ordering needs of a socket: the three calls that are safe from any
// goroutine and after the connection has closed (see the package comment). gnet.Conn satisfies
// it; so does streamConn, whose callbacks get a nil gnet.Conn (none here looks at it).
type Writer interface {
	AsyncWrite(buf []byte, cb gnet.AsyncCallback) error
	AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error
	Close() error
	// Wake runs the connection's framing again on its owner (gnet: an OnTraffic with no new
	// bytes) once a hold has ended (Conn.hold); a stream connection is woken through
	// Conn.resume instead and answers nil.
	Wake(cb gnet.AsyncCallback) error
}

// Conn is one client connection; see the package comment for who owns what of it.
type Conn struct {
	t      *Transport
	h      Handler // nil for a connection made by NewConn
	w      Writer  // replies and close: nothing else of the socket is touched off its owner
	state  any     // Handler.Open's answer
	remote string  // the peer's address, copied at open (the socket's may be gone later)

	maxFrame   atomic.Int64
	gone       atomic.Bool   // set by markClosed, before anything else it does
	done       chan struct{} // closed by markClosed
	lastActive atomic.Int64  // Config.Clock when bytes last arrived or a reply was queued
	pending    atomic.Int64  // frames read whole whose slots are not yet filled

	// preAuth: the connection's next frames are charged to the pre-authentication budget
	// (SetPreAuth).
	preAuth atomic.Bool
	// holding is 1 + the sequence number of the request that holds the connection
	// (Request.HoldConn), 0 when none does: no frame is started until its slot is filled.
	holding atomic.Uint64
	// unwritten is the bytes of c's replies handed to the socket and not yet taken by it
	// (their written callback has not run), plus what gnet's outbound buffer held when last
	// looked at (sockOut): counted in the budget's extra, and over maxUnwritten c is held.
	unwritten atomic.Int64
	sockOut   atomic.Int64
	sockB     *budget       // the budget sockOut is charged to; owned by the loop
	resume    chan struct{} // a stream reader waits on it while held (cap 1)
	polling   atomic.Bool   // a timer will wake c to look at its output again (gnet)
	stream    bool
	gnet      bool // served by a gnet loop: large replies go through the pump (pump.go)
	fd        int  // a gnet connection's socket, which writeNow writes; -1 for others
	// queued counts the writes of c handed to its loop (AsyncWrite, AsyncWritev) whose
	// callback has not yet run; writeNow writes only when there are none.
	queued atomic.Int32

	pumpPolling atomic.Bool   // a timer will wake c to pump again
	pumpLive    bool          // the pump's first write has called back (the loop's)
	pumpSeen    int           // gnet's outbound bytes when the pump last looked (the loop's)
	pumpWait    time.Duration // the pump's last poll interval (the loop's)

	// Owned by the loop (stream connections: by their reader goroutine).
	nextSeq uint64
	partial *Request // a frame whose bytes have not all arrived yet
	heldIn  int64    // unframed bytes of a held connection charged to heldB (gnet)
	heldB   *budget

	wmu      sync.Mutex
	writeSeq uint64
	slots    []slot // slots[i] holds the reply of request writeSeq+i
	outs     []*Out // scratch for reply
	backlog  []*Out // replies the pump has not handed on whole, in order
	pumping  bool   // the pump runs: every reply joins the backlog
}

type slot struct {
	ready bool
	out   *Out // nil: nothing to write
}

func (t *Transport) newConn(w Writer, remote string, h Handler) *Conn {
	c := &Conn{t: t, h: h, w: w, remote: remote, done: make(chan struct{}), resume: make(chan struct{}, 1), fd: -1}
	c.maxFrame.Store(int64(t.cfg.MaxFrame))
	c.lastActive.Store(t.now())
	return c
}

// NewConn is a connection no back-end serves, with state as its State: its requests are made
// by Inject and its replies go to w (benchmarks and tests of a handler).
func (t *Transport) NewConn(w Writer, remote string, state any) *Conn {
	c := t.newConn(w, remote, nil)
	c.state = state
	return c
}

// State is what Handler.Open returned for c.
func (c *Conn) State() any { return c.state }

// Remote is the peer's address as it was when the connection opened.
func (c *Conn) Remote() string { return c.remote }

// SetMaxFrame sets the largest frame c may send from its next length prefix on (Inlet: before
// SASL authentication, sasl.server.max.receive.size). Safe from any goroutine.
func (c *Conn) SetMaxFrame(n int) { c.maxFrame.Store(int64(n)) }

// MaxFrame is the largest frame c may send now.
func (c *Conn) MaxFrame() int { return int(c.maxFrame.Load()) }

// Close closes the connection; replies already queued to the socket are written first (gnet
// runs writes queued before a Close first, and its buffer goes out as far as the socket takes
// it; a stream connection flushes them). Replies still in the pump's backlog (behind a large
// one on a gnet connection, pump.go) and later ones are dropped.
// Safe from any goroutine, and after the connection has closed.
func (c *Conn) Close() { _ = c.w.Close() }

// Gone tells whether the connection has closed (markClosed has begun).
func (c *Conn) Gone() bool { return c.gone.Load() }

// Done is closed when the connection has closed: it wakes a handler's long polls.
func (c *Conn) Done() <-chan struct{} { return c.done }

// LastActive is Config.Clock when bytes last arrived on c or a reply was queued for it.
func (c *Conn) LastActive() int64 { return c.lastActive.Load() }

// Pending counts c's requests read whole whose reply slots are not filled yet: a connection
// with none and no activity for a while is idle.
func (c *Conn) Pending() int64 { return c.pending.Load() }

// SetPreAuth says whether c's frames from its next one on are charged to the
// pre-authentication budget (Config.PreAuthBudget): set before SASL authentication, cleared
// once it succeeds. Safe from any goroutine.
func (c *Conn) SetPreAuth(on bool) { c.preAuth.Store(on) }

// budgetNow is the budget c's next frame and reply are charged to.
func (c *Conn) budgetNow() *budget {
	if c.preAuth.Load() && c.t.preAuth != nil {
		return c.t.preAuth
	}
	return c.t.budget
}

// ReplyRoom is how many bytes of Fetch reply c may be answered with now: what of half its
// budget no reply still unwritten holds (budget.go). A Fetch takes the least of this, its
// own MaxBytes and fetch.max.bytes (and still returns its first batch, KIP-74).
func (c *Conn) ReplyRoom() int64 { return c.budgetNow().replyRoom() }

// unwrittenBytes is the bytes of c's replies not yet taken by the socket (tests).
func (c *Conn) unwrittenBytes() int64 { return c.unwritten.Load() }

// Limits on a connection that is not read from (held): a request that waits holds it
// (Request.HoldConn); so do unwritten replies over maxUnwritten, as Kafka mutes a channel
// until its response is sent; and so do maxPending requests unanswered (Kafka answers one at
// a time; kgo and the Java producer pipeline at most 5, so this is far above what a client
// needs and only bounds what one connection queues for its worker). A stream reader then
// stops reading (stream.go: held). gnet cannot stop reading one connection, so what it reads
// meanwhile waits unframed in its buffer, charged to the budget (extra), and a held
// connection with more than maxHeldInbound of it, or with more than heldFree of it and no room
// in the budget, is closed (Refused, Held). While gnet's outbound buffer holds any of its output, a gnet
// connection is looked at again every heldPoll (gnet tells nothing when that buffer drains),
// so what the budget counts of it follows the socket.
const (
	maxUnwritten   = 1 << 20
	maxPending     = 1024
	maxHeldInbound = 1 << 20
	heldFree       = 64 << 10
	heldPoll       = 5 * time.Millisecond
)

// held tells whether c may not start a frame now.
func (c *Conn) held() bool {
	return c.holding.Load() != 0 || c.unwritten.Load() > maxUnwritten || c.pending.Load() >= maxPending
}

// wake runs c's framing again after a hold ended.
func (c *Conn) wake() {
	if c.stream {
		select {
		case c.resume <- struct{}{}:
		default:
		}
		return
	}
	_ = c.w.Wake(nil)
}

// setSockOut records what the socket's own outbound buffer holds (gnet's, on its loop).
func (c *Conn) setSockOut(n int64) {
	b := c.budgetNow()
	old := c.sockOut.Swap(n)
	if c.sockB != nil && c.sockB != b {
		c.sockB.addExtra(-old)
		old = 0
	}
	c.sockB = b
	if d := n - old; d != 0 {
		b.addExtra(d)
		c.unwritten.Add(d)
	}
}

// holdInbound charges n, the unframed bytes now waiting for held c, to its budget; false:
// more than maxHeldInbound, or no room (the caller closes c).
func (c *Conn) holdInbound(n int64) bool {
	if c.heldB == nil {
		c.heldB = c.budgetNow()
	}
	d := n - c.heldIn
	if d <= 0 {
		return true
	}
	switch {
	case n > maxHeldInbound:
	case n <= heldFree:
		// One read's worth is taken whatever the budget holds: a client that pipelines a
		// small request behind its long poll is not closed because producers fill the budget.
		c.heldB.addExtra(d)
		c.heldIn = n
		return true
	case c.heldB.tryExtra(d):
		c.heldIn = n
		return true
	}
	c.h.Refused(c, Held, int(n), maxHeldInbound)
	return false
}

// unholdInbound returns the charge of holdInbound: framing resumes, and frames take their
// own budget.
func (c *Conn) unholdInbound() {
	if c.heldIn != 0 {
		c.heldB.addExtra(-c.heldIn)
	}
	c.heldIn, c.heldB = 0, nil
}

// pollOutput arms a timer that wakes c to look at its output again (gnet).
func (c *Conn) pollOutput() {
	if c.polling.CompareAndSwap(false, true) {
		time.AfterFunc(heldPoll, func() {
			c.polling.Store(false)
			if !c.gone.Load() {
				_ = c.w.Wake(nil)
			}
		})
	}
}

// Request is one framed request; pooled. Its Conn and frame are valid until Release.
type Request struct {
	c    *Conn
	b    *budget // the budget size is held against
	seq  uint64
	buf  *[]byte // the frame without its length prefix
	size int64   // bytes held against the budget (the capacity of buf)

	// replied: the slot is filled (Reply or Skip). Release checks it.
	replied bool

	// Assembly, owned by the loop (or stream reader) until the frame is complete: the frame's
	// declared length and the bytes of it copied into buf so far. buf grows as bytes arrive
	// (growFrame), so a declared size costs nothing until the bytes are there.
	want, filled int
	older, newer *Request // neighbours in the budget's list of frames in transit
}

var requestPool = sync.Pool{New: func() any { return new(Request) }}

// Bytes is the frame without its length prefix; it aliases a pooled buffer, valid until
// Release.
func (r *Request) Bytes() []byte {
	if r.buf == nil {
		return nil // shed
	}
	return *r.buf
}

// HoldConn stops the framing of r's connection until r's slot is filled: no frame after r
// is read (a stream connection is not read, a gnet one keeps what arrives unframed, within
// maxHeldInbound). For a request that may wait on others (a long poll), so what its
// connection sends behind it cannot fill the budget while it waits. Only from
// Handler.Frame, before r is handed on.
func (r *Request) HoldConn() { r.c.holding.Store(r.seq + 1) }

// Shed gives back r's buffer and budget before its reply, for a request about to wait whose
// frame is no longer needed (its bytes are decoded): a parked request holds no budget that
// a loop could wait for. Bytes is nil after it; Release later returns nothing more. From the
// goroutine handling r.
func (r *Request) Shed() {
	if r.buf == nil {
		return
	}
	r.b.release(r.size)
	putBuf(r.buf)
	r.buf, r.size = nil, 0
}

// Conn is the connection r arrived on.
func (r *Request) Conn() *Conn { return r.c }

// Size is the bytes r holds against the budget until Release.
func (r *Request) Size() int64 { return r.size }

// Reply fills r's slot with out, which the transport owns from now on, and writes every reply
// that is now next in order; out nil: nothing is written. Exactly once per request, Reply or
// Skip, from any goroutine.
func (r *Request) Reply(out *Out) {
	if r.replied {
		panic("BUG: transport: a request's reply slot filled twice")
	}
	r.replied = true
	r.c.reply(r.seq, out)
}

// Skip fills r's slot with nothing (an acks=0 produce): later replies may go.
func (r *Request) Skip() { r.Reply(nil) }

// Release returns r's buffer and budget, and r to the pool. Its slot must be filled already
// (Reply or Skip). Exactly once per request: every request passes here or, if its connection
// closed before it was whole, through markClosed.
func (r *Request) Release() {
	if r.c == nil {
		panic("BUG: transport: a request released twice")
	}
	if !r.replied {
		panic("BUG: transport: a request released before its reply slot was filled")
	}
	r.release()
}

func (r *Request) release() {
	t := r.c.t
	r.b.release(r.size)
	if r.buf != nil {
		putBuf(r.buf)
	}
	r.buf, r.c, r.b, r.replied, r.size = nil, nil, nil, false, 0
	requestPool.Put(r)
	t.inflight.Add(-1)
}

// Inject makes a complete request of frame on c, a connection made by NewConn, as if it had
// been read: it takes budget (waiting while complete frames hold it), a sequence slot and a
// pooled buffer, and counts in InFlight (benchmarks and tests of a handler).
func (c *Conn) Inject(frame []byte) *Request {
	t := c.t
	r := requestPool.Get().(*Request)
	r.c, r.b, r.seq = c, c.budgetNow(), c.nextSeq
	c.nextSeq++
	r.size = int64(bufCap(len(frame)))
	r.want, r.filled = len(frame), len(frame)
	r.b.acquire(r.size)
	t.inflight.Add(1)
	r.buf = getBuf(len(frame))
	copy(*r.buf, frame)
	c.pending.Add(1)
	return r
}

// source is the inbound bytes framing reads: gnet.Conn's calls of the same names (on its
// loop), or a sliceSource (stream connections, tests).
type source interface {
	InboundBuffered() int
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	Read(p []byte) (int, error)
}

// sliceSource is a source over bytes already read; what framing leaves of them (part of a
// length prefix) is the caller's to keep for the next read.
type sliceSource struct{ b []byte }

func (s *sliceSource) InboundBuffered() int { return len(s.b) }

func (s *sliceSource) Peek(n int) ([]byte, error) {
	if len(s.b) < n {
		return nil, io.ErrShortBuffer
	}
	return s.b[:n], nil
}

func (s *sliceSource) Discard(n int) (int, error) {
	n = min(n, len(s.b))
	s.b = s.b[n:]
	return n, nil
}

func (s *sliceSource) Read(p []byte) (int, error) {
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

// action is what framing leaves its back-end to do.
type action int

const (
	more      action = iota // every whole frame is handed on; wait for more bytes
	drained                 // draining: no frame is started (src may hold more)
	closeConn               // a bad length prefix, a refused frame, or Handler.Frame said so
	hold                    // c is held (Conn.held): no frame is started (src may hold more)
)

// feed copies every complete frame out of src (and what has arrived of an incomplete one
// into its own buffer, so src never has to hold a large frame) and hands it to the handler.
// It runs on the goroutine that owns c's framing; it may wait for budget, which is how
// backpressure reaches TCP.
//
// While draining no new frame is started, but a frame already started is read to its end:
// it holds an in-flight count that a drain waits for (crashtest's
// TestSigtermFinishesPartialRequest).
func (c *Conn) feed(src source) action {
	t := c.t
	c.lastActive.Store(t.now())
	for {
		if r := c.partial; r != nil {
			for r.filled < r.want {
				avail := src.InboundBuffered()
				if avail == 0 {
					return more
				}
				if !t.growFrame(r, avail) {
					return closeConn
				}
				n, _ := src.Read((*r.buf)[r.filled:])
				r.filled += n
			}
			c.partial = nil
			r.b.complete(r)
			c.pending.Add(1)
			if !c.h.Frame(r) {
				return closeConn
			}
			continue
		}
		if t.draining.Load() {
			return drained
		}
		if src.InboundBuffered() < 4 {
			return more
		}
		if c.held() {
			return hold
		}
		p, err := src.Peek(4)
		if err != nil {
			return more
		}
		// Checked before anything is allocated (kafka-proxy's MaxRequestSize).
		size := int(int32(binary.BigEndian.Uint32(p)))
		if maxFrame := c.MaxFrame(); size < t.cfg.MinFrame || size > maxFrame {
			c.h.Refused(c, FrameSize, size, maxFrame)
			return closeConn
		}
		// Count the frame before checking draining once more (Drain is set before the count is
		// read): either a drain waits for this frame or it is never started.
		t.inflight.Add(1)
		if t.draining.Load() {
			t.inflight.Add(-1)
			return drained
		}
		_, _ = src.Discard(4)
		c.partial = t.startFrame(c, size)
	}
}

// startFrame begins assembling a frame of size bytes (its length prefix already consumed).
// Its buffer starts small and grows as bytes arrive (growFrame).
func (t *Transport) startFrame(c *Conn, size int) *Request {
	r := requestPool.Get().(*Request)
	r.c, r.b, r.seq = c, c.budgetNow(), c.nextSeq
	c.nextSeq++
	r.want, r.filled, r.size = size, 0, 0
	r.b.begin(r)
	return r
}

// A frame whose bytes have not all arrived starts in a buffer of initialFrameBuf (gnet
// delivers a socket read of up to 64 KiB at a time) and grows by frameGrowth when full.
// Each growth copies what has arrived, so the factor trades copying for how much a slow
// frame holds beyond its bytes: with 16, a 1 MiB produce request arriving in 64 KiB reads is
// copied once more in part (64 KiB, about 6%; doubling copies 94%, and measured 0.91x the
// records/s and 1.20x the CPU per record in one bench compare run:
// results/before-after/compare-frame-growth-20261130-110904.txt), and a frame holds at most
// 16 times what has arrived. What it holds is counted in the budget either way, so the factor
// does not change the memory bound.
const (
	initialFrameBuf = 64 << 10
	frameGrowth     = 16
)

// growFrame makes room in r's buffer for more of the frame when it is full, avail being the
// bytes waiting to be copied: to what has arrived, at least frameGrowth times the buffer, at
// most the frame. The added capacity is taken from the budget first, which may wait there
// (budget.go). It returns false when the budget is exhausted by frames in transit alone; the
// caller then closes the connection (its partial frame is dropped by markClosed).
func (t *Transport) growFrame(r *Request, avail int) bool {
	have := 0
	if r.buf != nil {
		have = len(*r.buf)
	}
	if r.filled < have {
		return true
	}
	n := min(r.want, max(frameGrowth*have, r.filled+avail, initialFrameBuf))
	if r.b == t.preAuth {
		// Before authentication a frame is charged what has arrived (rounded up to its
		// buffer's size class, so at most twice that), never what its prefix declares.
		n = min(r.want, r.filled+avail)
	}
	if !r.b.grow(r, int64(bufCap(n))-r.size, r.filled+avail >= r.want) {
		r.c.h.Refused(r.c, Budget, r.want, int(r.b.limit))
		return false
	}
	nb := getBuf(n)
	if r.buf != nil {
		copy(*nb, (*r.buf)[:r.filled])
		putBuf(r.buf)
	}
	r.buf = nb
	return true
}

// reply fills the slot of request seq (out == nil: nothing to write) and writes every reply
// that is now next in order.
func (c *Conn) reply(seq uint64, out *Out) {
	c.wmu.Lock()
	i := int(seq - c.writeSeq)
	for len(c.slots) <= i {
		c.slots = append(c.slots, slot{})
	}
	c.slots[i] = slot{ready: true, out: out}
	n := 0
	for n < len(c.slots) && c.slots[n].ready {
		n++
	}
	if n == 0 {
		c.wmu.Unlock()
		return
	}
	// Writes are queued to the socket while wmu is held, so they reach it in order.
	outs := c.outs[:0]
	for _, sl := range c.slots[:n] {
		if sl.out != nil {
			outs = append(outs, sl.out)
		}
	}
	c.outs = outs
	copy(c.slots, c.slots[n:])
	for j := len(c.slots) - n; j < len(c.slots); j++ {
		c.slots[j] = slot{}
	}
	c.slots = c.slots[:len(c.slots)-n]
	c.writeSeq += uint64(n)
	if p := c.pending.Add(-int64(n)); p < maxPending && p+int64(n) >= maxPending {
		defer c.wake() // held by its unanswered requests: no longer
	}
	c.lastActive.Store(c.t.now())
	if h := c.holding.Load(); h != 0 && c.writeSeq >= h && c.holding.CompareAndSwap(h, 0) {
		defer c.wake() // the request that held c is answered: frame what waits
	}
	if c.gone.Load() || len(outs) == 0 {
		for _, o := range outs {
			putOut(o)
		}
		clear(c.outs)
		c.wmu.Unlock()
		return
	}
	if sent := c.t.cfg.Sent; sent != nil {
		n := 0
		for _, o := range outs {
			n += len(o.B)
		}
		sent(n)
	}
	b := c.budgetNow()
	for _, o := range outs {
		o.charge(c, b)
	}
	if c.pumps(outs) {
		c.startPump(outs)
		clear(c.outs)
		c.wmu.Unlock()
		return
	}
	var err error
	var multi []*Out
	if len(outs) == 1 {
		b, done := c.writeNow(outs[0])
		if done {
			clear(c.outs)
			c.wmu.Unlock()
			return
		}
		c.queued.Add(1)
		err = c.w.AsyncWrite(b, outs[0].written)
	} else {
		// Several replies became writable at once (an earlier slow one finished): one writev.
		multi = append([]*Out(nil), outs...)
		bs := make([][]byte, len(multi))
		for j, o := range multi {
			bs[j] = o.B
		}
		c.queued.Add(1)
		err = c.w.AsyncWritev(bs, func(gc gnet.Conn, err error) error {
			for _, o := range multi {
				o.taken(nil, nil)
			}
			c.tookOutput(gc, err)
			c.queued.Add(-1)
			return nil
		})
	}
	if err != nil {
		// The loop is gone (shutdown); the callback will not run.
		c.queued.Add(-1)
		for _, o := range outs {
			o.taken(nil, nil)
		}
	}
	clear(c.outs)
	c.wmu.Unlock()
}

// writeNow writes o to a gnet connection's socket from the calling goroutine when nothing of
// c is queued to its loop or waits in gnet's outbound buffer, so that the order of bytes
// holds: the reply reaches the socket without waiting for the loop to be scheduled (on two
// busy cores, a wait of a few hundred microseconds at times). It returns what is left to
// queue to the loop (all of o.B when it did not write: another connection kind, output
// queued, or a write that failed, which the loop meets again and closes c on) and done: o
// was written whole and handed back. Under wmu: markClosed, which runs before gnet closes the
// descriptor, sets gone and then takes wmu, so the descriptor is c's while gone is unset.
func (c *Conn) writeNow(o *Out) (rest []byte, done bool) {
	if c.fd < 0 || c.queued.Load() != 0 || c.sockOut.Load() != 0 || c.gone.Load() {
		return o.B, false
	}
	n, err := unix.Write(c.fd, o.B)
	switch {
	case err == nil && n == len(o.B):
		o.taken(nil, nil)
		return nil, true
	case err == nil:
		return o.B[n:], false
	default: // EAGAIN (the socket is full), EINTR, or an error the loop will meet
		return o.B, false
	}
}

// markClosed runs once when the connection has closed, on the goroutine that owns its framing
// (its loop in OnClose, or its stream reader as it ends). What may still run for it: see the
// package comment. The back-end calls Handler.Closed after it.
func (c *Conn) markClosed() {
	c.gone.Store(true)
	close(c.done)
	c.unholdInbound()
	if n := c.sockOut.Swap(0); n != 0 {
		c.sockB.addExtra(-n) // gnet drops its outbound buffer with the connection
		c.unwritten.Add(-n)
	}
	// gone is set before wmu is taken: a reply holding wmu now may still queue its write (the
	// socket drops it), and every later one sees gone and drops its output.
	c.wmu.Lock()
	for _, sl := range c.slots {
		if sl.out != nil {
			putOut(sl.out)
		}
	}
	c.slots = nil
	c.dropBacklog()
	c.wmu.Unlock()
	if r := c.partial; r != nil {
		c.partial = nil
		r.b.complete(r)
		r.release()
	}
}

// charge counts o's bytes as unwritten on c, against b, until the socket takes them (taken).
func (o *Out) charge(c *Conn, b *budget) {
	o.c, o.b, o.n = c, b, int64(cap(o.B)) // what it holds of memory
	b.addExtra(o.n)
	c.unwritten.Add(o.n)
}

// taken is o's written callback: the socket has taken its bytes (gnet: into its outbound
// buffer, which setSockOut counts from then on; a stream connection: written), or they were
// dropped. o goes back to the pool.
func (o *Out) taken(gc gnet.Conn, err error) {
	if c := o.c; c != nil {
		o.b.addExtra(-o.n)
		c.unwritten.Add(-o.n)
		o.c, o.b, o.n = nil, nil, 0
		c.tookOutput(gc, err)
	}
	putOut(o)
}

// tookOutput runs when the socket has taken replies of c: on gnet's loop (gc set: its outbound
// buffer is looked at), or on a stream writer. A connection held by its output and now under
// maxUnwritten is woken.
func (c *Conn) tookOutput(gc gnet.Conn, err error) {
	if gc != nil && err == nil && !c.gone.Load() {
		c.setSockOut(int64(gc.OutboundBuffered()))
		if c.sockOut.Load() > 0 {
			c.pollOutput() // gnet tells nothing when it drains: look again soon (OnTraffic)
		}
	}
	if c.holding.Load() != 0 || c.unwritten.Load() > maxUnwritten {
		return
	}
	if c.stream {
		c.wake()
	} else if gc != nil && c.polling.Load() {
		c.wake() // held by its output until now: no need to wait for the poll
	}
}
