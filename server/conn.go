package server

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"inlet/wire"
)

// conn is one client connection.
//
// Framing runs on the connection's gnet loop; everything else runs on a worker goroutine that
// exists while the connection has queued requests, so requests of one connection are decoded
// and submitted in arrival order (idempotent sequences depend on it) and CRC checks, decoding
// and long polls never run on a loop.
//
// Kafka clients require replies in request order per connection; gnet keeps none. Each request
// takes a sequence number when it is framed; a reply is written when every earlier one has
// been written or skipped (acks=0 produce takes a slot that is never written).
//
// Who owns a connection, and when its requests may still run (DESIGN.md, "Connections"):
//   - A conn is Inlet's own struct, never pooled or reused, so a request's r.c stays a valid
//     pointer for as long as the request exists, also after the connection has closed.
//   - The transport under it (gnet's Conn, or a streamConn) is not: gnet releases its Conn at
//     OnClose, and its methods other than AsyncWrite, AsyncWritev and Close may be called
//     only on its loop. So nothing but the framing code (on the loop, or the stream reader)
//     touches the transport except through those three calls, which are safe from any
//     goroutine and after a close; the peer's address is copied into remote at open.
//   - When the connection closes (OnClose, or the stream reader's end) markClosed sets gone,
//     drops the partial frame, and closes done, which ends a parked long poll. Requests that
//     were read completely may still be queued for the worker, waiting in the batch log, or
//     parked in a long poll: a Produce among them is still committed (Kafka processes every
//     request it has read, and an acks=0 producer may close right after writing), any other
//     is dropped unhandled by the worker, and every reply of a gone connection is dropped
//     by reply. Each request still releases its buffer and budget exactly once.
type conn struct {
	s  *Server
	gc transport // replies and close; see above for what else may touch it
	l  *listener // the listener it arrived on; nil in benchmarks
	// sec is the connection's SASL and authorization state (security.go); nil on a listener
	// without security, which then pays nothing for it. Only the worker touches it.
	sec    *connSecurity
	remote string // the peer's address, copied at open (the transport's may be gone later)
	ip     string // remote without the port: the key of max.connections.per.ip

	// saslPending is set on a SASL listener until authentication succeeds: while it is, frames
	// are capped at sasl.server.max.receive.size. Set at open, cleared by the worker.
	saslPending atomic.Bool
	gone        atomic.Bool // set by markClosed, before anything else it does
	// user is the name of the configured user the connection authenticated as (SASL, or a
	// TLS certificate naming one); nil until then. Read by closeUserConns.
	user atomic.Pointer[string]
	done chan struct{} // closed by markClosed: wakes this connection's long polls
	// lastActive is the server clock (limits.go) when bytes last arrived or a reply was
	// queued; pending counts requests read whole and not yet answered. The idle reaper closes
	// a connection with nothing pending and no activity for connections.max.idle.ms, also
	// one stalled in the middle of a frame (whose partial frame markClosed then drops).
	lastActive atomic.Int64
	pending    atomic.Int64
	// mutedUntil (unix ns; 0: not muted) is when a quota throttle ends: the worker handles
	// nothing more of the connection before it (quotas.go).
	mutedUntil atomic.Int64
	// queuedBytes is the budget held by requests read whole and not yet released: what a
	// muted connection may hold before it is closed (quotas.go).
	queuedBytes atomic.Int64

	// loop-owned (stream connections: owned by their reader goroutine)
	loop    gnet.Conn // nil for stream (TLS and extra) connections; see tls.go
	nextSeq uint64
	partial *request // a frame whose bytes have not all arrived yet

	qmu     sync.Mutex
	queue   []*request // queue[qhead:] waits for the worker
	qhead   int
	running bool

	wmu      sync.Mutex
	writeSeq uint64
	slots    []slot    // slots[i] holds the reply of request writeSeq+i
	outs     []*outBuf // scratch for reply
}

// transport is what the ordered-reply code needs of a connection: the three calls that are
// safe from any goroutine and after the connection has closed. gnet.Conn satisfies it; so
// does streamConn (tls.go), which serves TLS listeners on crypto/tls with the same request
// handling. Callbacks are called with a nil gnet.Conn by streamConn; none here looks at it.
type transport interface {
	AsyncWrite(buf []byte, cb gnet.AsyncCallback) error
	AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error
	Close() error
}

type slot struct {
	ready bool
	out   *outBuf // nil: nothing to write
}

// outBuf is a reply frame on its way to the socket. Its written callback (bound once, when the
// pool makes it) returns it to the pool, so queuing a reply allocates no closure.
type outBuf struct {
	b       []byte
	written gnet.AsyncCallback
}

var outPool sync.Pool

func init() {
	outPool.New = func() any {
		ob := new(outBuf)
		ob.written = func(gnet.Conn, error) error { putOut(ob); return nil }
		return ob
	}
}

// maxPooledReply keeps the occasional huge fetch reply from being pinned by the pool.
const maxPooledReply = 1 << 20

func getOut(sizeHint int) *outBuf {
	ob := outPool.Get().(*outBuf)
	if cap(ob.b) < sizeHint {
		ob.b = make([]byte, 0, sizeHint)
	}
	ob.b = ob.b[:0]
	return ob
}

func putOut(ob *outBuf) {
	if cap(ob.b) > maxPooledReply {
		ob.b = nil
	}
	outPool.Put(ob)
}

// request is one framed request and the state its handling reuses; pooled.
type request struct {
	c    *conn
	seq  uint64
	buf  *[]byte // the frame without its length prefix; valid until release
	size int64   // bytes held against the in-flight budget (the capacity of buf)
	// queued: counted in c.queuedBytes (enqueue) until release.
	queued bool
	hdr    wire.RequestHeader

	// Assembly, owned by the loop (or stream reader) until the frame is complete: the frame's
	// declared length and the bytes of it copied into buf so far. buf grows as bytes arrive
	// (growFrame), so a declared size costs nothing until the bytes are there.
	want, filled int
	older, newer *request // neighbours in the budget's list of frames in transit

	// With metrics: when the frame's last byte arrived, and whether its API is known (handle
	// found it served), so release counts it under hdr.APIKey.
	start  time.Time
	served bool

	produce produceState
}

var requestPool = sync.Pool{New: func() any { return new(request) }}

func getRequest() *request {
	r := requestPool.Get().(*request)
	if r.produce.log.Done == nil {
		// Bound once per pooled request, so submitting allocates no closure.
		r.produce.log.Done = r.produceCommitted
	}
	return r
}

// newConn is a gnet connection's state; remote is the peer's address (read on the loop, in
// OnOpen: gnet's RemoteAddr may not be called from anywhere else).
func newConn(s *Server, gc gnet.Conn, remote string) *conn {
	c := &conn{s: s, gc: gc, loop: gc, l: s.gnetL}
	c.init(remote)
	c.sec = newConnSecurity(s, c.l, nil)
	return c
}

// init sets what every connection starts with, once its transport and listener are set.
func (c *conn) init(remote string) {
	c.remote, c.ip = remote, hostOf(remote)
	c.done = make(chan struct{})
	c.lastActive.Store(c.s.clock.Load())
	c.saslPending.Store(c.l != nil && c.l.sasl)
}

// maxFrame is the largest frame the connection may send now: before SASL authentication
// Kafka's sasl.server.max.receive.size, after it socket.request.max.bytes.
func (c *conn) maxFrame() int {
	if c.saslPending.Load() {
		return c.s.cfg.SaslServerMaxReceiveSize
	}
	return c.s.cfg.MaxRequestBytes
}

// frames copies every complete request out of gnet's buffer (and what has arrived of an
// incomplete one into its own buffer, so gnet's buffer never has to hold a large frame) and
// queues it. It runs on the event loop; it may wait for in-flight budget, which is how
// backpressure reaches TCP.
//
// While draining no new frame is started, but a frame already started is read to its end:
// it holds an in-flight count that Shutdown waits for (crashtest's
// TestSigtermFinishesPartialRequest).
func (c *conn) frames() gnet.Action {
	s := c.s
	c.lastActive.Store(s.clock.Load())
	for {
		if r := c.partial; r != nil {
			for r.filled < r.want {
				avail := c.loop.InboundBuffered()
				if avail == 0 {
					return gnet.None
				}
				if !s.growFrame(r, avail) {
					return gnet.Close
				}
				n, _ := c.loop.Read((*r.buf)[r.filled:])
				r.filled += n
			}
			c.partial = nil
			s.budget.complete(r)
			if !c.enqueue(r) {
				return gnet.Close
			}
			continue
		}
		if s.draining.Load() {
			return gnet.None
		}
		if c.loop.InboundBuffered() < 4 {
			return gnet.None
		}
		p, err := c.loop.Peek(4)
		if err != nil {
			return gnet.None
		}
		size := int(int32(binary.BigEndian.Uint32(p)))
		if !s.frameSizeOK(c, size) {
			return gnet.Close
		}
		// Count the frame before checking draining once more (Shutdown sets draining before
		// it reads the count): either Shutdown waits for this frame or it is never started.
		s.inflight.Add(1)
		if s.draining.Load() {
			s.inflight.Add(-1)
			return gnet.None
		}
		_, _ = c.loop.Discard(4)
		c.partial = s.startFrame(c, size)
	}
}

// frameSizeOK checks a length prefix before anything is allocated (kafka-proxy's
// MaxRequestSize): a request header is at least api key, version and correlation id (8
// bytes), and the frame may not exceed maxFrame. A bad size closes the connection (Kafka's
// InvalidReceiveException).
func (s *Server) frameSizeOK(c *conn, size int) bool {
	if size >= 8 && size <= c.maxFrame() {
		return true
	}
	s.badFrames.Add(1)
	if c.saslPending.Load() && size > c.maxFrame() {
		s.refused(c.remote, "request larger than sasl.server.max.receive.size before authentication", "size", size, "max", c.maxFrame())
	} else {
		s.refused(c.remote, "bad request size", "size", size, "max", c.maxFrame())
	}
	return false
}

// startFrame begins assembling a frame of size bytes (its length prefix already consumed).
// Its buffer starts small and grows as bytes arrive (growFrame).
func (s *Server) startFrame(c *conn, size int) *request {
	r := getRequest()
	r.c, r.seq = c, c.nextSeq
	c.nextSeq++
	r.want, r.filled, r.size = size, 0, 0
	s.budget.begin(r)
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
// most the frame. The added capacity is taken from the in-flight budget first, which may wait
// there (budget.go). It returns false when the budget is exhausted by frames in transit
// alone; the caller then closes the connection (its partial frame is dropped by markClosed).
func (s *Server) growFrame(r *request, avail int) bool {
	have := 0
	if r.buf != nil {
		have = len(*r.buf)
	}
	if r.filled < have {
		return true
	}
	n := min(r.want, max(frameGrowth*have, r.filled+avail, initialFrameBuf))
	if !s.budget.grow(r, int64(bufCap(n))-r.size, r.filled+avail >= r.want) {
		s.refused(r.c.remote, "in-flight budget exhausted by requests still arriving", "frame", r.want, "budget", s.cfg.InflightBudget)
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

// enqueue hands a complete frame to the connection's worker. false: the connection was closed
// for sending while throttled (quotas.go), and the caller stops reading it.
func (c *conn) enqueue(r *request) bool {
	c.s.arrived(r)
	c.pending.Add(1)
	r.queued = true
	queued := c.queuedBytes.Add(r.size)
	c.qmu.Lock()
	c.queue = append(c.queue, r)
	start := !c.running
	c.running = true
	c.qmu.Unlock()
	if start {
		go c.work()
	}
	if m := c.mutedUntil.Load(); m != 0 && queued > c.s.cfg.InflightBudget/4 && m > time.Now().UnixNano() {
		// What it queued is handled as for any closed connection: Produce committed, the
		// rest dropped (quotas.go). The caller stops reading it.
		c.s.refused(c.remote, "closing connection: it keeps sending while throttled by a quota")
		c.close()
		return false
	}
	return true
}

// work handles queued requests in order and exits when the queue is empty. Requests of a
// connection that is gone are dropped here, unhandled, except Produce (see conn).
func (c *conn) work() {
	for {
		c.qmu.Lock()
		if c.qhead == len(c.queue) {
			c.queue, c.qhead = c.queue[:0], 0
			c.running = false
			c.qmu.Unlock()
			return
		}
		r := c.queue[c.qhead]
		c.queue[c.qhead] = nil
		c.qhead++
		c.qmu.Unlock()
		if m := c.mutedUntil.Load(); m != 0 {
			c.waitMuted(m)
		}
		if c.gone.Load() && !isProduceFrame(r) {
			c.s.finish(r, nil)
			continue
		}
		c.s.handle(r)
	}
}

// isProduceFrame tells from the api key at the head of the frame (frames are at least 8
// bytes) whether r is a Produce request. A raw SASL token has no header; on a gone connection
// it may pass as one, which is harmless: handle serves it as a token.
func isProduceFrame(r *request) bool {
	return binary.BigEndian.Uint16(*r.buf) == produceKey
}

// reply fills r's slot (out == nil: nothing to write) and writes every reply that is now
// next in order.
func (c *conn) reply(seq uint64, out *outBuf) {
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
	// Writes are queued to the loop while wmu is held, so they reach the socket in order.
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
	c.pending.Add(-int64(n))
	c.lastActive.Store(c.s.clock.Load())
	if c.gone.Load() || len(outs) == 0 {
		for _, o := range outs {
			putOut(o)
		}
		clear(c.outs)
		c.wmu.Unlock()
		return
	}
	if m := c.s.m; m != nil {
		n := 0
		for _, o := range outs {
			n += len(o.b)
		}
		m.Sent(n)
	}
	var err error
	var multi []*outBuf
	if len(outs) == 1 {
		err = c.gc.AsyncWrite(outs[0].b, outs[0].written)
	} else {
		// Several replies became writable at once (an earlier slow one finished): one writev.
		multi = append([]*outBuf(nil), outs...)
		bs := make([][]byte, len(multi))
		for j, o := range multi {
			bs[j] = o.b
		}
		err = c.gc.AsyncWritev(bs, func(gnet.Conn, error) error {
			for _, o := range multi {
				putOut(o)
			}
			return nil
		})
	}
	if err != nil {
		// The loop is gone (shutdown); the callback will not run.
		for _, o := range outs {
			putOut(o)
		}
	}
	clear(c.outs)
	c.wmu.Unlock()
}

// arrived counts a complete frame (metrics) and stamps when it arrived.
func (s *Server) arrived(r *request) {
	if m := s.m; m != nil {
		r.start = time.Now()
		m.Received(4 + r.want)
	}
}

// markClosed runs once when the connection has closed: on its loop in OnClose, or on the
// stream reader as it ends (the owners of partial). What may still run for it: see conn.
func (c *conn) markClosed() {
	c.gone.Store(true)
	close(c.done)
	// gone is set before wmu is taken: a reply holding wmu now may still queue its write (the
	// transport drops it), and every later one sees gone and drops its output.
	c.wmu.Lock()
	for _, sl := range c.slots {
		if sl.out != nil {
			putOut(sl.out)
		}
	}
	c.slots = nil
	c.wmu.Unlock()
	if c.partial != nil {
		r := c.partial
		c.partial = nil
		c.s.budget.complete(r)
		c.s.release(r)
	}
}

// close closes the connection from a worker (protocol error). Later replies are dropped.
func (c *conn) close() { _ = c.gc.Close() }

// release returns a finished request's buffer and budget. Its reply slot must have been
// filled already. Every request passes here exactly once, which is where metrics count it.
func (s *Server) release(r *request) {
	if r.served {
		if m := s.m; m != nil {
			m.Done(r.hdr.APIKey, time.Since(r.start))
		}
		r.served = false
	}
	s.budget.release(r.size)
	if r.queued {
		r.c.queuedBytes.Add(-r.size)
		r.queued = false
	}
	if r.buf != nil {
		putBuf(r.buf)
	}
	r.buf = nil
	r.c = nil
	requestPool.Put(r)
	s.inflight.Add(-1)
}

// finish fills r's reply slot with out (nil: no reply) and releases r.
func (s *Server) finish(r *request, out *outBuf) {
	r.c.reply(r.seq, out)
	s.release(r)
}

// newReply starts a reply frame: length placeholder and response header.
func newReply(correlationID int32, flexible bool, sizeHint int) *outBuf {
	out := getOut(sizeHint)
	out.b = wire.AppendResponseHeader(out.b, correlationID, flexible)
	return out
}
