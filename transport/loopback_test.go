package transport

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	mrand "math/rand"
	"net"
	"sync"
	"testing"
	"time"
)

// echo answers each frame with the same bytes, from a goroutine after a random pause, so
// replies complete out of order and the transport must put them back in order.
type echo struct {
	mu      sync.Mutex
	open    int
	secured int
}

func (e *echo) Open(*Conn) (any, bool) {
	e.mu.Lock()
	e.open++
	e.mu.Unlock()
	return e, true
}

func (e *echo) Secured(*Conn, tls.ConnectionState) {
	e.mu.Lock()
	e.secured++
	e.mu.Unlock()
}

func (e *echo) Frame(r *Request) bool {
	pause := time.Duration(mrand.Intn(2000)) * time.Microsecond
	go func() {
		time.Sleep(pause)
		r.Reply(outOf(appendFrame(nil, r.Bytes())))
		r.Release()
	}()
	return true
}

func (e *echo) Refused(*Conn, Refusal, int, int) {}

func (e *echo) Closed(*Conn) {
	e.mu.Lock()
	e.open--
	e.mu.Unlock()
}

func (e *echo) opened() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.open
}

// echoes writes a pipeline of frames (small ones, and frames larger than a read) on nc in one
// go, in pieces, and checks that every one comes back, in order.
func echoes(t *testing.T, nc net.Conn) {
	t.Helper()
	var stream []byte
	sizes := []int{8, 100, 3*initialFrameBuf + 7, 8, 5000, 9, initialFrameBuf}
	for i, n := range sizes {
		stream = appendFrame(stream, body(i, n))
	}
	want := framesOf(stream)
	errc := make(chan error, 1)
	go func() {
		for len(stream) > 0 { // uneven pieces, so frames straddle the reads
			n := min(len(stream), 1+mrand.Intn(20000))
			if _, err := nc.Write(stream[:n]); err != nil {
				errc <- err
				return
			}
			stream = stream[n:]
		}
		errc <- nil
	}()
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i, w := range want {
		var prefix [4]byte
		if _, err := io.ReadFull(nc, prefix[:]); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		got := make([]byte, binary.BigEndian.Uint32(prefix[:]))
		if _, err := io.ReadFull(nc, got); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("reply %d: %d bytes, want frame %d's %d", i, len(got), i, len(w))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// waitIdle waits for the connections to close and everything they held to be returned.
func waitIdle(t *testing.T, tr *Transport, e *echo) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.opened() != 0 || tr.InFlight() != 0 || tr.BudgetHeld() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("open %d, in flight %d, budget held %d", e.opened(), tr.InFlight(), tr.BudgetHeld())
		}
		time.Sleep(5 * time.Millisecond)
	}
	checkIdle(t, tr)
}

func TestGnetEchoOverLoopback(t *testing.T) {
	tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20, MinFrame: 8})
	e := &echo{}
	var booted *net.TCPAddr
	g, err := tr.ServeGnet(e, GnetConfig{Addr: "127.0.0.1:0", Workers: 2, Booted: func(a *net.TCPAddr) error { booted = a; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	if booted == nil || g.Addr().Port == 0 || booted.String() != g.Addr().String() {
		t.Fatalf("bound address %v, Booted told %v", g.Addr(), booted)
	}
	for range 3 {
		nc, err := net.Dial("tcp", g.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		echoes(t, nc)
		nc.Close()
	}
	waitIdle(t, tr, e)
}

func TestStreamEchoOverLoopback(t *testing.T) {
	tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20, MinFrame: 8})
	e := &echo{}
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr.ServeStream(e, nl, StreamConfig{Name: "plain"})
	for range 3 {
		nc, err := net.Dial("tcp", nl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		echoes(t, nc)
		nc.Close()
	}
	waitIdle(t, tr, e)
	tr.CloseStreams()
}

// TestStreamTLSEchoOverLoopback: the stream back-end with TLS, and CloseStreams with a
// connection still open.
func TestStreamTLSEchoOverLoopback(t *testing.T) {
	tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20, MinFrame: 8})
	e := &echo{}
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr.ServeStream(e, nl, StreamConfig{Name: "tls", TLS: selfSigned(t)})
	nc, err := tls.Dial("tcp", nl.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	echoes(t, nc)
	e.mu.Lock()
	secured := e.secured
	e.mu.Unlock()
	if secured != 1 {
		t.Fatalf("Secured called %d times, want 1", secured)
	}
	tr.Drain()
	tr.CloseStreams() // closes the open connection and waits for its goroutines
	waitIdle(t, tr, e)
}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// holdingEcho is echo whose every request holds its connection (Request.HoldConn, as a long
// poll does): the pipeline is framed one request at a time, each after the last is answered,
// so the back-end must wake the connection (gnet: Wake; stream: Conn.resume) every time.
type holdingEcho struct{ echo }

func (e *holdingEcho) Frame(r *Request) bool {
	r.HoldConn()
	return e.echo.Frame(r)
}

// TestHeldConnectionsResumeOverLoopback: on both back-ends a pipeline whose every request
// holds its connection is answered whole and in order.
func TestHeldConnectionsResumeOverLoopback(t *testing.T) {
	t.Run("gnet", func(t *testing.T) {
		tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20, MinFrame: 8})
		e := &holdingEcho{}
		g, err := tr.ServeGnet(e, GnetConfig{Addr: "127.0.0.1:0", Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Stop()
		nc, err := net.Dial("tcp", g.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		echoes(t, nc)
		nc.Close()
		waitIdle(t, tr, &e.echo)
	})
	t.Run("stream", func(t *testing.T) {
		tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20, MinFrame: 8})
		e := &holdingEcho{}
		nl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tr.ServeStream(e, nl, StreamConfig{Name: "plain"})
		nc, err := net.Dial("tcp", nl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		echoes(t, nc)
		nc.Close()
		waitIdle(t, tr, &e.echo)
		tr.CloseStreams()
	})
}

// TestHeldStreamConnectionSeesItsClose: a stream connection held by a request (a long poll)
// still notices that its client closed: Done is closed, which ends the long poll, without
// waiting for the hold to end.
func TestHeldStreamConnectionSeesItsClose(t *testing.T) {
	tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20, MinFrame: 8})
	h := &holder{recorder: &recorder{hold: true}}
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr.ServeStream(h, nl, StreamConfig{Name: "plain"})
	defer tr.CloseStreams()
	nc, err := net.Dial("tcp", nl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(appendFrame(appendFrame(nil, body(0, 100)), body(1, 100))); err != nil {
		t.Fatal(err)
	}
	var rs []*Request
	deadline := time.Now().Add(5 * time.Second)
	for len(rs) == 0 && time.Now().Before(deadline) {
		rs = h.take()
		time.Sleep(time.Millisecond)
	}
	if len(rs) != 1 {
		t.Fatalf("%d requests handed on before the close, want 1 (the one that holds)", len(rs))
	}
	nc.Close()
	select {
	case <-rs[0].Conn().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("a held stream connection did not notice its client closed")
	}
	rs[0].Skip()
	rs[0].Release()
	for tr.InFlight() != 0 || tr.BudgetHeld() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("in flight %d, held %d", tr.InFlight(), tr.BudgetHeld())
		}
		time.Sleep(time.Millisecond)
	}
}

// bigReply answers every frame with a reply of size bytes.
type bigReply struct {
	echo
	size int
}

func (e *bigReply) Frame(r *Request) bool {
	o := GetOut(e.size)
	o.B = appendFrame(o.B, make([]byte, e.size-4))
	r.Reply(o)
	r.Release()
	return true
}

// TestGnetUnreadReplyIsCountedUntilRead: a reply larger than the socket's buffers waits in
// gnet's outbound buffer while the client does not read; the budget counts it (and the
// connection's Unwritten) until the client has read it, and then, with nothing more sent,
// returns to nothing (gnet tells nothing when its buffer drains: the connection is looked at
// again every heldPoll).
func TestGnetUnreadReplyIsCountedUntilRead(t *testing.T) {
	const size = 32 << 20
	tr := New(Config{Budget: 256 << 20, MaxFrame: 1 << 20, MinFrame: 8})
	e := &bigReply{size: size}
	g, err := tr.ServeGnet(e, GnetConfig{Addr: "127.0.0.1:0", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	nc, err := net.Dial("tcp", g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(appendFrame(nil, body(0, 8))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tr.BudgetHeld() < size/2 {
		if time.Now().After(deadline) {
			t.Fatalf("budget holds %d with a %d-byte reply unread, want most of it", tr.BudgetHeld(), size)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if held := tr.BudgetHeld(); held < size/2 {
		t.Fatalf("budget holds %d with the reply still unread", held)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	for tr.BudgetHeld() != 0 {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("budget holds %d after the client read the whole reply", tr.BudgetHeld())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
