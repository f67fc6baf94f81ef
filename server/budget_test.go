package server

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
	oldest, other, third := &request{}, &request{}, &request{}
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
