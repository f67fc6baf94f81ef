package transport

import (
	"crypto/tls"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/panjf2000/gnet/v2"
)

// recorder is a Handler that keeps what it is told. With hold, frames are kept unanswered
// (taken later with take); otherwise each is copied, answered with nothing and released at
// once.
type recorder struct {
	mu      sync.Mutex
	hold    bool
	frames  [][]byte
	held    []*Request
	refused []Refusal
	closed  int
	opened  int
}

func (h *recorder) Open(c *Conn) (any, bool) {
	h.mu.Lock()
	h.opened++
	h.mu.Unlock()
	return h, true
}

func (h *recorder) Secured(*Conn, tls.ConnectionState) {}

func (h *recorder) Frame(r *Request) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frames = append(h.frames, append([]byte(nil), r.Bytes()...))
	if h.hold {
		h.held = append(h.held, r)
		return true
	}
	r.Skip()
	r.Release()
	return true
}

func (h *recorder) Refused(_ *Conn, why Refusal, _, _ int) {
	h.mu.Lock()
	h.refused = append(h.refused, why)
	h.mu.Unlock()
}

func (h *recorder) Closed(*Conn) {
	h.mu.Lock()
	h.closed++
	h.mu.Unlock()
}

func (h *recorder) take() []*Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.held
	h.held = nil
	return rs
}

// writes is a Writer that records what is written, in order, and runs each callback at once.
type writes struct {
	mu     sync.Mutex
	got    [][]byte // each buffer written, in order
	calls  int      // AsyncWrite and AsyncWritev calls
	closed bool
}

func (w *writes) AsyncWrite(b []byte, cb gnet.AsyncCallback) error {
	return w.AsyncWritev([][]byte{b}, cb)
}

func (w *writes) AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error {
	w.mu.Lock()
	for _, b := range bs {
		w.got = append(w.got, append([]byte(nil), b...))
	}
	w.calls++
	w.mu.Unlock()
	if cb != nil {
		_ = cb(nil, nil)
	}
	return nil
}

func (w *writes) Wake(gnet.AsyncCallback) error { return nil }

func (w *writes) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return nil
}

func (w *writes) written() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.got...)
}

// served is a connection with h as its handler, as a back-end would make it, and no socket
// (w records replies).
func served(t *Transport, h Handler, w Writer) *Conn {
	c := t.newConn(w, "test", h)
	state, _ := h.Open(c)
	c.state = state
	return c
}

// appendFrame appends a length prefix and body.
func appendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}

// body is n bytes that tell frame i's bytes apart from any other frame's.
func body(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j*7)
	}
	return b
}

// outOf is a pooled reply holding b.
func outOf(b []byte) *Out {
	o := GetOut(len(b))
	o.B = append(o.B, b...)
	return o
}

// checkIdle fails unless t holds no budget and counts nothing in flight.
func checkIdle(tb testing.TB, t *Transport) {
	tb.Helper()
	if held, n := t.BudgetHeld(), t.InFlight(); held != 0 || n != 0 {
		tb.Fatalf("budget held %d, in flight %d: want both 0", held, n)
	}
	t.budget.mu.Lock()
	defer t.budget.mu.Unlock()
	if t.budget.partial != 0 || t.budget.oldest != nil || t.budget.newest != nil {
		tb.Fatalf("frames in transit left: %d bytes, list %p %p", t.budget.partial, t.budget.oldest, t.budget.newest)
	}
}
