package objstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// PutGate lets uploads that nothing waits for give way to those an answer waits for. On a node
// with diskless topics each batch goes to the bucket twice: in a commit object, whose PUT a
// produce's acknowledgement waits for, and in the remote tier's object of its partition, which
// nobody waits for. Where the two share what carries them (the bucket server's CPU, a link), a
// chunk of a tier object sent while a commit PUT is going delays that PUT, and so every
// acknowledgement behind it. The commit log marks its PUTs (Begin, End); the tier, while it is
// not behind, waits before each chunk it sends (Wait) until none is in flight, or at most a
// bound, so that it is slowed and never stopped.
//
// A nil *PutGate never waits.
type PutGate struct {
	mu   sync.Mutex
	n    int           // PUTs in flight
	idle chan struct{} // closed when n drops to 0; made when it leaves 0

	waits  atomic.Int64 // Waits that found a PUT in flight
	waited atomic.Int64 // nanoseconds spent in them
}

// Begin marks a PUT that an answer waits for as started.
func (g *PutGate) Begin() {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
}

// End marks one begun PUT as ended (landed or failed).
func (g *PutGate) End() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.n--
	if g.n == 0 {
		close(g.idle)
	}
	g.mu.Unlock()
}

// Wait returns once no begun PUT is in flight, after most, or when ctx is done, whichever
// comes first.
func (g *PutGate) Wait(ctx context.Context, most time.Duration) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return
	}
	idle := g.idle
	g.mu.Unlock()
	began := time.Now()
	t := time.NewTimer(most)
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	g.waits.Add(1)
	g.waited.Add(int64(time.Since(began)))
}

// Waited is how many Waits found a PUT in flight, and how long they waited in all.
func (g *PutGate) Waited() (n int64, d time.Duration) {
	if g == nil {
		return 0, 0
	}
	return g.waits.Load(), time.Duration(g.waited.Load())
}
