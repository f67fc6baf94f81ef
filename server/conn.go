package server

import (
	"encoding/binary"
	"net"
	"sync"

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
type conn struct {
	s  *Server
	gc transport // replies, close and the peer's address
	l  *listener // the listener it arrived on; nil in benchmarks
	// sec is the connection's SASL and authorization state (security.go); nil on a listener
	// without security, which then pays nothing for it. Only the worker touches it.
	sec *connSecurity

	// loop-owned (stream connections: owned by their reader goroutine)
	loop gnet.Conn // nil for stream (TLS and extra) connections; see tls.go

	nextSeq uint64
	partial *request // a frame whose bytes have not all arrived yet
	filled  int      // bytes of partial's frame copied so far

	qmu     sync.Mutex
	queue   []*request // queue[qhead:] waits for the worker
	qhead   int
	running bool

	wmu      sync.Mutex
	writeSeq uint64
	slots    []slot    // slots[i] holds the reply of request writeSeq+i
	outs     []*outBuf // scratch for reply
	closed   bool
}

// transport is what the ordered-reply code needs of a connection. gnet.Conn satisfies it; so
// does streamConn (tls.go), which serves TLS listeners on crypto/tls with the same request
// handling. Callbacks are called with a nil gnet.Conn by streamConn; none here looks at it.
type transport interface {
	AsyncWrite(buf []byte, cb gnet.AsyncCallback) error
	AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error
	Close() error
	RemoteAddr() net.Addr
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
	size int64   // bytes held against the in-flight budget
	hdr  wire.RequestHeader

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

func newConn(s *Server, gc gnet.Conn) *conn {
	c := &conn{s: s, gc: gc, loop: gc, l: s.gnetL}
	c.sec = newConnSecurity(s, c.l, nil)
	return c
}

// frames copies every complete request out of gnet's buffer (and the start of an incomplete
// one into its own buffer, so gnet's buffer never has to hold a large frame) and queues it.
// It runs on the event loop; it may wait for in-flight budget, which is how backpressure
// reaches TCP.
//
// While draining no new frame is started, but a frame already started is read to its end:
// it holds an in-flight count that Shutdown waits for (crashtest's
// TestSigtermFinishesPartialRequest).
func (c *conn) frames() gnet.Action {
	s := c.s
	for {
		if c.partial != nil {
			frame := *c.partial.buf
			n, _ := c.loop.Read(frame[c.filled:])
			c.filled += n
			if c.filled < len(frame) {
				return gnet.None
			}
			r := c.partial
			c.partial = nil
			s.budget.complete(r.size)
			c.enqueue(r)
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
		// A request header is at least api key, version and correlation id (8 bytes). The
		// maximum is checked before anything is allocated (kafka-proxy's MaxRequestSize).
		if size < 8 || size > s.cfg.MaxRequestBytes {
			s.badFrames.Add(1)
			s.log.Warn("closing connection: bad request size", "remote", c.gc.RemoteAddr().String(), "size", size, "max", s.cfg.MaxRequestBytes)
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
		s.budget.acquirePartial(int64(4 + size))
		r := getRequest()
		r.c, r.seq, r.size = c, c.nextSeq, int64(4+size)
		c.nextSeq++
		r.buf = getBuf(size)
		c.partial, c.filled = r, 0
	}
}

func (c *conn) enqueue(r *request) {
	c.qmu.Lock()
	c.queue = append(c.queue, r)
	start := !c.running
	c.running = true
	c.qmu.Unlock()
	if start {
		go c.work()
	}
}

// work handles queued requests in order and exits when the queue is empty.
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
		c.s.handle(r)
	}
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
	if c.closed || len(outs) == 0 {
		for _, o := range outs {
			putOut(o)
		}
		clear(c.outs)
		c.wmu.Unlock()
		return
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

func (c *conn) markClosed() {
	c.wmu.Lock()
	c.closed = true
	for _, sl := range c.slots {
		if sl.out != nil {
			putOut(sl.out)
		}
	}
	c.slots = nil
	c.wmu.Unlock()
	// Requests already queued are still handled (a produce that was read is committed), but
	// their replies go nowhere; nothing new arrives after OnClose.
	if c.partial != nil {
		// OnClose runs on the loop, which owns partial.
		r := c.partial
		c.partial = nil
		c.s.budget.complete(r.size)
		c.s.release(r)
	}
}

// close closes the connection from a worker (protocol error). Later replies are dropped.
func (c *conn) close() { _ = c.gc.Close() }

// release returns a finished request's buffer and budget. Its reply slot must have been
// filled already.
func (s *Server) release(r *request) {
	s.budget.release(r.size)
	putBuf(r.buf)
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
