package wire

import (
	"testing"
	"time"
)

// TestMemBudgetServesInArrivalOrder guards a whole-budget holder (a large batch decompressed
// whole) against starvation: a small request that arrives after it waits behind it, even
// though its few bytes are free.
func TestMemBudgetServesInArrivalOrder(t *testing.T) {
	b := newMemBudget(100)
	held := b.acquire(10)
	queued := func(tickets uint64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; {
			b.mu.Lock()
			n := b.next
			b.mu.Unlock()
			if n >= tickets {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d tickets taken, want %d", n, tickets)
			}
			time.Sleep(time.Millisecond)
		}
	}
	order := make(chan string, 2)
	go func() { n := b.acquire(100); order <- "whole"; b.release(n) }()
	queued(2)
	go func() { n := b.acquire(1); order <- "small"; b.release(n) }()
	queued(3)
	select {
	case got := <-order:
		t.Fatalf("%s served while 10 bytes are held and the whole budget was asked first", got)
	case <-time.After(20 * time.Millisecond):
	}
	b.release(held)
	if first, second := <-order, <-order; first != "whole" || second != "small" {
		t.Fatalf("served %s then %s, want whole then small", first, second)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free != b.cap {
		t.Fatalf("free %d of %d after every release", b.free, b.cap)
	}
}
