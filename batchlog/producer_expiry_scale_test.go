package batchlog

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"inlet/wire"
)

// TestManyShortLivedProducersStayBounded: "100,000 producer ids over a test run with a short
// expiration: state and start-up time bounded". Producer ids arrive in rounds, each round's ids
// written once and never again; between rounds the expiry pass runs with a time past the
// expiration of every earlier round (a synthetic now: nothing sleeps for the expiration). One
// long-lived producer writes in every round and must survive every pass.
//
// Asserted on counts, never on wall-clock time (the machine is shared and loaded):
//   - live windows after each pass: exactly this round's plus the long-lived one, and each
//     pass drops exactly the previous round; before the pass at most two rounds' worth (the
//     previous round stays live until this round's pass, which is the most the expiration
//     allows here);
//   - after a clean Close and restart: the windows loaded and the producer keys in Pebble are
//     the last round's plus the long-lived one, and the segments layout replays nothing;
//   - after a crash-like close (noFinalCheckpoint) and restart: at most two rounds' worth,
//     because the deletes of the last pass had not reached a checkpoint yet (they come back
//     until the next pass, producer_expiry.go), and the segments layout replays at most the
//     last round; the next pass brings it back to one round.
//
// Start-up time is logged, not asserted: what it depends on (windows loaded, keys scanned,
// batches replayed) is what the counts above bound.
func TestManyShortLivedProducersStayBounded(t *testing.T) {
	for _, layout := range []string{LayoutSegments, LayoutPebble} {
		t.Run(layout, func(t *testing.T) { testManyShortLivedProducers(t, layout) })
	}
}

// keeperPID is the long-lived producer's id, far from the short-lived ones.
const keeperPID = int64(1) << 40

func testManyShortLivedProducers(t *testing.T, layout string) {
	rounds, roundSize := 20, 5000 // 100,000 short-lived producer ids
	if raceEnabled {
		rounds, roundSize = 10, 2000 // the race detector makes the committer several times slower
	}
	const (
		perRequest = 100
		exp        = time.Hour
	)
	// A clean session of rounds-2 rounds, then a crash-like session of the last 2.
	cleanRounds := rounds - 2

	dir := t.TempDir()
	var replay replayLog
	opts := Options{Logger: slog.New(&replay)}

	l := openLayoutOpts(t, dir, layout, opts)
	topic, err := l.CreateTopic("t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := topic.Partitions[0]

	nextPID := int64(0)
	keeperSeq := int32(0)
	var keeperOffset int64
	// round writes roundSize new producer ids and the long-lived producer's next batch, then
	// runs the expiry pass for everything written before the round started. firstAlone
	// submits the round's first request by itself before the others (see the crash session).
	round := func(l *Log, firstAlone bool) (mark time.Time) {
		t.Helper()
		// Every earlier round's windows were written before this sleep, so their LastWrite
		// (unix ms of the group's time) is below mark's millisecond; this round's are not.
		time.Sleep(2 * time.Millisecond)
		mark = time.Now()
		var reqs [][]Append
		for i := 0; i < roundSize; i += perRequest {
			appends := make([]Append, 0, perRequest+1)
			if i == 0 {
				appends = append(appends, idempotent(p, keeperPID, 0, keeperSeq, 1, 'k'))
			}
			for j := 0; j < perRequest && i+j < roundSize; j++ {
				appends = append(appends, idempotent(p, nextPID, 0, 0, 1, 'a'))
				nextPID++
			}
			reqs = append(reqs, appends)
		}
		keeper := &reqs[0][0] // Request.Appends shares the array: its results land here
		if firstAlone {
			submitAll(t, l, reqs[:1])
			reqs = reqs[1:]
		}
		submitAll(t, l, reqs)
		keeperOffset = keeper.BaseOffset
		keeperSeq++

		// Before the pass: the previous round (still within its expiration until now), this
		// round and the long-lived producer.
		if n := liveWindows(t, l); n > 2*roundSize+1 {
			t.Fatalf("%d producer windows live before the pass, want at most %d (two rounds and the long-lived producer)", n, 2*roundSize+1)
		}
		dropped := expireProducers(l, exp, mark.Add(exp))
		if n := liveWindows(t, l); n != roundSize+1 {
			t.Fatalf("%d producer windows live after the pass (%d dropped), want %d (this round and the long-lived producer)", n, dropped, roundSize+1)
		}
		return mark
	}

	// Clean session: every pass after the first drops exactly the round before.
	for r := 0; r < cleanRounds; r++ {
		before := liveWindows(t, l)
		round(l, false)
		if r > 0 && before != roundSize+1 {
			t.Fatalf("round %d: %d windows live before it, want %d", r, before, roundSize+1)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart after a clean Close: the final checkpoint holds the last pass's deletes.
	replay.reset()
	began := time.Now()
	l = openLayoutOpts(t, dir, layout, opts).withoutFinalCheckpoint()
	took := time.Since(began)
	t.Logf("%s: Open after %d producer ids and a clean Close: %v (%d windows loaded, %d producer keys, %d batches replayed)",
		layout, nextPID, took, liveWindows(t, l), producerKeys(t, l), replay.batches())
	if n := liveWindows(t, l); n != roundSize+1 {
		t.Fatalf("%d producer windows loaded after a clean restart, want %d (the last round and the long-lived producer)", n, roundSize+1)
	}
	if n := producerKeys(t, l); n != roundSize+1 {
		t.Fatalf("%d producer keys in Pebble after a clean restart, want %d", n, roundSize+1)
	}
	if n := replay.batches(); n != 0 {
		t.Fatalf("%d batches replayed after a clean Close, want 0 (the final checkpoint covers them)", n)
	}
	topic, _ = l.Topic("t")
	p = topic.Partitions[0]

	// Crash-like session: the last round starts at least one checkpoint interval after the
	// groups before it, so its first group carries a checkpoint (commitGroup); the rest of the
	// round and the last pass's deletes are after it, as a crash at any moment can leave at
	// most one checkpoint interval of writes and passes.
	for r := cleanRounds; r < rounds-1; r++ {
		round(l, false)
	}
	time.Sleep(defaultCheckpointInterval + 10*time.Millisecond)
	lastMark := round(l, true)
	if err := l.Close(); err != nil { // noFinalCheckpoint: nothing since the last checkpoint is written
		t.Fatal(err)
	}
	if nextPID != int64(rounds*roundSize) {
		t.Fatalf("wrote %d producer ids, want %d", nextPID, rounds*roundSize)
	}

	replay.reset()
	began = time.Now()
	l = openLayoutOpts(t, dir, layout, opts)
	took = time.Since(began)
	defer l.Close()
	loaded, keys, replayed := liveWindows(t, l), producerKeys(t, l), replay.batches()
	t.Logf("%s: Open after %d producer ids and a crash-like close: %v (%d windows loaded, %d producer keys, %d batches replayed)",
		layout, nextPID, took, loaded, keys, replayed)
	// The previous round's windows were deleted only by the last pass, after the checkpoint.
	if loaded > 2*roundSize+1 {
		t.Fatalf("%d producer windows loaded after a crash-like restart, want at most %d (two rounds and the long-lived producer)", loaded, 2*roundSize+1)
	}
	// replaySegments stores every replayed window in Pebble: keys and windows agree.
	if keys > 2*roundSize+1 {
		t.Fatalf("%d producer keys in Pebble after a crash-like restart, want at most %d", keys, 2*roundSize+1)
	}
	if replayed > roundSize+1 {
		t.Fatalf("%d batches replayed after a crash-like close, want at most %d (the last round, after its first group's checkpoint)", replayed, roundSize+1)
	}
	// The next pass drops what the crash brought back: windows loaded from Pebble keep their
	// last write time; replayed ones count from start-up, which is after lastMark.
	expireProducers(l, exp, lastMark.Add(exp))
	if n := liveWindows(t, l); n != roundSize+1 {
		t.Fatalf("%d producer windows live after the first pass since the restart, want %d", n, roundSize+1)
	}
	// The long-lived producer's window survived every pass and both restarts: its last batch,
	// retried, is a duplicate.
	r := submitWait(t, l, idempotent(p, keeperPID, 0, keeperSeq-1, 1, 'k'))
	if a := r.Appends[0]; a.Err != wire.ErrNone || a.BaseOffset != keeperOffset {
		t.Fatalf("the long-lived producer's retry after the restarts: err %d, offset %d, want a duplicate at %d", a.Err, a.BaseOffset, keeperOffset)
	}
}

// submitAll submits every request at once (they share group commits) and waits for all of
// them; every append must succeed.
func submitAll(t *testing.T, l *Log, reqs [][]Append) {
	t.Helper()
	var wg sync.WaitGroup
	rs := make([]*Request, len(reqs))
	for i, appends := range reqs {
		wg.Add(1)
		rs[i] = &Request{Appends: appends, Done: func(*Request) { wg.Done() }}
		l.Submit(rs[i])
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("requests not answered")
	}
	for _, r := range rs {
		for _, a := range r.Appends {
			if a.Err != wire.ErrNone || a.BaseOffset < 0 {
				t.Fatalf("append of producer %d: err %d, offset %d", a.ProducerID, a.Err, a.BaseOffset)
			}
		}
	}
}

// liveWindows counts the producer windows in memory, on the committer that owns them.
func liveWindows(t *testing.T, l *Log) int {
	t.Helper()
	n := 0
	done := make(chan struct{})
	l.Submit(&Request{Inspect: func() { n = len(l.producers) }, Done: func(*Request) { close(done) }})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("inspect request not answered")
	}
	return n
}

// producerKeys counts the producer windows stored in Pebble (what the next start-up scans).
func producerKeys(t *testing.T, l *Log) int {
	t.Helper()
	n := 0
	err := l.scan([]byte{kindProducer}, func([]byte, []byte) error {
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// replayLog is a slog handler that keeps the batch count of replaySegments' "replayed segment
// tail" record and drops everything else.
type replayLog struct {
	mu sync.Mutex
	n  int64
}

func (h *replayLog) reset() { h.mu.Lock(); h.n = 0; h.mu.Unlock() }

func (h *replayLog) batches() int { h.mu.Lock(); defer h.mu.Unlock(); return int(h.n) }

func (h *replayLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *replayLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "batchlog: replayed segment tail" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "batches" {
			h.mu.Lock()
			h.n += a.Value.Int64()
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *replayLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *replayLog) WithGroup(string) slog.Handler      { return h }
