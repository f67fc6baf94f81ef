package server

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"

	"inlet/auth"
)

// Stream listeners: TLS listeners (gnet has no TLS) and any listener after the first
// non-TLS one are served on net and crypto/tls with a reader goroutine and a writer goroutine
// per connection. The reader frames requests into the same pooled buffers, under the same
// in-flight budget, as the gnet loop does (conn.frames), and queues them to the same
// per-connection worker; replies go through streamConn, which satisfies transport, so the
// ordered-reply code is shared. A reader waiting for budget holds at most one partial frame,
// like a loop, so budget.go's rule (wait only while complete frames hold budget) holds.

// tlsHandshakeTimeout bounds how long a connection may take to complete its TLS handshake
// before it is dropped (a client that connects and says nothing must not pin a goroutine).
const tlsHandshakeTimeout = 10 * time.Second

// closeWriteTimeout bounds how long Close waits for queued replies to reach a client that
// does not read.
const closeWriteTimeout = 5 * time.Second

// streamConn is a transport over a net.Conn: AsyncWrite and AsyncWritev queue to the
// connection's writer goroutine and return at once, as gnet's do, so the batch log's
// completer never blocks on a slow client.
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

func (s *Server) startStreams() error {
	for i, l := range s.streams {
		nl, err := net.Listen("tcp", l.Address)
		if err == nil {
			l.nl, l.addr = nl, nl.Addr()
			err = l.resolveAdvertise()
		}
		if err != nil {
			for _, prev := range s.streams[:i+1] {
				if prev.nl != nil {
					prev.nl.Close()
				}
			}
			return err
		}
	}
	s.live = map[*streamConn]struct{}{}
	for _, l := range s.streams {
		s.log.Info("listening", "listener", l.Name, "protocol", l.Protocol, "addr", l.addr.String(), "advertise", net.JoinHostPort(l.advHost, strconv.Itoa(int(l.advPort))))
		s.streamW.Add(1)
		go s.acceptLoop(l)
	}
	return nil
}

func (s *Server) acceptLoop(l *listener) {
	defer s.streamW.Done()
	backoff := time.Millisecond
	for {
		nc, err := l.nl.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: wait a little, as net/http does.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = time.Millisecond
		if s.draining.Load() {
			nc.Close()
			continue
		}
		s.streamW.Add(1)
		go s.serveStream(l, nc)
	}
}

// serveStream is a stream connection's reader: the TLS handshake, then framing. The
// connection counts against the connection limits (and the idle reaper can close it) from
// the moment it is accepted, its TLS handshake included.
func (s *Server) serveStream(l *listener, nc net.Conn) {
	defer s.streamW.Done()
	sc := newStreamConn(nc)
	c := &conn{s: s, gc: sc, l: l}
	c.init(nc.RemoteAddr().String())
	if !s.admitConn(c, l) {
		sc.Close()
		return
	}
	s.streamM.Lock()
	if s.live == nil || s.draining.Load() {
		s.streamM.Unlock()
		s.dropConn(c)
		sc.Close()
		return
	}
	s.live[sc] = struct{}{}
	s.streamM.Unlock()
	defer func() {
		c.markClosed()
		sc.Close()
		s.streamM.Lock()
		delete(s.live, sc)
		s.streamM.Unlock()
		s.dropConn(c)
	}()

	var certPrincipal *auth.Principal
	certUser := ""
	if l.TLS != nil {
		tc := tls.Server(nc, l.TLS)
		_ = tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
		if err := tc.Handshake(); err != nil {
			s.log.Debug("tls handshake failed", "listener", l.Name, "remote", c.remote, "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
		sc.setConn(tc)
		nc = tc
		certPrincipal, certUser = s.certPrincipal(l, tc.ConnectionState())
	}
	c.sec = newConnSecurity(s, l, certPrincipal)
	if certUser != "" && c.sec != nil && c.sec.principal == certPrincipal {
		// The certificate names a configured user: its prefixes follow the user's changes.
		c.sec.user = certUser
		c.user.Store(&certUser)
	}

	br := bufio.NewReaderSize(nc, 64<<10)
	var prefix [4]byte
	for {
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			return
		}
		c.lastActive.Store(s.clock.Load())
		size := int(int32(binary.BigEndian.Uint32(prefix[:])))
		if !s.frameSizeOK(c, size) {
			return
		}
		// As in conn.frames: count the frame, then check draining.
		s.inflight.Add(1)
		if s.draining.Load() {
			s.inflight.Add(-1)
			return
		}
		// The frame is c.partial while it arrives, so markClosed (deferred above) drops it
		// if the connection ends first; its buffer grows as bytes arrive, as on a loop.
		r := s.startFrame(c, size)
		c.partial = r
		for r.filled < r.want {
			if !s.growFrame(r, br.Buffered()) {
				return
			}
			n, err := br.Read((*r.buf)[r.filled:])
			r.filled += n
			if err != nil {
				return
			}
			c.lastActive.Store(s.clock.Load())
		}
		c.partial = nil
		s.budget.complete(r)
		if !c.enqueue(r) {
			return
		}
	}
}

// certPrincipal maps a verified client certificate to a principal: the configured user named
// by the certificate's common name, else a principal of that name with the listener's
// anonymous prefixes. No verified certificate: nil (the listener's anonymous principal
// applies).
func (s *Server) certPrincipal(l *listener, st tls.ConnectionState) (p *auth.Principal, user string) {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil, ""
	}
	cn := st.PeerCertificates[0].Subject.CommonName
	if u, ok := s.cfg.Users.Lookup(cn); ok {
		return &u.Principal, cn
	}
	p = &auth.Principal{Name: cn, TopicPrefixes: []string{"*"}}
	if l.Anonymous != nil {
		p.TopicPrefixes, p.GroupPrefixes = l.Anonymous.TopicPrefixes, l.Anonymous.GroupPrefixes
	}
	return p, ""
}

// closeStreams closes the stream listeners and connections and waits for their goroutines.
func (s *Server) closeStreams() {
	if len(s.streams) == 0 {
		return
	}
	for _, l := range s.streams {
		l.nl.Close()
	}
	s.streamM.Lock()
	conns := make([]*streamConn, 0, len(s.live))
	for sc := range s.live {
		conns = append(conns, sc)
	}
	s.streamM.Unlock()
	for _, sc := range conns {
		sc.Close()
	}
	// The writers flush what is queued first; then every reader is unblocked.
	deadline := time.After(closeWriteTimeout)
	for _, sc := range conns {
		select {
		case <-sc.done:
		case <-deadline:
		}
		sc.closeNow()
	}
	s.streamW.Wait()
}
