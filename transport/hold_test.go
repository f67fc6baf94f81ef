package transport

import (
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// lagWriter is a Writer whose socket takes nothing until flush: callbacks wait, as gnet's do
// for a client that does not read. It counts Wake calls.
type lagWriter struct {
	mu    sync.Mutex
	cbs   []gnet.AsyncCallback
	wakes int
}

func (w *lagWriter) AsyncWrite(_ []byte, cb gnet.AsyncCallback) error {
	w.mu.Lock()
	w.cbs = append(w.cbs, cb)
	w.mu.Unlock()
	return nil
}

func (w *lagWriter) AsyncWritev(_ [][]byte, cb gnet.AsyncCallback) error {
	return w.AsyncWrite(nil, cb)
}
func (w *lagWriter) Close() error { return nil }

func (w *lagWriter) Wake(gnet.AsyncCallback) error {
	w.mu.Lock()
	w.wakes++
	w.mu.Unlock()
	return nil
}

// flush lets the socket take everything queued.
func (w *lagWriter) flush() {
	w.mu.Lock()
	cbs := w.cbs
	w.cbs = nil
	w.mu.Unlock()
	for _, cb := range cbs {
		_ = cb(nil, nil)
	}
}

func (w *lagWriter) woken() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wakes
}

// TestBudgetNeverWaitsForExtra: bytes no loop may wait for (unwritten replies) count against
// the limit, but a frame over the limit with only those and frames in transit held is decided
// at once: refused unless it is the oldest in transit or has arrived, never left waiting.
// tryExtra refuses what does not fit; replyRoom is half the limit less extra.
func TestBudgetNeverWaitsForExtra(t *testing.T) {
	b := newBudget(100)
	b.addExtra(80)
	if got := b.replyRoom(); got != 0 {
		t.Fatalf("reply room %d with 80 of 100 unwritten, want 0", got)
	}
	oldest, other := &Request{}, &Request{}
	b.begin(oldest)
	b.begin(other)
	decided := make(chan bool, 1)
	go func() { decided <- b.grow(other, 30, false) }()
	select {
	case ok := <-decided:
		if ok {
			t.Fatal("a frame in transit that is not the oldest was admitted over the limit")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a loop waited for budget held only by unwritten replies")
	}
	if !b.grow(oldest, 30, false) {
		t.Fatal("the oldest frame in transit was refused")
	}
	if b.tryExtra(1) {
		t.Fatal("tryExtra took bytes over the limit")
	}
	b.complete(oldest)
	b.complete(other)
	b.release(oldest.size)
	b.addExtra(-80)
	if b.held() != 0 || b.replyRoom() != 50 {
		t.Fatalf("held %d, reply room %d; want 0 and 50", b.held(), b.replyRoom())
	}
}

// TestHoldConnStopsFraming: a request that holds its connection (a long poll) stops framing
// after it; the rest waits in the source, and once its slot is filled the connection is
// woken and framed again.
func TestHoldConnStopsFraming(t *testing.T) {
	tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
	h := &recorder{hold: true}
	w := &lagWriter{}
	c := served(tr, h, w)
	src := &sliceSource{b: appendFrame(appendFrame(appendFrame(nil, body(0, 100)), body(1, 100)), body(2, 100))}
	c.h = &holder{recorder: h}
	if a := c.feed(src); a != hold {
		t.Fatalf("feed: %v, want hold", a)
	}
	rs := h.take()
	if len(rs) != 1 || len(src.b) != 2*104 {
		t.Fatalf("%d frames handed on, %d bytes left: want 1 and 208", len(rs), len(src.b))
	}
	rs[0].Reply(outOf([]byte("answer")))
	if w.woken() != 1 {
		t.Fatalf("%d wakes after the holding request was answered, want 1", w.woken())
	}
	if a := c.feed(src); a != more {
		t.Fatalf("after the hold: %v", a)
	}
	rest := h.take()
	if len(rest) != 2 {
		t.Fatalf("%d frames after the hold, want 2", len(rest))
	}
	rs[0].Release()
	for _, r := range rest {
		r.Skip()
		r.Release()
	}
	w.flush()
	c.markClosed()
	checkIdle(t, tr)
}

// holder holds the connection on the first frame it is handed.
type holder struct {
	*recorder
	n int
}

func (h *holder) Frame(r *Request) bool {
	if h.n == 0 {
		r.HoldConn()
	}
	h.n++
	return h.recorder.Frame(r)
}

// TestUnwrittenRepliesHoldConn: replies the socket has not taken count against the budget
// (extra, by their buffers' capacity) and, over maxUnwritten, hold the connection; once the
// socket takes them the budget is whole again and framing resumes.
func TestUnwrittenRepliesHoldConn(t *testing.T) {
	tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20})
	h := &recorder{hold: true}
	w := &lagWriter{}
	c := served(tr, h, w)
	src := &sliceSource{b: appendFrame(appendFrame(nil, body(0, 10)), body(1, 10))}
	if c.feed(src) != more {
		t.Fatal("feed")
	}
	rs := h.take()
	if len(rs) != 2 {
		t.Fatalf("%d frames", len(rs))
	}
	big := GetOut(maxUnwritten + 1)
	big.B = big.B[:maxUnwritten+1]
	rs[0].Reply(big)
	if c.unwrittenBytes() < maxUnwritten || tr.BudgetHeld() < int64(maxUnwritten) {
		t.Fatalf("unwritten %d, held %d after a reply the socket has not taken", c.unwrittenBytes(), tr.BudgetHeld())
	}
	if !c.held() {
		t.Fatal("a connection with more than maxUnwritten unwritten is not held")
	}
	if got := c.ReplyRoom(); got != 32<<20-int64(cap(big.B)) {
		t.Fatalf("reply room %d, want half the budget less the unwritten reply", got)
	}
	src.b = appendFrame(nil, body(2, 10))
	if a := c.feed(src); a != hold {
		t.Fatalf("feed with replies unread: %v, want hold", a)
	}
	w.flush()
	if c.unwrittenBytes() != 0 || c.held() {
		t.Fatalf("unwritten %d, held %v after the socket took the reply", c.unwrittenBytes(), c.held())
	}
	if a := c.feed(src); a != more {
		t.Fatalf("feed after the reply was taken: %v", a)
	}
	rs = append(rs, h.take()...)
	for _, r := range rs[1:] {
		r.Skip()
	}
	for _, r := range rs {
		r.Release()
	}
	c.markClosed()
	checkIdle(t, tr)
}

// TestPendingRequestsHoldConn: a connection with maxPending requests unanswered is not framed
// until one is answered.
func TestPendingRequestsHoldConn(t *testing.T) {
	tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20})
	h := &recorder{hold: true}
	w := &writes{}
	c := served(tr, h, w)
	var stream []byte
	for i := range maxPending + 10 {
		stream = appendFrame(stream, body(i, 8))
	}
	src := &sliceSource{b: stream}
	if a := c.feed(src); a != hold {
		t.Fatalf("feed: %v, want hold", a)
	}
	rs := h.take()
	if len(rs) != maxPending {
		t.Fatalf("%d frames handed on, want %d", len(rs), maxPending)
	}
	rs[0].Skip()
	if a := c.feed(src); a != hold {
		t.Fatalf("feed after one answer: %v, want hold", a)
	}
	if more := h.take(); len(more) != 1 {
		t.Fatalf("one answer let %d more frames in, want 1", len(more))
	} else {
		rs = append(rs, more...)
	}
	for _, r := range rs[1:] {
		if !r.replied {
			r.Skip()
		}
	}
	if c.feed(src) != more {
		t.Fatal("all answered, still held")
	}
	rs = append(rs, h.take()...)
	for _, r := range rs {
		if !r.replied {
			r.Skip()
		}
		r.Release()
	}
	checkIdle(t, tr)
}

// TestPreAuthBudget: a connection marked SetPreAuth is charged to the pre-authentication
// budget, for what has arrived (rounded up to a size class), not for its length prefix: a
// prefix of 524288 with 65,537 bytes sent, in reads of 65,536 and 1 (which used to grow the
// buffer sixteenfold to the whole 512 KiB), holds 128 KiB of it and nothing of the shared
// budget; when that budget is full another such frame is refused while the shared one is
// untouched.
func TestPreAuthBudget(t *testing.T) {
	tr := New(Config{Budget: 64 << 20, PreAuthBudget: 256 << 10, MaxFrame: 1 << 20})
	h := &recorder{}
	one := served(tr, h, &writes{})
	one.SetPreAuth(true)
	stream := appendFrame(nil, body(0, 524288))[:4+65537]
	if one.feed(&sliceSource{b: stream[:4+65536]}) != more || one.feed(&sliceSource{b: stream[4+65536:]}) != more {
		t.Fatal("feed refused")
	}
	if got := tr.preAuthHeld(); got != 128<<10 {
		t.Fatalf("pre-auth budget holds %d for 65,537 bytes arrived, want %d", got, 128<<10)
	}
	if got := tr.BudgetHeld(); got != 0 {
		t.Fatalf("the shared budget holds %d of a pre-auth frame", got)
	}
	two := served(tr, h, &writes{})
	two.SetPreAuth(true)
	two.feed(&sliceSource{b: stream[:4+65536]})
	two.feed(&sliceSource{b: stream[4+65536:]})
	three := served(tr, h, &writes{})
	three.SetPreAuth(true)
	if three.feed(&sliceSource{b: stream[:4+65536]}) != closeConn {
		t.Fatal("a third pre-auth frame in transit fitted a full pre-auth budget")
	}
	if len(h.refused) != 1 || h.refused[0] != Budget || tr.BudgetHeld() != 0 {
		t.Fatalf("refusals %v, shared budget %d", h.refused, tr.BudgetHeld())
	}
	authed := served(tr, h, &writes{})
	if authed.feed(&sliceSource{b: appendFrame(nil, body(1, 200<<10))}) != more || len(h.frames) != 1 {
		t.Fatal("an authenticated connection's frame was not served with the pre-auth budget full")
	}
	for _, c := range []*Conn{one, two, three, authed} {
		c.markClosed()
	}
	checkIdle(t, tr)
	if tr.preAuthHeld() != 0 {
		t.Fatalf("pre-auth budget holds %d after every connection closed", tr.preAuthHeld())
	}
}

// TestShedGivesBackTheFrame: a request about to wait gives back its buffer and budget; its
// slot stays, and Release later returns nothing more.
func TestShedGivesBackTheFrame(t *testing.T) {
	tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
	c := tr.NewConn(&writes{}, "test", nil)
	r := c.Inject(body(0, 5000))
	if tr.BudgetHeld() == 0 {
		t.Fatal("no budget held")
	}
	r.Shed()
	r.Shed()
	if tr.BudgetHeld() != 0 || r.Bytes() != nil || tr.InFlight() != 1 {
		t.Fatalf("after Shed: held %d, bytes %d, in flight %d", tr.BudgetHeld(), len(r.Bytes()), tr.InFlight())
	}
	r.Reply(outOf([]byte("late")))
	r.Release()
	checkIdle(t, tr)
}
