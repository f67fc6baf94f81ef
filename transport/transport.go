// Package transport moves the bytes of a length-prefixed request/reply protocol (Kafka's) between
// sockets and a Handler: framing, the in-flight byte budget, pooled request and reply buffers,
// replies in request order, and two back-ends: gnet event loops (gnet.go) and a goroutine pair
// per net.Conn for TLS and other listeners (stream.go). The handler sees whole frames
// (Request), answers them (Request.Reply, Request.Skip), releases them (Request.Release), and
// may close a connection; it never learns how the bytes moved.
//
// Ownership and lifetimes (DESIGN.md, "Connections"):
//   - A Conn is the transport's own struct, one per connection, never pooled or reused, so a
//     request's Conn stays a valid pointer for as long as the request exists, also after the
//     connection has closed. The handler's per-connection state (Handler.Open's answer) is
//     held by it and has the same life.
//   - The socket under it (gnet's Conn, or a streamConn) is not: gnet releases its Conn at
//     OnClose, and its methods other than AsyncWrite, AsyncWritev and Close may be called
//     only on its loop. So nothing but the framing code (on the loop, or the stream reader)
//     touches the socket except through those three calls (Writer), which are safe from any
//     goroutine and after a close; the peer's address is copied into the Conn at open.
//   - When the connection closes (OnClose, or the stream reader's end) markClosed runs once,
//     on the goroutine that owns the framing state: it sets gone, closes done (which ends a
//     handler's long poll: Conn.Done), drops every reply slot and the frame still arriving
//     (returning its budget); then Handler.Closed runs. Requests that were read whole may
//     still be with the handler: what it does with them is its own (Inlet still commits a
//     Produce, since Kafka processes every request it has read and an acks=0 producer may
//     close right after writing, and drops any other unhandled), but every reply of a gone
//     connection is dropped by Reply, and each request still releases its buffer and budget
//     exactly once (Request.Release; a second call panics).
//
// Kafka clients require replies in request order per connection; gnet keeps none. Each request
// takes a sequence number when it is framed; a reply is written when every earlier one has
// been written or skipped (an acks=0 produce takes a slot that is never written: Skip).
package transport

import (
	"crypto/tls"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Config holds a Transport's settings.
type Config struct {
	// Budget bounds the bytes read and not yet released, and of replies not yet written
	// (budget.go); required.
	Budget int64
	// PreAuthBudget, when above 0, is a budget of its own for connections marked
	// Conn.SetPreAuth (Inlet: before SASL authentication), so they never take what
	// authenticated clients need.
	PreAuthBudget int64
	// MaxFrame is the largest frame a connection may send until Conn.SetMaxFrame says
	// otherwise; MinFrame the smallest (at least 1). A length prefix outside them closes the
	// connection before anything is allocated (Handler.Refused with FrameSize).
	MaxFrame, MinFrame int
	// Clock is a coarse clock (unix ns) connections stamp their activity with
	// (Conn.LastActive): one atomic load per read or reply instead of a time.Now. nil:
	// time.Now.
	Clock func() int64
	// Sent, when set, is told the bytes of replies handed to the socket (metrics).
	Sent   func(n int)
	Logger *slog.Logger // default slog.Default()

	// MaxConnectionRate is KIP-612's max.connection.creation.rate: connections accepted per
	// second at most, over every listener (accept.go); 0: no limit (Kafka's Long.MAX_VALUE).
	MaxConnectionRate float64
	// ListenerEvent, when set, is told when a listener starts serving (err nil), each accept
	// error (err set: the listener is not serving until it is told nil again), and when it
	// accepts again (accept.go).
	ListenerEvent func(listener string, err error)
	// AcceptThrottled, when set, is told each wait of an acceptor for MaxConnectionRate.
	AcceptThrottled func(d time.Duration)
}

// Handler is what a back-end calls for the connections it serves. Open, Secured, Frame and
// Refused run on the goroutine that owns the connection's framing (its gnet loop, or its
// stream reader), one connection's calls in order; Closed also runs there, once, last.
type Handler interface {
	// Open is called when a connection is accepted, before a TLS handshake; it returns the
	// connection's state (Conn.State), or false to refuse it: the connection is closed at
	// once and Closed is not called.
	Open(c *Conn) (state any, ok bool)
	// Secured is called on a TLS connection once its handshake is done, before its first
	// frame.
	Secured(c *Conn, st tls.ConnectionState)
	// Frame is handed each complete frame, in order. The handler must fill its slot (Reply or
	// Skip) and then Release it, exactly once each, from any goroutine. Frame runs on a loop
	// and may not wait on anything a loop does; false closes the connection (r is still the
	// handler's to answer and release).
	Frame(r *Request) bool
	// Refused is told why the transport closes c: a length prefix outside [MinFrame,
	// c.MaxFrame()] (size is the prefix, limit the maximum), or a frame the budget refused
	// (size is the frame's, limit the budget).
	Refused(c *Conn, why Refusal, size, limit int)
	// Closed is called once when c has closed (after markClosed: see the package comment).
	Closed(c *Conn)
}

// Refusal is why the transport closed a connection.
type Refusal int

const (
	FrameSize Refusal = iota // a length prefix out of bounds (Kafka's InvalidReceiveException)
	Budget                   // the budget is exhausted by frames still arriving (budget.go)
	Held                     // a held connection kept sending: over maxHeldInbound, or no budget for it
)

// Transport is the state every back-end's connections share: the budget, the count of frames
// in flight, and whether it drains.
type Transport struct {
	cfg      Config
	log      *slog.Logger
	budget   *budget
	preAuth  *budget // nil: pre-authentication frames share budget
	now      func() int64
	draining atomic.Bool
	inflight atomic.Int64 // frames read (or being read) and not yet released; see Drain

	// Stream back-end (stream.go).
	streamW   sync.WaitGroup
	streamMu  sync.Mutex
	live      map[*streamConn]struct{} // open stream connections, closed by CloseStreams
	listeners []*acceptor              // stream listeners' acceptors, closed by CloseStreams
	acceptors []*acceptor              // every listener's, for Listeners (accept.go)
	rate      *acceptRate              // MaxConnectionRate; nil: none
}

// New returns a Transport; serve connections with ServeGnet and ServeStream.
func New(cfg Config) *Transport {
	cfg.MinFrame = max(cfg.MinFrame, 1)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := &Transport{cfg: cfg, log: cfg.Logger, budget: newBudget(cfg.Budget), now: cfg.Clock, live: map[*streamConn]struct{}{}}
	if cfg.PreAuthBudget > 0 {
		t.preAuth = newBudget(cfg.PreAuthBudget)
	}
	t.rate = newAcceptRate(cfg.MaxConnectionRate, cfg.AcceptThrottled)
	if t.now == nil {
		t.now = func() int64 { return time.Now().UnixNano() }
	}
	return t
}

// Drain stops starting frames (a frame already started is read to its end: it is counted in
// InFlight) and accepting stream connections. A caller that drains reads InFlight after
// Drain: framing counts a frame before it checks draining, so every frame is either counted
// by then or never started.
func (t *Transport) Drain() { t.draining.Store(true) }

// InFlight counts frames read (or being read) and not yet released.
func (t *Transport) InFlight() int64 { return t.inflight.Load() }

// BudgetHeld is the budget's bytes held now (metrics).
func (t *Transport) BudgetHeld() int64 { return t.budget.held() }

// preAuthHeld is the pre-authentication budget's bytes held now (0 without one).
func (t *Transport) preAuthHeld() int64 {
	if t.preAuth == nil {
		return 0
	}
	return t.preAuth.held()
}
