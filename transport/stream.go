package transport

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Stream listeners: TLS listeners (gnet has no TLS) and any others a caller does not give
// gnet are served on net and crypto/tls with a reader goroutine and a writer goroutine per
// connection. The reader frames requests with the same code (Conn.feed), into the same pooled
// buffers, under the same budget, as a gnet loop does; replies go through streamConn, which
// is a Writer, so the ordered-reply code is shared. A reader waiting for budget holds at most
// one partial frame, like a loop, so budget.go's rule (wait only while complete frames hold
// budget) holds.

// tlsHandshakeTimeout bounds how long a connection may take to complete its TLS handshake
// before it is dropped (a client that connects and says nothing must not pin a goroutine).
const tlsHandshakeTimeout = 10 * time.Second

// closeWriteTimeout bounds how long Close waits for queued replies to reach a client that
// does not read.
const closeWriteTimeout = 5 * time.Second

// streamReadBuf is what a stream reader reads at a time, as gnet delivers a read of up to
// 64 KiB: a frame's buffer starts at that size (initialFrameBuf).
const streamReadBuf = 64 << 10

// StreamConfig is one stream listener.
type StreamConfig struct {
	Name string      // in logs
	TLS  *tls.Config // nil: plain TCP
}

// streamConn is a Writer over a net.Conn: AsyncWrite and AsyncWritev queue to the
// connection's writer goroutine and return at once, as gnet's do, so a handler's goroutine
// (Inlet: the batch log's completer) never blocks on a slow client.
type streamConn struct {
	mu      sync.Mutex
	nc      net.Conn // the TCP connection, then the TLS one once its handshake is done
	cond    sync.Cond
	pending []pendingWrite
	closing bool
	done    chan struct{} // closed when the writer has closed nc
}

type pendingWrite struct {
	bufs net.Buffers
	cb   gnet.AsyncCallback
}

func newStreamConn(nc net.Conn) *streamConn {
	sc := &streamConn{nc: nc, done: make(chan struct{})}
	sc.cond.L = &sc.mu
	go sc.writeLoop()
	return sc
}

func (sc *streamConn) AsyncWrite(b []byte, cb gnet.AsyncCallback) error {
	return sc.queue(pendingWrite{bufs: net.Buffers{b}, cb: cb})
}

func (sc *streamConn) AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error {
	return sc.queue(pendingWrite{bufs: net.Buffers(bs), cb: cb})
}

// Wake is not how a stream reader is woken (Conn.resume is).
func (sc *streamConn) Wake(gnet.AsyncCallback) error { return nil }

func (sc *streamConn) queue(w pendingWrite) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closing {
		return net.ErrClosed
	}
	sc.pending = append(sc.pending, w)
	sc.cond.Signal()
	return nil
}

// Close closes the connection once the replies already queued are written (or could not be
// within closeWriteTimeout); later writes fail.
func (sc *streamConn) Close() error {
	sc.mu.Lock()
	if !sc.closing {
		sc.closing = true
		_ = sc.nc.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
		sc.cond.Signal()
	}
	sc.mu.Unlock()
	return nil
}

// setConn replaces the TCP connection with the TLS connection over it, once its handshake is
// done (nothing is written before).
func (sc *streamConn) setConn(nc net.Conn) {
	sc.mu.Lock()
	sc.nc = nc
	sc.mu.Unlock()
}

// closeNow closes the connection at once, queued replies or not.
func (sc *streamConn) closeNow() {
	sc.mu.Lock()
	nc := sc.nc
	sc.mu.Unlock()
	_ = nc.Close()
}

func (sc *streamConn) writeLoop() {
	var werr error
	for {
		sc.mu.Lock()
		for len(sc.pending) == 0 && !sc.closing {
			sc.cond.Wait()
		}
		batch, closing, nc := sc.pending, sc.closing, sc.nc
		sc.pending = nil
		sc.mu.Unlock()
		for _, w := range batch {
			if werr == nil {
				// For a tls.Conn, net.Buffers writes each buffer in turn; for TCP it is a writev.
				_, werr = w.bufs.WriteTo(nc)
				if werr != nil {
					_ = sc.Close()
				}
			}
			if w.cb != nil {
				_ = w.cb(nil, werr)
			}
		}
		if closing && len(batch) == 0 {
			_ = nc.Close()
			close(sc.done)
			return
		}
	}
}

// ServeStream serves the connections nl accepts with h, a reader and a writer goroutine
// each, until CloseStreams (which closes nl). Accepting is accept.go's: an accept error never
// stops it.
func (t *Transport) ServeStream(h Handler, nl net.Listener, cfg StreamConfig) {
	t.streamW.Add(1)
	a := t.startAcceptor(cfg.Name, nl, func(nc net.Conn) error {
		if t.draining.Load() {
			nc.Close()
			return nil
		}
		t.streamW.Add(1)
		go t.serveStream(h, cfg, nc)
		return nil
	})
	t.streamMu.Lock()
	t.listeners = append(t.listeners, a)
	t.streamMu.Unlock()
	go func() {
		<-a.done
		t.streamW.Done()
	}()
}

// serveStream is a stream connection's reader: the TLS handshake, then framing. The
// connection is opened (Handler.Open: Inlet counts it against its connection limits, and its
// idle reaper can close it) from the moment it is accepted, its TLS handshake included.
func (t *Transport) serveStream(h Handler, cfg StreamConfig, nc net.Conn) {
	defer t.streamW.Done()
	sc := newStreamConn(nc)
	c := t.newConn(sc, nc.RemoteAddr().String(), h)
	c.stream = true
	state, ok := h.Open(c)
	if !ok {
		sc.Close()
		return
	}
	c.state = state
	// Registered under streamMu, which CloseStreams takes after Drain: every connection is
	// either closed by CloseStreams or refused here.
	t.streamMu.Lock()
	if t.draining.Load() {
		t.streamMu.Unlock()
		c.markClosed()
		sc.Close()
		h.Closed(c)
		return
	}
	t.live[sc] = struct{}{}
	t.streamMu.Unlock()
	defer func() {
		c.markClosed()
		sc.Close()
		t.streamMu.Lock()
		delete(t.live, sc)
		t.streamMu.Unlock()
		h.Closed(c)
	}()

	if cfg.TLS != nil {
		tc := tls.Server(nc, cfg.TLS)
		_ = tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
		if err := tc.Handshake(); err != nil {
			t.log.Debug("tls handshake failed", "listener", cfg.Name, "remote", c.remote, "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
		sc.setConn(tc)
		nc = tc
		h.Secured(c, tc.ConnectionState())
	}

	// A frame still arriving is c.partial, so markClosed (deferred above) drops it if the
	// connection ends first.
	f := chunkFramer{c: c, buf: make([]byte, streamReadBuf)}
	for {
		n, err := nc.Read(f.next())
		if n > 0 {
			a := f.feed(n)
			if a == hold {
				a = f.held(nc, sc)
			}
			if a != more {
				return // closing, or draining (a stream connection is closed then)
			}
		}
		if err != nil {
			return
		}
	}
}

// heldStreamPoll: while a request holds a stream connection (a long poll), its reader goes on
// reading what fits in its buffer, unframed, in reads of at most this long, so that a client
// that closes is noticed (and its long poll ended) without waiting for the hold to end.
const heldStreamPoll = 50 * time.Millisecond

// held waits, on a held connection's reader, until the hold ends (the answer of framing what
// waits), or the connection closes (closeConn). Held by its replies or its queue, nothing is
// read, so TCP pushes back, as Kafka mutes a channel; a close of the connection (its
// writer's, the reaper's, CloseStreams) ends the wait. Held by a request, bytes are read
// while the buffer has room, so an end of stream is seen.
func (f *chunkFramer) held(nc net.Conn, sc *streamConn) action {
	c := f.c
	defer func() { _ = nc.SetReadDeadline(time.Time{}) }()
	for {
		select {
		case <-c.resume:
			if a := f.feed(0); a != hold {
				return a
			}
			continue
		case <-sc.done:
			return closeConn
		default:
		}
		if c.holding.Load() == 0 || f.kept == len(f.buf) {
			select {
			case <-c.resume:
			case <-sc.done:
				return closeConn
			}
			if a := f.feed(0); a != hold {
				return a
			}
			continue
		}
		_ = nc.SetReadDeadline(time.Now().Add(heldStreamPoll))
		n, err := nc.Read(f.next())
		if n > 0 {
			if a := f.feed(n); a != hold {
				return a
			}
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return closeConn // the client closed (or the socket failed)
		}
	}
}

// chunkFramer frames bytes that arrive in reads of buf (a stream reader's): what framing
// leaves of a read (part of a length prefix, under 4 bytes, or everything after a hold began)
// moves to the front of buf, and the next read appends to it.
type chunkFramer struct {
	c    *Conn
	buf  []byte
	kept int
	src  sliceSource
}

// next is where the next read goes.
func (f *chunkFramer) next() []byte { return f.buf[f.kept:] }

// feed frames the n bytes just read into next().
func (f *chunkFramer) feed(n int) action {
	f.src.b = f.buf[:f.kept+n]
	a := f.c.feed(&f.src)
	f.kept = copy(f.buf, f.src.b)
	return a
}

// CloseStreams closes the stream listeners and connections and waits for their goroutines:
// each writer flushes what is queued first (for at most closeWriteTimeout), then every reader
// is unblocked.
func (t *Transport) CloseStreams() {
	t.streamMu.Lock()
	ls := t.listeners
	t.listeners = nil
	t.streamMu.Unlock()
	for _, a := range ls {
		a.close()
	}
	t.streamMu.Lock()
	conns := make([]*streamConn, 0, len(t.live))
	for sc := range t.live {
		conns = append(conns, sc)
	}
	t.streamMu.Unlock()
	for _, sc := range conns {
		sc.Close()
	}
	deadline := time.After(closeWriteTimeout)
	for _, sc := range conns {
		select {
		case <-sc.done:
		case <-deadline:
		}
		sc.closeNow()
	}
	t.streamW.Wait()
}
