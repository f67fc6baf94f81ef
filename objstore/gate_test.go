package objstore

import (
	"context"
	"testing"
	"time"
)

// TestPutGate: Wait returns at once with no PUT in flight, once the last begun PUT ends, or
// after its bound, and counts only the waits that found a PUT in flight; a nil gate never
// waits.
func TestPutGate(t *testing.T) {
	ctx := context.Background()
	var none *PutGate
	none.Begin()
	none.Wait(ctx, time.Hour)
	none.End()

	g := &PutGate{}
	g.Wait(ctx, time.Hour) // idle: returns at once
	if n, _ := g.Waited(); n != 0 {
		t.Fatalf("%d waits counted with no PUT in flight", n)
	}

	g.Begin()
	g.Begin()
	go func() {
		time.Sleep(20 * time.Millisecond)
		g.End()
		time.Sleep(30 * time.Millisecond)
		g.End() // the last one: the wait ends here
	}()
	began := time.Now()
	g.Wait(ctx, time.Hour)
	if d := time.Since(began); d < 50*time.Millisecond {
		t.Fatalf("Wait returned after %v, before the last PUT ended (50 ms)", d)
	}
	if n, d := g.Waited(); n != 1 || d < 50*time.Millisecond {
		t.Fatalf("Waited: %d waits, %v; want 1, at least 50 ms", n, d)
	}
	g.Wait(ctx, time.Hour) // idle again

	g.Begin()
	began = time.Now()
	g.Wait(ctx, 30*time.Millisecond) // the bound
	if d := time.Since(began); d < 30*time.Millisecond || d > 10*time.Second {
		t.Fatalf("a bounded Wait returned after %v, want 30 ms", d)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	g.Wait(cctx, time.Hour) // a done context
	g.End()
	if n, _ := g.Waited(); n != 3 {
		t.Fatalf("%d waits counted, want 3", n)
	}
}
