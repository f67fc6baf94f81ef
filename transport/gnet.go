package transport

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// GnetConfig is one gnet listener.
type GnetConfig struct {
	Addr    string // host:port (port 0 picks one)
	Workers int    // event loops; 0: one per CPU
	// Booted, when set, is called with the bound address before any connection is served (a
	// handler may then read what it settles without a lock); an error stops the engine and
	// ServeGnet returns it.
	Booted func(addr *net.TCPAddr) error
}

// Gnet is a listener served by gnet's event loops: framing runs on the loop of each
// connection, and the loop owns the framing state (Conn.partial, Conn.nextSeq).
type Gnet struct {
	gnet.BuiltinEventEngine

	t       *Transport
	h       Handler
	cfg     GnetConfig
	eng     gnet.Engine
	addr    *net.TCPAddr
	booted  chan struct{}
	bootErr error // set by OnBoot before booted is closed
	runErr  chan error
}

// ServeGnet listens on cfg.Addr and serves it with h until Stop. It returns once the listener
// is bound (and Booted has run).
func (t *Transport) ServeGnet(h Handler, cfg GnetConfig) (*Gnet, error) {
	g := &Gnet{t: t, h: h, cfg: cfg, booted: make(chan struct{}), runErr: make(chan error, 1)}
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReuseAddr(true),
		gnet.WithLogger(gnetLogger{t.log}),
	}
	if cfg.Workers > 0 {
		opts = append(opts, gnet.WithNumEventLoop(cfg.Workers))
	}
	go func() { g.runErr <- gnet.Run(g, "tcp://"+cfg.Addr, opts...) }()
	select {
	case <-g.booted:
	case err := <-g.runErr:
		return nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	if g.bootErr != nil {
		<-g.runErr // OnBoot answered Shutdown: Run returns without serving
		return nil, g.bootErr
	}
	return g, nil
}

// Addr is the bound address.
func (g *Gnet) Addr() *net.TCPAddr { return g.addr }

// Stop stops the event loops (closing every connection) and waits for them.
func (g *Gnet) Stop() error {
	err := g.eng.Stop(context.Background())
	<-g.runErr
	return err
}

// OnBoot records the engine, learns the bound address and runs Booted. It runs before the
// event loops start, so clients already queued on the listener, as after a restart, are
// served only once it is done.
func (g *Gnet) OnBoot(eng gnet.Engine) gnet.Action {
	g.eng = eng
	g.bootErr = g.resolveAddr()
	if g.bootErr == nil && g.cfg.Booted != nil {
		g.bootErr = g.cfg.Booted(g.addr)
	}
	close(g.booted)
	if g.bootErr != nil {
		return gnet.Shutdown
	}
	return gnet.None
}

// resolveAddr learns the bound port (the address may ask for port 0) from a duplicate of the
// listener's descriptor.
func (g *Gnet) resolveAddr() error {
	fd, err := g.eng.Dup()
	if err != nil {
		return fmt.Errorf("listener address: %w", err)
	}
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("listener address: %w", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		g.addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	case *unix.SockaddrInet6:
		g.addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	default:
		return fmt.Errorf("unexpected listener address %T", sa)
	}
	return nil
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
