// Package conn is Inlet's connection policy, on the hooks of package transport: the listeners
// (a gnet listener and stream listeners for TLS), each connection's worker, the connection
// limits and the idle reaper, SASL state and its limits, TLS principals, and the quota
// throttles that mute a connection. The Kafka APIs themselves are package server's: the worker
// hands each request to a Handler.
//
// Path: a back-end of package transport frames a request into a pooled buffer -> the
// listener's endpoint (conn.go: Frame) queues it for the connection's worker -> the worker,
// once a throttle has passed (quotas.go), hands it to the Handler in arrival order -> the
// Handler answers through the transport. Before authentication on a SASL listener the
// Handler asks the connection's Security (security.go) what may be served.
//
// Files: node.go (Node: start, drain, close, what metrics read), conn.go (Conn, the endpoint
// and the worker), limits.go (connection limits, refusal logging, the reaper),
// listeners.go (Listener and their setup), tls.go (stream listeners, certificate
// principals), security.go (SASL state and exchanges), sasl_limits.go (PLAIN's per-address
// attempt buckets), quotas.go (throttles and muting).
//
// Lock order: a connection's qmu, the connection table's mu (limits.go) and the attempt
// buckets' mu (sasl_limits.go) are each held alone, never while taking another lock.
package conn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"inlet/auth"
	"inlet/metrics"
	"inlet/quota"
	"inlet/transport"
)

// Config is the connection policy's settings, Kafka's broker configs where Kafka has them.
// Package server fills it from its own Config, defaults applied.
type Config struct {
	Listen          string // host:port of the default listener (port 0 picks one)
	Advertise       string // host:port put in Metadata; default the bound address
	Workers         int    // gnet event loops; default the number of CPUs
	MaxRequestBytes int    // socket.request.max.bytes: the largest frame accepted
	InflightBudget  int64  // bytes read but not yet answered
	Logger          *slog.Logger

	// Listeners empty: one PLAINTEXT listener on Listen/Advertise whose clients are
	// unrestricted.
	Listeners       []Listener
	Users           *auth.Users   // SASL users; also names the principals of TLS client certificates
	SessionLifetime time.Duration // KIP-368: SASL sessions expire after this (0: never)
	Quotas          *quota.Manager

	MaxConnections               int            // max.connections
	MaxConnectionCreationRate    float64        // max.connection.creation.rate (KIP-612), per second; 0: none
	MaxConnectionsPerIP          int            // max.connections.per.ip
	MaxConnectionsPerIPOverrides map[string]int // max.connections.per.ip.overrides
	ConnectionsMaxIdle           time.Duration  // connections.max.idle.ms; negative: off
	SaslServerMaxReceiveSize     int            // sasl.server.max.receive.size
	SaslServerMaxInflightBytes   int64          // the pre-authentication in-flight budget
	FailedAuthenticationDelay    time.Duration  // connection.failed.authentication.delay.ms

	Metrics *metrics.Requests // nil: nothing counted
}

// Node is one Inlet node's connections: its listeners, its transport and the state the
// policy keeps across connections.
type Node struct {
	cfg Config
	log *slog.Logger
	h   Handler
	tr  *transport.Transport // framing, the in-flight budget, ordered replies, both back-ends
	m   *metrics.Requests    // Config.Metrics; nil: none

	gnet      *transport.Gnet // serves gnetL; nil when every listener is a stream listener
	addr      *net.TCPAddr
	advHost   string
	advPort   int32
	draining  atomic.Bool
	drainCh   chan struct{} // closed when draining starts: wakes long polls and muted workers
	badFrames atomic.Int64

	clock      atomic.Int64 // coarse unix nanoseconds, ticked by the reaper (limits.go)
	connTab    connTable
	reaperStop chan struct{}
	reaperDone chan struct{}

	plainAttempts attemptBuckets // failed SASL PLAIN derivations per address (sasl_limits.go)

	gnetL   *listener   // the listener gnet serves (nil: every listener is a stream listener)
	streams []*listener // listeners served a goroutine per connection (tls.go)
}

// New checks the listeners of cfg and makes the transport; nothing is served before Start.
func New(cfg Config, h Handler) (*Node, error) {
	n := &Node{cfg: cfg, log: cfg.Logger, h: h, m: cfg.Metrics, drainCh: make(chan struct{})}
	n.tr = n.newTransport()
	if err := n.setupListeners(); err != nil {
		return nil, err
	}
	n.connTab.init()
	n.clock.Store(time.Now().UnixNano())
	return n, nil
}

// Start starts the reaper and serves every listener. It returns once they are bound.
func (n *Node) Start() error {
	n.reaperStop, n.reaperDone = make(chan struct{}), make(chan struct{})
	go n.reap(n.reaperStop, n.reaperDone)
	if n.gnetL == nil {
		if err := n.startStreams(); err != nil {
			n.stopReaper()
			return err
		}
		n.addr = n.streams[0].addr.(*net.TCPAddr)
		return nil
	}
	var bootErr error // the advertised address's, from gnetBooted
	g, err := n.tr.ServeGnet(&endpoint{n, n.gnetL}, transport.GnetConfig{
		Name:    n.gnetL.Name,
		Addr:    n.cfg.Listen, // setupListeners' choice: the first plaintext listener's address
		Workers: n.cfg.Workers,
		Booted:  func(addr *net.TCPAddr) error { bootErr = n.gnetBooted(addr); return bootErr },
	})
	if err != nil {
		n.stopReaper()
		if bootErr != nil {
			return bootErr
		}
		return fmt.Errorf("server: %w", err)
	}
	n.gnet = g
	n.log.Info("listening", "listener", n.gnetL.Name, "protocol", n.gnetL.Protocol, "addr", n.addr.String(), "advertise", net.JoinHostPort(n.advHost, strconv.Itoa(int(n.advPort))), "workers", n.cfg.Workers)
	if err := n.startStreams(); err != nil {
		_ = g.Stop()
		n.stopReaper()
		return err
	}
	return nil
}

// newTransport is the transport every listener of n shares: the in-flight budget, frames of 8
// bytes (a request header's api key, version and correlation id) up to
// socket.request.max.bytes (SASL listeners lower it per connection: NewConn), activity
// stamped with the reaper's clock (limits.go).
func (n *Node) newTransport() *transport.Transport {
	tc := transport.Config{
		Budget:        n.cfg.InflightBudget,
		PreAuthBudget: n.cfg.SaslServerMaxInflightBytes,
		MaxFrame:      n.cfg.MaxRequestBytes,
		MinFrame:      minFrame,
		Clock:         n.clock.Load,
		Logger:        n.log,

		MaxConnectionRate: n.cfg.MaxConnectionCreationRate,
	}
	if n.m != nil {
		tc.Sent = n.m.Sent
		tc.ListenerEvent = n.m.ListenerEvent
		tc.AcceptThrottled = n.m.AcceptThrottled
	}
	return transport.New(tc)
}

// Transport is the transport the node's listeners share.
func (n *Node) Transport() *transport.Transport { return n.tr }

// gnetBooted records the bound address of the gnet listener and settles the advertised one.
// The transport calls it before the event loops start, so no connection (Metadata reads
// advHost and advPort without a lock) can be served before they are set: clients already
// queued on the listener, as after a restart, are served the moment the loops start.
func (n *Node) gnetBooted(addr *net.TCPAddr) error {
	n.addr = addr
	adv := n.cfg.Advertise
	if adv == "" {
		adv = n.addr.String()
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return fmt.Errorf("server: --advertise %q: %w", adv, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("server: --advertise %q: bad port", adv)
	}
	n.advHost, n.advPort = host, int32(p)
	n.gnetL.addr, n.gnetL.advHost, n.gnetL.advPort = n.addr, n.advHost, n.advPort
	return nil
}

// Addr is the bound address of the default listener.
func (n *Node) Addr() string { return n.addr.String() }

// Draining tells whether Drain has begun.
func (n *Node) Draining() bool { return n.draining.Load() }

// DrainStarted is closed when Drain begins: long polls and group waits end early.
func (n *Node) DrainStarted() <-chan struct{} { return n.drainCh }

// Drain stops reading new requests and refuses new connections, and waits until every
// request already read has been answered (or ctx ends).
func (n *Node) Drain(ctx context.Context) error {
	if n.draining.CompareAndSwap(false, true) {
		close(n.drainCh)
	}
	n.tr.Drain()
	// Wait for the frames in flight. A polled counter rather than a WaitGroup: a loop may
	// start a frame at the moment draining begins, and a WaitGroup forbids an Add from zero
	// concurrent with Wait (the race detector reports it: crashtest's SIGTERM tests under
	// -race). The transport counts a frame before it checks draining, and Drain is called
	// before the count is read here, so a frame is either waited for or never started.
	var err error
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for err == nil && n.tr.InFlight() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			err = fmt.Errorf("server: drain: %w", ctx.Err())
		}
	}
	if err == nil {
		// Replies are queued to the loops with AsyncWritev; give them a moment to reach the
		// sockets before the loops close the connections.
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Close closes the listeners and every connection, and stops the reaper.
func (n *Node) Close() error {
	n.closeStreams()
	n.stopReaper()
	if n.gnet == nil {
		return nil
	}
	if err := n.gnet.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func (n *Node) stopReaper() {
	close(n.reaperStop)
	<-n.reaperDone
}

// InflightBudget is the budget's bytes held now and its limit.
func (n *Node) InflightBudget() (used, limit int64) {
	return n.tr.BudgetHeld(), n.cfg.InflightBudget
}

// OpenConnections counts open client connections by listener name.
func (n *Node) OpenConnections() map[string]int {
	out := map[string]int{}
	if n.gnetL != nil {
		out[n.gnetL.Name] = 0
	}
	for _, l := range n.streams {
		out[l.Name] = 0
	}
	t := &n.connTab
	t.mu.Lock()
	for c := range t.all {
		if c.l != nil {
			out[c.l.Name]++
		}
	}
	t.mu.Unlock()
	return out
}

// Listeners is the state of every listener's acceptor (accept errors, whether it is serving).
func (n *Node) Listeners() []transport.ListenerState { return n.tr.Listeners() }

// Refusals counts refused or closed connections by reason since start.
func (n *Node) Refusals() map[string]int64 {
	t := &n.connTab
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.refused))
	for r, k := range t.refused {
		out[r] = k
	}
	return out
}

// ProtocolErrors counts connections closed for a bad frame since start.
func (n *Node) ProtocolErrors() int64 { return n.badFrames.Load() }
