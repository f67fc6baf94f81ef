package conn

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"inlet/auth"
	"inlet/transport"
)

// Conn is Inlet's state of one client connection: the transport.Conn's state (Handler.Open's
// answer), made when the connection opens and never pooled or reused, so a request's
// connection stays valid for as long as the request exists, also after the connection has
// closed. How bytes reach it and replies leave it, the budget, and what of a connection may
// run after its close: package transport (its package comment).
//
// Framing runs on the connection's gnet loop (or stream reader); everything else runs on a
// worker goroutine that exists while the connection has queued requests, so requests of one
// connection are decoded and submitted in arrival order (idempotent sequences depend on it)
// and CRC checks, decoding and long polls never run on a loop.
//
// When the connection closes, requests read whole may still be queued for the worker, waiting
// in the batch log, or parked in a long poll (Done ends it): the Handler still serves them
// (package server commits a Produce among them, as Kafka processes every request it has read,
// and drops any other), and the transport drops every reply of a gone connection. Each
// request releases its buffer and budget exactly once (the Handler's Release).
type Conn struct {
	n *Node
	t *transport.Conn // replies, close, whether it is gone
	l *listener       // the listener it arrived on; nil for one no listener serves (benchmarks)
	// sec is the connection's SASL and authorization state (security.go); nil on a listener
	// without security, which then pays nothing for it. Only the worker touches it (and the
	// stream reader, after a TLS handshake, before the first frame).
	sec    *Security
	remote string          // the peer's address (t.Remote())
	ip     string          // remote without the port: the key of max.connections.per.ip
	done   <-chan struct{} // t.Done(): closed when the connection has closed

	// saslPending is set on a SASL listener until authentication succeeds: while it is, frames
	// are capped at sasl.server.max.receive.size (t.SetMaxFrame). Set at open, cleared by the
	// worker.
	saslPending atomic.Bool
	// user is the name of the configured user the connection authenticated as (SASL, or a
	// TLS certificate naming one); nil until then. Read by CloseUserConns.
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
	queue   []queued // queue[qhead:] waits for the worker
	qhead   int
	running bool
}

// queued is a complete frame waiting for the worker, and when it arrived (with metrics only).
type queued struct {
	t       *transport.Request
	arrived time.Time
}

// Handler serves the requests of every connection (package server).
type Handler interface {
	// Holds tells whether a request of api key may wait on other clients or a timer (a long
	// poll): its connection is then not read until it is answered (endpoint.Frame).
	Holds(apiKey int16) bool
	// Serve handles one request of c on c's worker, in arrival order; arrived is when its
	// last byte was read (zero without metrics). It answers or drops t, and releases it
	// through Release, possibly later and from another goroutine.
	Serve(c *Conn, t *transport.Request, arrived time.Time)
}

// NewConn is the state of a connection no listener serves: one made by transport.NewConn, as
// the Handler's benchmarks drive it (Secure gives it a principal).
func (n *Node) NewConn(t *transport.Conn) *Conn { return n.newConn(t, nil) }

func (n *Node) newConn(t *transport.Conn, l *listener) *Conn {
	c := &Conn{n: n, t: t, l: l, done: t.Done()}
	c.remote = t.Remote()
	c.ip = hostOf(c.remote)
	if l != nil && l.sasl {
		c.saslPending.Store(true)
		t.SetMaxFrame(n.cfg.SaslServerMaxReceiveSize)
		t.SetPreAuth(true) // charged to sasl.server.max.inflight.bytes until authenticated
	}
	if l != nil {
		c.sec = newSecurity(&l.Listener, l.sasl, nil)
	}
	return c
}

// T is the connection's transport side: replies, close, whether it is gone.
func (c *Conn) T() *transport.Conn { return c.t }

// Remote is the peer's address.
func (c *Conn) Remote() string { return c.remote }

// IP is the peer's address without the port.
func (c *Conn) IP() string { return c.ip }

// Done is closed when the connection has closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Security is the connection's SASL and authorization state; nil on a listener without
// security whose clients are unrestricted.
func (c *Conn) Security() *Security { return c.sec }

// Advertised is the broker address Metadata gives the client: its listener's.
func (c *Conn) Advertised() (string, int32) {
	if c.l != nil && c.l.advHost != "" {
		return c.l.advHost, c.l.advPort
	}
	return c.n.advHost, c.n.advPort
}

// Unqueue uncounts size bytes of a request read whole, once it no longer holds them
// (released, or shed before a long poll).
func (c *Conn) Unqueue(size int64) { c.queuedBytes.Add(-size) }

// endpoint is the transport.Handler of one listener: the connection limits, security and the
// worker of every connection that arrives on it.
type endpoint struct {
	n *Node
	l *listener
}

var _ transport.Handler = (*endpoint)(nil)

// Open admits a connection against the connection limits (limits.go); while draining, none.
func (e *endpoint) Open(t *transport.Conn) (any, bool) {
	n := e.n
	if n.draining.Load() {
		return nil, false
	}
	c := n.newConn(t, e.l)
	if !n.admitConn(c, e.l) {
		return nil, false
	}
	return c, true
}

// Secured sets a TLS connection's principal from its client certificate (certPrincipal).
func (e *endpoint) Secured(t *transport.Conn, st tls.ConnectionState) {
	n, c := e.n, t.State().(*Conn)
	certPrincipal, certUser := n.certPrincipal(e.l, st)
	c.Secure(&e.l.Listener, certPrincipal, certUser)
}

// Secure sets the connection's principal as a connection arriving on l with the verified
// client certificate cert has it (nil: none): the listener's anonymous principal without a
// certificate; certUser names the configured user the certificate names ("" for none), whose
// prefixes it then follows.
func (c *Conn) Secure(l *Listener, cert *auth.Principal, certUser string) {
	c.sec = newSecurity(l, isSASL(l.Protocol), cert)
	if certUser != "" && c.sec != nil && c.sec.principal == cert {
		c.sec.user = certUser
		c.user.Store(&certUser)
	}
}

// Frame queues a complete frame for the connection's worker. A request that may wait on
// other clients or a timer (a Fetch long poll, JoinGroup and SyncGroup waiting for the
// group: Handler.Holds) holds its connection: nothing behind it is read until it is
// answered, as Kafka reads a connection's next request only once the last is answered
// (SocketServer mutes the channel), so a parked request cannot keep what its connection
// sends next in the budget.
func (e *endpoint) Frame(t *transport.Request) bool {
	c := t.Conn().State().(*Conn)
	if e.n.h.Holds(int16(binary.BigEndian.Uint16(t.Bytes()))) { // frames are at least minFrame bytes
		t.HoldConn()
	}
	return c.enqueue(t)
}

// Refused counts and logs a connection the transport closes: a bad length prefix (Kafka's
// InvalidReceiveException; a request header is at least api key, version and correlation id,
// 8 bytes, and a frame may not exceed socket.request.max.bytes, or before SASL authentication
// sasl.server.max.receive.size), or the budget exhausted by frames still arriving.
func (e *endpoint) Refused(t *transport.Conn, why transport.Refusal, size, limit int) {
	n, c := e.n, t.State().(*Conn)
	switch {
	case why == transport.Budget:
		n.refused(c.remote, "in-flight budget exhausted by requests still arriving", "frame", size, "budget", limit)
	case why == transport.Held:
		n.refused(c.remote, "closing connection: it keeps sending while its replies are unread or a long poll is outstanding", "unframed", size, "max", limit)
	case c.saslPending.Load() && size > limit:
		n.badFrames.Add(1)
		n.refused(c.remote, "request larger than sasl.server.max.receive.size before authentication", "size", size, "max", limit)
	default:
		n.badFrames.Add(1)
		n.refused(c.remote, "bad request size", "size", size, "max", limit)
	}
}

// Closed uncounts the connection (limits.go).
func (e *endpoint) Closed(t *transport.Conn) { e.n.dropConn(t.State().(*Conn)) }

// minFrame is the smallest request frame: api key, version and correlation id.
const minFrame = 8

// enqueue hands a complete frame to the connection's worker. false: the connection was closed
// for sending while throttled (quotas.go), and the transport stops reading it.
func (c *Conn) enqueue(t *transport.Request) bool {
	q := queued{t: t}
	if m := c.n.m; m != nil {
		// A complete frame, counted (metrics) and stamped with when it arrived.
		q.arrived = time.Now()
		m.Received(4 + len(t.Bytes()))
	}
	queuedNow := c.queuedBytes.Add(t.Size())
	c.qmu.Lock()
	c.queue = append(c.queue, q)
	start := !c.running
	c.running = true
	c.qmu.Unlock()
	if start {
		go c.work()
	}
	if m := c.mutedUntil.Load(); m != 0 && queuedNow > c.n.cfg.InflightBudget/4 && m > time.Now().UnixNano() {
		// What it queued is handled as for any closed connection: Produce committed, the
		// rest dropped (quotas.go). The transport stops reading it.
		c.n.refused(c.remote, "closing connection: it keeps sending while throttled by a quota")
		c.Close()
		return false
	}
	return true
}

// work hands queued requests to the Handler in order and exits when the queue is empty.
func (c *Conn) work() {
	for {
		c.qmu.Lock()
		if c.qhead == len(c.queue) {
			c.queue, c.qhead = c.queue[:0], 0
			c.running = false
			c.qmu.Unlock()
			return
		}
		q := c.queue[c.qhead]
		c.queue[c.qhead] = queued{}
		c.qhead++
		c.qmu.Unlock()
		if m := c.mutedUntil.Load(); m != 0 {
			c.waitMuted(m)
		}
		c.n.h.Serve(c, q.t, q.arrived)
	}
}

// Close closes the connection from a worker (a protocol error). Later replies are dropped.
func (c *Conn) Close() { c.t.Close() }

// ProtocolError counts a request that breaks the protocol (the first tier of errors: the
// stream cannot be trusted any more), logs a short description with a quoted snippet of
// frame, once per kind and address a minute (limits.go: a client that reconnects and repeats
// itself does not flood the log), and closes the connection.
func (c *Conn) ProtocolError(what string, err error, frame []byte) {
	c.n.badFrames.Add(1)
	snippet := frame
	if len(snippet) > 32 {
		snippet = snippet[:32]
	}
	c.n.refused(c.remote, "closing connection: "+what, "err", err, "frame", fmt.Sprintf("%q", snippet))
	c.Close()
}
