package diskless

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/objstore"
	"inlet/tier"
	"inlet/wire"
)

// gated is a bucket whose commit object PUTs can be held, failed and have their replies
// lost one key at a time, and that records when each one started and how many were in
// flight at once.
type gated struct {
	*objstore.Memory
	mu       sync.Mutex
	hold     map[string]chan struct{} // a PUT of the key waits until it is closed
	fail     map[string]int           // the next n PUTs of the key fail, without effect
	lose     map[string]int           // the next n PUTs of the key land, their reply lost
	starts   []time.Time              // each commit object PUT, first tries and retries
	keys     []string
	inflight int
	most     int                  // inflight at its highest
	ended    map[string]time.Time // when the first PUT of each key returned
}

func newGated() *gated {
	return &gated{Memory: objstore.NewMemory(), hold: map[string]chan struct{}{}, fail: map[string]int{}, lose: map[string]int{},
		ended: map[string]time.Time{}}
}

func (g *gated) Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	if !strings.HasPrefix(key, LogPrefix) {
		return g.Memory.Put(ctx, key, body, size)
	}
	g.mu.Lock()
	g.starts, g.keys = append(g.starts, time.Now()), append(g.keys, key)
	g.inflight++
	g.most = max(g.most, g.inflight)
	hold := g.hold[key]
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inflight--
		if _, ok := g.ended[key]; !ok {
			g.ended[key] = time.Now()
		}
		g.mu.Unlock()
	}()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g.mu.Lock()
	fail := g.fail[key] > 0
	if fail {
		g.fail[key]--
	}
	g.mu.Unlock()
	if fail {
		return errDown
	}
	err := g.Memory.Put(ctx, key, body, size)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil && g.lose[key] > 0 {
		g.lose[key]--
		return errDown
	}
	return err
}

// holdPut makes the PUTs of commit object n wait until the returned func is called.
func (g *gated) holdPut(n uint64) (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.hold[LogKey(n)] = ch
	g.mu.Unlock()
	return sync.OnceFunc(func() { close(ch) })
}

// tries is how many PUTs of commit object n started.
func (g *gated) tries(n uint64) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := 0
	for _, key := range g.keys {
		if key == LogKey(n) {
			k++
		}
	}
	return k
}

func (g *gated) has(n uint64) bool {
	_, ok := g.Object(LogKey(n))
	return ok
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5 s: %s", what)
		}
	}
}

// chain checks the commit objects 1..n: each lands once, numbered in order, each naming
// the one before it, and holding the batches tagged tags[i-1].
func chain(t *testing.T, g *gated, tags ...byte) {
	t.Helper()
	for i, tag := range tags {
		b, _ := g.Object(LogKey(uint64(i + 1)))
		h, es, err := Decode(b)
		if err != nil || h.Sequence != uint64(i+1) || h.After != uint64(i) || len(es) != 1 || tagOf(es[0].Batch) != tag {
			t.Fatalf("object %d: %+v, %d entries, %v", i+1, h, len(es), err)
		}
	}
	if g.has(uint64(len(tags) + 1)) {
		t.Fatalf("an object past %d", len(tags))
	}
}

// TestAnswersWaitForEveryEarlierObject: with several PUTs in flight, an object whose PUT
// fails and then lands in the middle holds back the answers and the high watermark of the
// objects after it, landed long before; then all are answered, in order, at their offsets.
func TestAnswersWaitForEveryEarlierObject(t *testing.T) {
	g := newGated()
	n := openNode(t, t.TempDir(), g, Config{MaxPutsInFlight: 4}, false)
	defer n.close()
	p := n.topic("d", true).Partitions[0]
	a := n.send(appendOf(p, -1, 0, 1, 1))
	if e := a.wait(t, 5*time.Second); e.Err != 0 || e.BaseOffset != 0 {
		t.Fatalf("object 1: err %d base %d", e.Err, e.BaseOffset)
	}
	release := g.holdPut(2)
	defer release()
	g.mu.Lock()
	g.fail[LogKey(2)] = 1
	g.mu.Unlock()
	b := n.send(appendOf(p, -1, 0, 1, 2))
	eventually(t, "object 2's PUT started", func() bool { return g.tries(2) == 1 })
	c := n.send(appendOf(p, -1, 0, 1, 3))
	eventually(t, "object 3 landed", func() bool { return g.has(3) })
	d := n.send(appendOf(p, -1, 0, 1, 4))
	eventually(t, "object 4 landed", func() bool { return g.has(4) })
	time.Sleep(50 * time.Millisecond)
	if answered(b) || answered(c) || answered(d) || p.HighWatermark() != 1 {
		t.Fatalf("answered %v %v %v, high watermark %d while object 2 is in flight", answered(b), answered(c), answered(d), p.HighWatermark())
	}
	release() // object 2's first PUT fails; the retry lands
	for i, pr := range []*produce{b, c, d} {
		if e := pr.wait(t, 5*time.Second); e.Err != 0 || e.BaseOffset != int64(i+1) {
			t.Fatalf("produce %d: err %d base %d", i+2, e.Err, e.BaseOffset)
		}
	}
	if b.at.After(c.at) || c.at.After(d.at) {
		t.Fatalf("answered out of order: %v %v %v", b.at, c.at, d.at)
	}
	if p.HighWatermark() != 4 || g.tries(2) != 2 {
		t.Fatalf("high watermark %d, object 2 tried %d times", p.HighWatermark(), g.tries(2))
	}
	chain(t, g, 1, 2, 3, 4)
}

// TestLostReplyInTheMiddle: object 2 lands with its reply lost while object 3 lands after it;
// the retry meets its own object and takes it as landed: each object once, the answers in
// order, the writer not fenced.
func TestLostReplyInTheMiddle(t *testing.T) {
	g := newGated()
	n := openNode(t, t.TempDir(), g, Config{}, false)
	defer n.close()
	p := n.topic("d", true).Partitions[0]
	a := n.send(appendOf(p, -1, 0, 1, 1))
	a.wait(t, 5*time.Second)
	release := g.holdPut(2)
	defer release()
	g.mu.Lock()
	g.lose[LogKey(2)] = 1
	g.mu.Unlock()
	b := n.send(appendOf(p, -1, 0, 1, 2))
	eventually(t, "object 2's PUT started", func() bool { return g.tries(2) == 1 })
	c := n.send(appendOf(p, -1, 0, 1, 3))
	eventually(t, "object 3 landed", func() bool { return g.has(3) })
	if answered(b) || answered(c) {
		t.Fatal("answered before object 2 landed")
	}
	release()
	for i, pr := range []*produce{b, c} {
		if e := pr.wait(t, 5*time.Second); e.Err != 0 || e.BaseOffset != int64(i+1) {
			t.Fatalf("produce %d: err %d base %d", i+2, e.Err, e.BaseOffset)
		}
	}
	if b.at.After(c.at) || n.c.Stats().Fenced.Load() || g.tries(2) != 2 {
		t.Fatalf("order %v, fenced %v, object 2 tried %d times", !b.at.After(c.at), n.c.Stats().Fenced.Load(), g.tries(2))
	}
	chain(t, g, 1, 2, 3)
}

// TestFencedWithPutsInFlight: another writer's object under number 2 while object 1's PUT is
// in flight fences the writer: both requests are answered NOT_LEADER_OR_FOLLOWER, once the
// PUT in flight is given up (it sends object 1's request's frame), nothing is published, and
// the loop stops.
func TestFencedWithPutsInFlight(t *testing.T) {
	g := newGated()
	n := openNode(t, t.TempDir(), g, Config{}, false)
	defer n.close()
	d := n.topic("d", true)
	p := d.Partitions[0]
	other := format.Seal(format.AppendEntry(format.NewObject(nil), d.ID, 0, 0, batch(-1, 0, 1, 99)), Header{Incarnation: 12345, Sequence: 2, After: 1, Entries: 1})
	if err := g.Memory.Put(context.Background(), LogKey(2), bytes.NewReader(other), int64(len(other))); err != nil {
		t.Fatal(err)
	}
	release := g.holdPut(1)
	defer release()
	a := n.send(largeAppend(p, -1, 0, 1, 1, 64<<10))
	eventually(t, "object 1's PUT started", func() bool { return g.tries(1) == 1 })
	b := n.send(appendOf(p, -1, 0, 1, 2))
	for _, pr := range []*produce{a, b} {
		if e := pr.wait(t, 5*time.Second); e.Err != wire.ErrNotLeaderOrFollower {
			t.Fatalf("err %d, want NOT_LEADER_OR_FOLLOWER", e.Err)
		}
	}
	g.mu.Lock()
	ended, ok := g.ended[LogKey(1)]
	g.mu.Unlock()
	if !ok || a.at.Before(ended) {
		t.Fatal("the request in object 1 was answered before object 1's PUT, which sends its frame, ended")
	}
	select {
	case <-n.c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the commit loop still runs after fencing")
	}
	release()
	if p.HighWatermark() != 0 || g.has(1) || !n.c.Stats().Fenced.Load() {
		t.Fatalf("high watermark %d, object 1 landed %v, fenced %v", p.HighWatermark(), g.has(1), n.c.Stats().Fenced.Load())
	}
	if code, _ := n.c.Admit(); code != wire.ErrNotLeaderOrFollower {
		t.Fatalf("admit after fencing: %d", code)
	}
}

// TestStaleObjectWithPutsInFlight: a stale writer's object under number 2 while object 1 is
// in flight and object 3 (which follows 2) has landed: once object 1 lands, objects 2 and 3
// are numbered again (4 following 1, 5 following 4), every request is answered in order, and
// a restore reads 1, 4, 5 and never the stale object or the void 3.
func TestStaleObjectWithPutsInFlight(t *testing.T) {
	g := newGated()
	n := openNode(t, t.TempDir(), g, Config{Epoch: func() uint64 { return 2 }}, false)
	d := n.topic("d", true)
	p := d.Partitions[0]
	release1, release2 := g.holdPut(1), g.holdPut(2)
	defer release1()
	defer release2()
	a := n.send(appendOf(p, -1, 0, 1, 1))
	eventually(t, "object 1's PUT started", func() bool { return g.tries(1) == 1 })
	b := n.send(appendOf(p, -1, 0, 1, 2))
	eventually(t, "object 2's PUT started", func() bool { return g.tries(2) == 1 })
	c := n.send(appendOf(p, -1, 0, 1, 3))
	eventually(t, "object 3 landed", func() bool { return g.has(3) })
	stale := format.Seal(format.AppendEntry(format.NewObject(nil), d.ID, 0, 0, batch(-1, 0, 1, 99)), Header{Epoch: 1, Incarnation: 5, Sequence: 2, After: 1, Entries: 1})
	if err := g.Memory.Put(context.Background(), LogKey(2), bytes.NewReader(stale), int64(len(stale))); err != nil {
		t.Fatal(err)
	}
	release2()
	time.Sleep(50 * time.Millisecond)
	if answered(a) || answered(b) || answered(c) || g.has(4) {
		t.Fatal("answered, or renumbered, with object 1 in flight")
	}
	release1()
	for i, pr := range []*produce{a, b, c} {
		if e := pr.wait(t, 5*time.Second); e.Err != 0 || e.BaseOffset != int64(i) {
			t.Fatalf("produce %d: err %d base %d", i+1, e.Err, e.BaseOffset)
		}
	}
	if a.at.After(b.at) || b.at.After(c.at) || n.c.Stats().Fenced.Load() {
		t.Fatal("answered out of order, or fenced")
	}
	for seq, after := range map[uint64]uint64{4: 1, 5: 4} {
		b, _ := g.Object(LogKey(seq))
		if h, _, err := Decode(b); err != nil || h.After != after || h.Epoch != 2 {
			t.Fatalf("object %d: %+v %v", seq, h, err)
		}
	}
	n.close()
	r := openNode(t, t.TempDir(), g, Config{Epoch: func() uint64 { return 3 }}, true)
	defer r.close()
	rp := r.l.Topics()[0].Partitions[0]
	got, err := r.l.ReadBatches(rp, 0, rp.HighWatermark(), 1<<20, true, nil)
	if err != nil || rp.HighWatermark() != 3 || len(got) != 3*62 || tagOf(got) != 1 || tagOf(got[62:]) != 2 || tagOf(got[124:]) != 3 {
		t.Fatalf("restored: hw %d, %d bytes, %v", rp.HighWatermark(), len(got), err)
	}
}

// TestPutRateBoundWithPutsInFlight: a bucket slower than the interval, producers flat out
// for a second: several PUTs are in flight at once, no more than MaxPutsInFlight, and no
// more than one starts per CommitInterval.
func TestPutRateBoundWithPutsInFlight(t *testing.T) {
	g := newGated()
	g.SetDelay(120 * time.Millisecond)
	const interval = 40 * time.Millisecond
	n := openNode(t, t.TempDir(), g, Config{CommitInterval: interval, MaxPutsInFlight: 3}, false)
	defer n.close()
	tp := n.topic("d", true)
	start := time.Now()
	var prs []*produce
	for i := 0; time.Since(start) < time.Second; i++ {
		prs = append(prs, n.send(appendOf(tp.Partitions[i%2], -1, 0, 1, byte(i))))
		time.Sleep(time.Millisecond)
	}
	for _, pr := range prs {
		if a := pr.wait(t, 5*time.Second); a.Err != 0 {
			t.Fatalf("err %d", a.Err)
		}
	}
	elapsed := time.Since(start)
	g.mu.Lock()
	defer g.mu.Unlock()
	if most := g.most; most < 2 || most > 3 {
		t.Fatalf("%d PUTs in flight at most, want 2 or 3", most)
	}
	if puts := len(g.starts); puts > int(elapsed/interval)+1 {
		t.Fatalf("%d PUTs in %v: more than one per %v", puts, elapsed, interval)
	}
	// Each start is at least one interval after the one before; seen here, a PUT's start
	// also carries the scheduling of its goroutine (up to an interval on a loaded machine),
	// so six starts span five intervals less one.
	for i := 5; i < len(g.starts); i++ {
		if d := g.starts[i].Sub(g.starts[i-5]); d < 4*interval {
			t.Fatalf("PUTs %d to %d started within %v", i-4, i+1, d)
		}
	}
	seen := 0
	for _, es := range objects(t, g.Memory) {
		seen += len(es)
	}
	if seen != len(prs) {
		t.Fatalf("%d batches in the bucket, %d produced", seen, len(prs))
	}
}

// TestRecoverVoidsObjectsPastAGap: a node that stops with object 2's PUT in flight and
// object 3 landed leaves a gap. Its restart takes 3 as void (it follows an object not in the
// log), writes an empty object 4 naming object 1, and uploads the batches of 2 and 3 from its
// disk; a restore from the bucket gets every batch once, and still does after a late PUT
// fills the gap.
func TestRecoverVoidsObjectsPastAGap(t *testing.T) {
	g := newGated()
	dir := t.TempDir()
	n := openNode(t, dir, g, Config{CloseTimeout: 100 * time.Millisecond, RequestTimeout: 100 * time.Millisecond}, false)
	d := n.topic("d", true)
	p := d.Partitions[0]
	n.send(appendOf(p, -1, 0, 1, 1)).wait(t, 5*time.Second)
	release := g.holdPut(2)
	n.send(appendOf(p, -1, 0, 1, 2))
	eventually(t, "object 2's PUT started", func() bool { return g.tries(2) == 1 })
	n.send(appendOf(p, -1, 0, 1, 3))
	eventually(t, "object 3 landed", func() bool { return g.has(3) })
	n.close() // object 2 never lands
	release()
	if g.has(2) {
		t.Fatal("object 2 landed")
	}

	again := openNode(t, dir, g, Config{}, false)
	if hw := again.l.Topics()[0].Partitions[0].HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d after the restart, want 3", hw)
	}
	again.close()
	b, _ := g.Object(LogKey(4))
	if h, es, err := Decode(b); err != nil || h.After != 1 || len(es) != 0 {
		t.Fatalf("object 4: %+v, %d entries, %v", h, len(es), err)
	}
	restore := func() {
		t.Helper()
		r := openNode(t, t.TempDir(), g, Config{}, true)
		defer r.close()
		rp := r.l.Topics()[0].Partitions[0]
		got, err := r.l.ReadBatches(rp, 0, rp.HighWatermark(), 1<<20, true, nil)
		if err != nil || rp.HighWatermark() != 3 || len(got) != 3*62 || tagOf(got) != 1 || tagOf(got[62:]) != 2 || tagOf(got[124:]) != 3 {
			t.Fatalf("restored: hw %d, %d bytes, %v", rp.HighWatermark(), len(got), err)
		}
	}
	restore()
	at1 := batch(-1, 0, 1, 2)
	binary.BigEndian.PutUint64(at1, 1) // the base offset the log gave it
	late := format.Seal(format.AppendEntry(format.NewObject(nil), d.ID, 0, 1, at1), Header{Sequence: 2, After: 1, Entries: 1})
	if err := g.Memory.Put(context.Background(), LogKey(2), bytes.NewReader(late), int64(len(late))); err != nil {
		t.Fatal(err)
	}
	restore()
}

// logOf decodes the commit objects of the log in order: from object 1, each one that names
// the last one taken (After), an object naming an earlier one voiding those after it (a
// renumbering past a stale writer's object, or Recover's empty object past a gap); one that
// names an object not taken is void (it followed a PUT that never landed). One writer's
// objects only: epochs are not compared.
func logOf(t *testing.T, m *objstore.Memory) (out [][]Entry) {
	t.Helper()
	var nums []uint64
	for _, k := range m.Keys() {
		n, ok := format.ParseLogKey(k)
		if !ok {
			continue
		}
		b, _ := m.Object(k)
		h, es, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		for len(nums) > 0 && nums[len(nums)-1] > h.After {
			nums, out = nums[:len(nums)-1], out[:len(out)-1]
		}
		if last := uint64(0); len(nums) > 0 {
			last = nums[len(nums)-1]
			if last != h.After {
				continue
			}
		} else if h.After != 0 {
			continue
		}
		nums, out = append(nums, n), append(out, es)
	}
	return out
}

// TestRecoverRefusesALogThatLostObjects: past the last object of the log, no more than a
// writer with PUTs in flight can leave; a gap followed by more objects than that is a log that
// lost objects, and the start stops, as before several PUTs were in flight.
func TestRecoverRefusesALogThatLostObjects(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{}, false)
	d := n.topic("d", true)
	n.close()
	put := func(seq, after uint64) {
		b := batch(-1, 0, 1, byte(seq))
		binary.BigEndian.PutUint64(b, seq-1)
		o := format.Seal(format.AppendEntry(format.NewObject(nil), d.ID, 0, int64(seq-1), b), Header{Sequence: seq, After: after, Entries: 1})
		if err := m.Put(context.Background(), LogKey(seq), bytes.NewReader(o), int64(len(o))); err != nil {
			t.Fatal(err)
		}
	}
	put(1, 0)
	for seq := uint64(3); seq <= 3+2*MaxPutsInFlightLimit; seq++ { // object 2 lost
		put(seq, seq-1)
	}
	c := New(Config{Bucket: m, Logger: quiet})
	l, err := batchlog.Open(batchlog.Options{Dir: t.TempDir(), MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Diskless: c, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := tier.Restore(ctx, l, l.Meta(), m, quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx, l); err == nil || !strings.Contains(err.Error(), "lost objects") {
		t.Fatalf("recover: %v, want the lost objects refused", err)
	}
}
