package transport

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/panjf2000/gnet/v2"
)

// GnetConfig is one gnet listener.
type GnetConfig struct {
	Name    string // in logs and ListenerState
	Addr    string // host:port (port 0 picks one)
	Workers int    // event loops; 0: one per CPU
	// Booted, when set, is called with the bound address before any connection is served (a
	// handler may then read what it settles without a lock); an error closes the listener and
	// ServeGnet returns it.
	Booted func(addr *net.TCPAddr) error
}

// Gnet is a listener served by gnet's event loops: framing runs on the loop of each
// connection, and the loop owns the framing state (Conn.partial, Conn.nextSeq).
//
// gnet runs as a client engine (gnet.NewClient: event loops and no listener of its own), and
// the listener is the transport's: its acceptor (accept.go) accepts each connection and
// enrolls it into a loop (Client.EnrollContext duplicates the descriptor into the loop's
// poller, runs OnOpen on the loop and waits for it, and closes the duplicate's original). So an
// accept error, which would shut gnet's own engine down with every connection on it, never
// reaches gnet.
type Gnet struct {
	gnet.BuiltinEventEngine

	t    *Transport
	h    Handler
	cfg  GnetConfig
	cli  *gnet.Client
	nl   net.Listener
	acc  *acceptor
	addr *net.TCPAddr
}

// ServeGnet listens on cfg.Addr and serves it with h until Stop. It returns once the listener
// is bound (and Booted has run).
func (t *Transport) ServeGnet(h Handler, cfg GnetConfig) (*Gnet, error) {
	g := &Gnet{t: t, h: h, cfg: cfg}
	if g.cfg.Name == "" {
		g.cfg.Name = "gnet"
	}
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{t.log}),
	}
	if cfg.Workers > 0 {
		opts = append(opts, gnet.WithNumEventLoop(cfg.Workers))
	}
	// net.Listen sets SO_REUSEADDR, as gnet.WithReuseAddr did.
	nl, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	g.nl = nl
	g.addr = nl.Addr().(*net.TCPAddr)
	if cfg.Booted != nil {
		if err := cfg.Booted(g.addr); err != nil {
			nl.Close()
			return nil, err
		}
	}
	cli, err := gnet.NewClient(g, opts...)
	if err == nil {
		err = cli.Start()
	}
	if err != nil {
		nl.Close()
		return nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	g.cli = cli
	g.acc = t.startAcceptor(g.cfg.Name, nl, func(nc net.Conn) error {
		_, err := cli.EnrollContext(nc, nil) // closes nc, whatever it answers
		return err
	})
	return g, nil
}

// Addr is the bound address.
func (g *Gnet) Addr() *net.TCPAddr { return g.addr }

// Stop closes the listener, then stops the event loops (closing every connection) and waits
// for them.
func (g *Gnet) Stop() error {
	g.acc.close()
	return g.cli.Stop()
}

// OnOpen makes the connection and asks the handler; while draining, or refused, it is closed
// at once (and gets no context, so OnClose skips it).
func (g *Gnet) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	if g.t.draining.Load() {
		return nil, gnet.Close
	}
	remote := ""
	if a := gc.RemoteAddr(); a != nil {
		remote = a.String() // RemoteAddr may be called only here, on the loop
	}
	c := g.t.newConn(gc, remote, g.h)
	c.gnet = true
	c.fd = gc.Fd()
	state, ok := g.h.Open(c)
	if !ok {
		return nil, gnet.Close
	}
	c.state = state
	gc.SetContext(c)
	return nil, gnet.None
}

// OnClose marks the connection closed; see the package comment for what of it may still run.
func (g *Gnet) OnClose(gc gnet.Conn, _ error) gnet.Action {
	if c, ok := gc.Context().(*Conn); ok {
		c.markClosed()
		g.h.Closed(c)
	}
	return gnet.None
}

// OnTraffic frames requests; see Conn.feed.
func (g *Gnet) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.Close
	}
	c.setSockOut(int64(gc.OutboundBuffered()))
	if c.pumpLive {
		if c.pump(gc, nil); c.gone.Load() {
			return gnet.None // a write failed and closed it
		}
	}
	switch c.feed(gc) {
	case closeConn:
		return gnet.Close
	case hold:
		// gnet reads on regardless: what waits unframed is charged, and bounded.
		if !c.holdInbound(int64(gc.InboundBuffered())) {
			return gnet.Close
		}
		if c.unwritten.Load() > maxUnwritten {
			// Held by its output: while a poll is armed, the write that takes that output
			// under maxUnwritten wakes it at once (tookOutput), also when gnet's buffer is
			// left empty and nothing else would look again.
			c.pollOutput()
		}
	default:
		c.unholdInbound()
	}
	if c.sockOut.Load() > 0 {
		c.pollOutput() // look again soon: what gnet's buffer holds is counted as last seen
	}
	return gnet.None
}

type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(string, ...any)    {}
func (g gnetLogger) Infof(string, ...any)     {}
func (g gnetLogger) Warnf(f string, a ...any) { g.l.Warn(fmt.Sprintf("gnet: "+f, a...)) }
func (g gnetLogger) Errorf(f string, a ...any) {
	g.l.Error(fmt.Sprintf("gnet: "+f, a...))
}
func (g gnetLogger) Fatalf(f string, a ...any) {
	g.l.Error(fmt.Sprintf("gnet: "+f, a...))
	panic(fmt.Sprintf("gnet: "+f, a...))
}
