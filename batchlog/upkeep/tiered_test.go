package upkeep

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"inlet/batchlog"
)

// fakeTier says the remote tier holds every partition's batches below uploaded.
type fakeTier struct{ uploaded atomic.Int64 }

func (f *fakeTier) UploadedEnd(*batchlog.Partition) int64 { return f.uploaded.Load() }

func tieredPasses(l *batchlog.Log, tier Tier) *Upkeep {
	return Start(l, Config{RetentionCheckInterval: -1, Tier: tier})
}

func wantStarts(t *testing.T, when string, p *batchlog.Partition, logStart, localStart int64) {
	t.Helper()
	if got, local := p.LogStartOffset(), p.LocalLogStartOffset(); got != logStart || local != localStart {
		t.Fatalf("%s: log start %d, local start %d; want %d and %d", when, got, local, logStart, localStart)
	}
}

// TestLocalRetentionStopsAtTheUploadedEnd: local.retention.bytes moves the local start, never
// past what the remote tier holds (not even into a batch it holds only part of), and leaves the
// log start; the batches below the local start are no longer read from this node.
func TestLocalRetentionStopsAtTheUploadedEnd(t *testing.T) {
	l := openTemp(t, t.TempDir())
	defer l.Close()
	tier := &fakeTier{}
	u := tieredPasses(l, tier)
	tp, err := l.CreateTopic("tiered", 1, map[string]string{"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.bytes": "124"})
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0]
	now := time.Now()
	for i := range 5 {
		submitWait(t, l, stampedBatch(p, 2, now.UnixMilli(), 62, byte(i))) // 0..9, 62 bytes each
	}
	for _, c := range []struct {
		uploaded, local int64
	}{
		{0, 0},  // nothing uploaded: everything stays
		{3, 2},  // 0..1 uploaded, 2..3 only half
		{6, 6},  // 0..5
		{7, 6},  // 6..7 only half
		{10, 6}, // all of it, but 124 bytes stay local
	} {
		tier.uploaded.Store(c.uploaded)
		if err := u.EnforceRetention(now); err != nil {
			t.Fatal(err)
		}
		wantStarts(t, fmt.Sprintf("uploaded to %d", c.uploaded), p, 0, c.local)
		if c.local > 0 {
			got, err := l.ReadBatches(p, 0, p.HighWatermark(), 1<<20, true, nil)
			if err != nil || len(got) == 0 || got[61] != byte(c.local/2) {
				t.Fatalf("uploaded to %d: the first batch read from this node is not the one at the local start %d (err %v)", c.uploaded, c.local, err)
			}
		}
	}
}

// TestTotalRetentionByTimePassesTheUploadedEnd: retention.ms on a tiered topic moves the log
// start (and the local start with it) past expired batches whether or not they are uploaded;
// local.retention.ms moves only the local start, up to the uploaded end.
func TestTotalRetentionByTimePassesTheUploadedEnd(t *testing.T) {
	l := openTemp(t, t.TempDir())
	defer l.Close()
	tier := &fakeTier{}
	u := tieredPasses(l, tier)
	now := time.Now()
	old, err := l.CreateTopic("expired", 1, map[string]string{"remote.storage.enable": "true", "retention.ms": "60000", "local.retention.ms": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	aging, err := l.CreateTopic("aging", 1, map[string]string{"remote.storage.enable": "true", "retention.ms": "60000", "local.retention.ms": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	po, pa := old.Partitions[0], aging.Partitions[0]
	for i := range 5 {
		submitWait(t, l, stampedBatch(po, 2, now.Add(-time.Hour).UnixMilli(), 62, byte(i))) // past both limits
		ts := now.Add(-10 * time.Second)                                                    // past the local limit only
		if i >= 3 {
			ts = now
		}
		submitWait(t, l, stampedBatch(pa, 2, ts.UnixMilli(), 62, byte(i)))
	}
	tier.uploaded.Store(4)
	if err := u.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	wantStarts(t, "expired by retention.ms, 4 uploaded", po, 10, 10)
	wantStarts(t, "expired by local.retention.ms, 4 uploaded", pa, 0, 4)
	tier.uploaded.Store(10)
	if err := u.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	wantStarts(t, "expired by local.retention.ms, all uploaded", pa, 0, 6)
}

// TestTieredTopicWithoutTierIsRetainedAsLocal: with no Config.Tier, a topic with
// remote.storage.enable is retained as any other: local limits do nothing, retention.bytes
// moves the log start.
func TestTieredTopicWithoutTierIsRetainedAsLocal(t *testing.T) {
	l := openTemp(t, t.TempDir())
	defer l.Close()
	u := passes(l)
	tp, err := l.CreateTopic("tiered", 1, map[string]string{"remote.storage.enable": "true", "retention.ms": "-1", "retention.bytes": "124", "local.retention.bytes": "62"})
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0]
	for i := range 4 {
		submitWait(t, l, stampedBatch(p, 1, time.Now().UnixMilli(), 62, byte(i)))
	}
	if err := u.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	wantStarts(t, "no tier", p, 2, 2)
}

// TestLocalRetentionReclaimsSegments: segment files that hold only batches below the local
// start are deleted by the reclaim, although the log start has not moved past them (their
// batches pin no file), and they stay while the tier has not uploaded them. The local start survives a restart.
func TestLocalRetentionReclaimsSegments(t *testing.T) {
	dir := t.TempDir()
	open := func() *batchlog.Log {
		// A checkpoint with every group: segments after the checkpoint are never reclaimed.
		l, err := batchlog.Open(batchlog.Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 64, CheckpointInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	tier := &fakeTier{}
	// No copies forward: a file goes only once no batch indexed on this node is in it.
	u := start(l, Config{RetentionCheckInterval: -1, Tier: tier}, hooks{noRelocate: true})
	tp, err := l.CreateTopic("tiered", 1, map[string]string{"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.bytes": "0"})
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0]
	for i := range 5 {
		submitWait(t, l, plain(p, 2, byte(i)))
	}
	before := segmentFiles(t, dir)
	if before < 4 {
		t.Fatalf("expected a segment per group with 64-byte segments, have %d files", before)
	}
	if err := u.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	wantStarts(t, "nothing uploaded", p, 0, 0)
	if after := segmentFiles(t, dir); after < before {
		t.Fatalf("segment files %d before, %d after, with nothing uploaded", before, after)
	}
	tier.uploaded.Store(p.HighWatermark())
	if err := u.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	wantStarts(t, "all uploaded", p, 0, 10)
	if after := segmentFiles(t, dir); after >= before {
		t.Fatalf("segment files %d before local retention, %d after; none reclaimed", before, after)
	}
	l.Close()
	l = open()
	defer l.Close()
	wantStarts(t, "restarted", mustTopic(t, l, "tiered").Partitions[0], 0, 10)
}
