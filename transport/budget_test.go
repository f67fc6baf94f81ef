package transport

import (
	"testing"
	"time"
)

// TestBudgetRules pins budget.go's rules for frames in transit: growth within the limit is
// taken; over it, a loop waits while complete frames hold budget; when only frames in transit
// hold it, the oldest and a frame whose bytes have all arrived are admitted and any other is
// refused.
func TestBudgetRules(t *testing.T) {
	b := newBudget(100)
	oldest, other, third := &Request{}, &Request{}, &Request{}
	b.begin(oldest)
	b.begin(other)
	if !b.grow(oldest, 60, false) || !b.grow(other, 30, false) {
		t.Fatal("growth within the limit refused")
	}
	if b.grow(other, 20, false) {
		t.Fatal("a frame in transit that is not the oldest was admitted over the limit, with only frames in transit holding budget")
	}
	if b.used != 90 {
		t.Fatalf("a refused growth took budget: %d in use", b.used)
	}
	if !b.grow(other, 20, true) {
		t.Fatal("a frame whose bytes have all arrived was refused")
	}
	if !b.grow(oldest, 50, false) {
		t.Fatal("the oldest frame in transit was refused")
	}
	// other completes: it is released by someone else, so a loop may now wait for it.
	b.complete(other)
	b.begin(third)
	admitted := make(chan bool)
	go func() { admitted <- b.grow(third, 10, false) }()
	select {
	case <-admitted:
		t.Fatal("growth over the limit did not wait while a complete frame held budget")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(other.size)
	// Still over: oldest holds 110 alone. third is not the oldest and only frames in transit
	// hold budget, so it is refused rather than left waiting.
	if <-admitted {
		t.Fatal("admitted over the limit behind the oldest frame")
	}
	b.complete(oldest)
	b.complete(third)
	b.release(oldest.size)
	b.release(third.size)
	if b.used != 0 || b.oldest != nil || b.newest != nil {
		t.Fatalf("after releasing everything: %d in use, list %p %p", b.used, b.oldest, b.newest)
	}
}

// TestBudgetReleasedOncePerPath: whichever way a request ends, its budget and in-flight count
// come back exactly once: answered and released; skipped (acks=0) and released later; its
// connection closed in the middle of its frame (markClosed drops it); its connection closed
// while it waits whole with the handler (the handler still answers and releases it, and the
// answer is not written); refused by the budget (the connection closes mid-frame).
func TestBudgetReleasedOncePerPath(t *testing.T) {
	t.Run("answered", func(t *testing.T) {
		tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
		h := &recorder{}
		c := served(tr, h, &writes{})
		stream := appendFrame(appendFrame(nil, body(0, 100)), body(1, 5000))
		if c.feed(&sliceSource{b: stream}) != more || len(h.frames) != 2 {
			t.Fatalf("%d frames", len(h.frames))
		}
		checkIdle(t, tr)
	})
	t.Run("skipped, released later", func(t *testing.T) {
		tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
		h := &recorder{hold: true}
		w := &writes{}
		c := served(tr, h, w)
		c.feed(&sliceSource{b: appendFrame(appendFrame(nil, body(0, 100)), body(1, 100))})
		rs := h.take()
		rs[0].Skip()
		rs[1].Reply(outOf([]byte("second")))
		if got := w.written(); len(got) != 1 || string(got[0]) != "second" {
			t.Fatalf("written %q: the skipped slot should let the second reply go", got)
		}
		if tr.InFlight() != 2 {
			t.Fatalf("in flight %d before release, want 2", tr.InFlight())
		}
		rs[1].Release()
		rs[0].Release()
		checkIdle(t, tr)
	})
	t.Run("closed mid-frame", func(t *testing.T) {
		tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
		h := &recorder{}
		c := served(tr, h, &writes{})
		stream := appendFrame(nil, body(0, 3*initialFrameBuf))
		c.feed(&sliceSource{b: stream[:initialFrameBuf+100]}) // the buffer has grown once
		if c.partial == nil || tr.BudgetHeld() == 0 || tr.InFlight() != 1 {
			t.Fatalf("partial %v, held %d, in flight %d", c.partial != nil, tr.BudgetHeld(), tr.InFlight())
		}
		c.markClosed()
		if !c.Gone() || c.partial != nil {
			t.Fatal("markClosed left the connection open or its partial frame")
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done not closed")
		}
		checkIdle(t, tr)
	})
	t.Run("closed with requests queued", func(t *testing.T) {
		tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
		h := &recorder{hold: true}
		w := &writes{}
		c := served(tr, h, w)
		var stream []byte
		for i := range 4 {
			stream = appendFrame(stream, body(i, 1000))
		}
		stream = appendFrame(stream, body(9, 5000))
		c.feed(&sliceSource{b: stream[:len(stream)-10]}) // four whole, the fifth arriving
		rs := h.take()
		rs[1].Reply(outOf([]byte("waits for 0")))
		c.markClosed()
		// The handler finishes what it had after the close: nothing more is written.
		rs[0].Reply(outOf([]byte("after close")))
		rs[2].Skip()
		rs[3].Reply(outOf([]byte("after close")))
		for _, r := range rs {
			r.Release()
		}
		if got := w.written(); len(got) != 0 {
			t.Fatalf("written after the close: %q", got)
		}
		checkIdle(t, tr)
	})
	t.Run("refused by the budget", func(t *testing.T) {
		tr := New(Config{Budget: initialFrameBuf, MaxFrame: 1 << 20})
		h := &recorder{}
		older := served(tr, h, &writes{})
		c := served(tr, h, &writes{})
		// older's frame in transit holds the whole budget; c's may not wait for it.
		if older.feed(&sliceSource{b: appendFrame(nil, body(0, 2*initialFrameBuf))[:100]}) != more {
			t.Fatal("the oldest frame in transit was refused")
		}
		if c.feed(&sliceSource{b: appendFrame(nil, body(1, 2*initialFrameBuf))[:100]}) != closeConn {
			t.Fatal("a second frame in transit was admitted over the budget")
		}
		if len(h.refused) != 1 || h.refused[0] != Budget {
			t.Fatalf("refused %v", h.refused)
		}
		c.markClosed()
		older.markClosed()
		checkIdle(t, tr)
	})
}
