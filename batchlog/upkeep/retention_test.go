package upkeep

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"inlet/batchlog"
)

func segmentFiles(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "segments"))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestRetentionAdvancesLogStartAndReclaimsSegments guards time retention: expired batches
// leave the log (the log start moves past them and survives a restart), and segment files no
// partition references any more are deleted.
func TestRetentionAdvancesLogStartAndReclaimsSegments(t *testing.T) {
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
	u := passes(l)
	old, err := l.CreateTopic("old", 1, map[string]string{"retention.ms": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	p := old.Partitions[0]
	for i := 0; i < 5; i++ {
		submitWait(t, l, plain(p, 2, byte(i))) // fake batches carry max timestamp 0: long expired
	}
	before := segmentFiles(t, dir)
	if before < 4 {
		t.Fatalf("expected a segment per group with 64-byte segments, have %d files", before)
	}
	if err := u.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := p.LogStartOffset(); got != 10 {
		t.Fatalf("log start after retention %d, want 10 (the high watermark)", got)
	}
	if b, _ := l.ReadBatches(p, 0, p.HighWatermark(), 1<<20, true, nil); len(b) != 0 {
		t.Fatalf("read %d bytes of expired batches", len(b))
	}
	if after := segmentFiles(t, dir); after >= before {
		t.Fatalf("segment files %d before retention, %d after; none reclaimed", before, after)
	}
	// New data is kept, and the log start survives a restart.
	submitWait(t, l, plain(p, 1, 9))
	l.Close()
	l = open()
	defer l.Close()
	tp, _ := l.Topic("old")
	if got := tp.Partitions[0].LogStartOffset(); got != 10 {
		t.Fatalf("log start after restart %d, want 10", got)
	}
	if b, _ := l.ReadBatches(tp.Partitions[0], 10, tp.Partitions[0].HighWatermark(), 1<<20, true, nil); len(b) == 0 {
		t.Fatal("the batch written after retention is gone")
	}
}

// TestRetentionBytesKeepsNewest guards size retention as Kafka does it
// (UnifiedLog.deleteRetentionSizeBreachedSegments): the oldest batch goes while the partition
// stays at or above retention.bytes without it.
func TestRetentionBytesKeepsNewest(t *testing.T) {
	l := openTemp(t, t.TempDir())
	u := passes(l)
	tp, _ := l.CreateTopic("sized", 1, map[string]string{"retention.bytes": "124", "retention.ms": "-1"})
	p := tp.Partitions[0]
	for i := 0; i < 4; i++ {
		submitWait(t, l, plain(p, 1, byte(i))) // 62 bytes each
	}
	if err := u.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := p.LogStartOffset(); got != 2 {
		t.Fatalf("log start %d, want 2 (248 bytes, 124 kept)", got)
	}
}

// TestRetentionRacesReads: reads of a partition's oldest batches run while retention moves its
// log start and reclaims the segments under them, over and over. A read either returns data
// or says the offset is out of range; it never meets a closed file or an index naming a
// segment that is gone.
// TestRetentionRacesReads: reads of the segments retention removes never fail (they see the
// new log start, or the file they took a reference to), with a checkpoint after every group
// and with the default interval (the checkpoint lagging the writes by up to 100 ms).
func TestRetentionRacesReads(t *testing.T) {
	for _, every := range []time.Duration{-1, 0} {
		t.Run(fmt.Sprintf("checkpoint=%v", every), func(t *testing.T) { testRetentionRacesReads(t, every) })
	}
}

func testRetentionRacesReads(t *testing.T, checkpointEvery time.Duration) {
	dir := t.TempDir()
	l, err := batchlog.Open(batchlog.Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 4096, CheckpointInterval: checkpointEvery})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u := passes(l)
	tp, _ := l.CreateTopic("r", 1, map[string]string{"retention.bytes": "4096", "retention.ms": "-1"})
	p := tp.Partitions[0]
	stop := make(chan struct{})
	errs := make(chan error, 4)
	reads := make([]int, 4)
	for r := range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				from := p.LogStartOffset()
				_, err := l.ReadBatches(p, from, p.HighWatermark(), 1<<20, true, nil)
				if err != nil && err != batchlog.ErrOffsetOutOfRange {
					errs <- err
					return
				}
				reads[r]++
			}
		}()
	}
	reclaimed := 0
	for i := 0; i < 400; i++ {
		submitWait(t, l, plain(p, 4, byte(i)))
		if i%10 == 9 {
			if err := u.EnforceRetention(time.Now()); err != nil {
				t.Fatal(err)
			}
			reclaimed++
		}
	}
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("a read racing retention: %v", err)
		}
	}
	if p.LogStartOffset() == 0 || segmentFiles(t, dir) > 200 {
		t.Fatalf("log start %d, %d segment files: retention did not run", p.LogStartOffset(), segmentFiles(t, dir))
	}
	t.Logf("%d retention passes, reads %v, log start %d, %d segment files left", reclaimed, reads, p.LogStartOffset(), segmentFiles(t, dir))
}
