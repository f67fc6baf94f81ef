package kafka

import (
	"crypto/tls"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"inlet/transport"
	"inlet/wire"
)

// conn is Inlet's state of one client connection: the transport.Conn's state (Handler.Open's
// answer), made when the connection opens and never pooled or reused, so a request's r.c
// stays valid for as long as the request exists, also after the connection has closed. How
// bytes reach it and replies leave it, the budget, and what of a connection may run after its
// close: package transport (its package comment).
//
// Framing runs on the connection's gnet loop (or stream reader); everything else runs on a
// worker goroutine that exists while the connection has queued requests, so requests of one
// connection are decoded and submitted in arrival order (idempotent sequences depend on it)
// and CRC checks, decoding and long polls never run on a loop.
//
// When the connection closes, requests read whole may still be queued for the worker, waiting
// in the batch log, or parked in a long poll (t.Done() ends it): a Produce among them is still
// committed (Kafka processes every request it has read, and an acks=0 producer may close
// right after writing), any other is dropped unhandled by the worker, and the transport drops
// every reply of a gone connection. Each request releases its buffer and budget exactly once
// (Server.release).
type conn struct {
	s *Server
	t *transport.Conn // replies, close, whether it is gone
	l *listener       // the listener it arrived on; nil in benchmarks
	// sec is the connection's SASL and authorization state (security.go); nil on a listener
	// without security, which then pays nothing for it. Only the worker touches it (and the
	// stream reader, after a TLS handshake, before the first frame).
	sec    *connSecurity
	remote string          // the peer's address (t.Remote())
	ip     string          // remote without the port: the key of max.connections.per.ip
	done   <-chan struct{} // t.Done(): closed when the connection has closed

	// saslPending is set on a SASL listener until authentication succeeds: while it is, frames
	// are capped at sasl.server.max.receive.size (t.SetMaxFrame). Set at open, cleared by the
	// worker.
	saslPending atomic.Bool
	// user is the name of the configured user the connection authenticated as (SASL, or a
	// TLS certificate naming one); nil until then. Read by closeUserConns.
	user atomic.Pointer[string]
	// mutedUntil (unix ns; 0: not muted) is when a quota throttle ends: the worker handles
	// nothing more of the connection before it (quotas.go).
	mutedUntil atomic.Int64
	// quotaClient is the client id of the connection's last request that quotas counted
	// (quotaClientID): kept so that a client sending one id allocates it once.
	quotaClient atomic.Pointer[string]
	// queuedBytes is the budget held by requests read whole and not yet released: what a
	// muted connection may hold before it is closed (quotas.go).
	queuedBytes atomic.Int64

	qmu     sync.Mutex
	queue   []*request // queue[qhead:] waits for the worker
	qhead   int
	running bool
}

// request is one framed request (t: its bytes, connection and reply slot) and the state its
// handling reuses; pooled.
type request struct {
	t *transport.Request
	c *conn
	// queued: counted in c.queuedBytes (enqueue) until release.
	queued bool
	hdr    wire.RequestHeader

	// With metrics: when the frame's last byte arrived, and whether its API is known (handle
	// found it served), so release counts it under hdr.APIKey.
	start  time.Time
	served bool

	produce produceState
}

var requestPool = sync.Pool{New: func() any { return new(request) }}

func getRequest() *request {
	r := requestPool.Get().(*request)
	if r.produce.log.Completion == nil {
		// Set once per pooled request: the log tells r itself (Completed), no closure.
		r.produce.log.Completion = r
	}
	return r
}

// frame is r's bytes without the length prefix; valid until release.
func (r *request) frame() []byte { return r.t.Bytes() }

// newConn is the state of a connection arriving on l (nil in benchmarks).
func (s *Server) newConn(t *transport.Conn, l *listener) *conn {
	c := &conn{s: s, t: t, l: l, done: t.Done()}
	c.remote = t.Remote()
	c.ip = hostOf(c.remote)
	if l != nil && l.sasl {
		c.saslPending.Store(true)
		t.SetMaxFrame(s.cfg.SaslServerMaxReceiveSize)
		t.SetPreAuth(true) // charged to sasl.server.max.inflight.bytes until authenticated
	}
	c.sec = newConnSecurity(s, l, nil)
	return c
}

// endpoint is the transport.Handler of one listener: the connection limits, security and the
// worker of every connection that arrives on it.
type endpoint struct {
	s *Server
	l *listener
}

var _ transport.Handler = (*endpoint)(nil)

// Open admits a connection against the connection limits (limits.go); while draining, none.
func (e *endpoint) Open(t *transport.Conn) (any, bool) {
	s := e.s
	if s.draining.Load() {
		return nil, false
	}
	c := s.newConn(t, e.l)
	if !s.admitConn(c, e.l) {
		return nil, false
	}
	return c, true
}

// Secured sets a TLS connection's principal from its client certificate (certPrincipal).
func (e *endpoint) Secured(t *transport.Conn, st tls.ConnectionState) {
	s, c := e.s, t.State().(*conn)
	certPrincipal, certUser := s.certPrincipal(e.l, st)
	c.sec = newConnSecurity(s, e.l, certPrincipal)
	if certUser != "" && c.sec != nil && c.sec.principal == certPrincipal {
		// The certificate names a configured user: its prefixes follow the user's changes.
		c.sec.user = certUser
		c.user.Store(&certUser)
	}
}

// Frame queues a complete frame for the connection's worker. A request that may wait on
// other clients or a timer (a Fetch long poll, JoinGroup and SyncGroup waiting for the
// group) holds its connection: nothing behind it is read until it is answered, as Kafka
// reads a connection's next request only once the last is answered (SocketServer mutes the
// channel), so a parked request cannot keep what its connection sends next in the budget.
func (e *endpoint) Frame(t *transport.Request) bool {
	r := getRequest()
	r.t, r.c = t, t.Conn().State().(*conn)
	switch binary.BigEndian.Uint16(t.Bytes()) { // frames are at least minFrame bytes
	case fetchKey, joinGroupKey, syncGroupKey:
		t.HoldConn()
	}
	return r.c.enqueue(r)
}

// Refused counts and logs a connection the transport closes: a bad length prefix (Kafka's
// InvalidReceiveException; a request header is at least api key, version and correlation id,
// 8 bytes, and a frame may not exceed socket.request.max.bytes, or before SASL authentication
// sasl.server.max.receive.size), or the budget exhausted by frames still arriving.
func (e *endpoint) Refused(t *transport.Conn, why transport.Refusal, size, limit int) {
	s, c := e.s, t.State().(*conn)
	switch {
	case why == transport.Budget:
		s.refused(c.remote, "in-flight budget exhausted by requests still arriving", "frame", size, "budget", limit)
	case why == transport.Held:
		s.refused(c.remote, "closing connection: it keeps sending while its replies are unread or a long poll is outstanding", "unframed", size, "max", limit)
	case c.saslPending.Load() && size > limit:
		s.badFrames.Add(1)
		s.refused(c.remote, "request larger than sasl.server.max.receive.size before authentication", "size", size, "max", limit)
	default:
		s.badFrames.Add(1)
		s.refused(c.remote, "bad request size", "size", size, "max", limit)
	}
}

// Closed uncounts the connection (limits.go).
func (e *endpoint) Closed(t *transport.Conn) { e.s.dropConn(t.State().(*conn)) }

// minFrame is the smallest request frame: api key, version and correlation id.
const minFrame = 8

// enqueue hands a complete frame to the connection's worker. false: the connection was closed
// for sending while throttled (quotas.go), and the transport stops reading it.
func (c *conn) enqueue(r *request) bool {
	c.s.arrived(r)
	r.queued = true
	queued := c.queuedBytes.Add(r.t.Size())
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
		// rest dropped (quotas.go). The transport stops reading it.
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
		if c.t.Gone() && !isProduceFrame(r) {
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
	return binary.BigEndian.Uint16(r.frame()) == produceKey
}

// arrived counts a complete frame (metrics) and stamps when it arrived.
func (s *Server) arrived(r *request) {
	if m := s.m; m != nil {
		r.start = time.Now()
		m.Received(4 + len(r.frame()))
	}
}

// close closes the connection from a worker (protocol error). Later replies are dropped.
func (c *conn) close() { c.t.Close() }

// release returns a finished request's buffer and budget. Its reply slot must have been
// filled already. Every request passes here exactly once, which is where metrics count it.
func (s *Server) release(r *request) {
	if r.served {
		if m := s.m; m != nil {
			m.Done(r.hdr.APIKey, time.Since(r.start))
		}
		r.served = false
	}
	if r.queued {
		r.c.queuedBytes.Add(-r.t.Size())
		r.queued = false
	}
	r.t.Release()
	r.t, r.c = nil, nil
	requestPool.Put(r)
}

// shed gives back r's frame and budget before it waits (a Fetch long poll: its request is
// decoded, and nothing after reads the frame); see transport.Request.Shed.
func (s *Server) shed(r *request) {
	if r.queued {
		r.c.queuedBytes.Add(-r.t.Size())
		r.queued = false
	}
	r.hdr.ClientID = nil // aliased the frame
	r.t.Shed()
}

// finish fills r's reply slot with out (nil: no reply) and releases r.
func (s *Server) finish(r *request, out *transport.Out) {
	r.t.Reply(out)
	s.release(r)
}

// newReply starts a reply frame: length placeholder and response header.
func newReply(correlationID int32, flexible bool, sizeHint int) *transport.Out {
	out := transport.GetOut(sizeHint)
	out.B = wire.AppendResponseHeader(out.B, correlationID, flexible)
	return out
}
