package batchlog

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"inlet/wire"
)

// segmentsBuffered is LayoutSegments written through the page cache instead of O_DIRECT.
const segmentsBuffered = "segments-buffered"

func openLayout(t *testing.T, dir, layout string) *Log {
	t.Helper()
	return openLayoutOpts(t, dir, layout, Options{})
}

func openLayoutOpts(t *testing.T, dir, layout string, opts Options) *Log {
	t.Helper()
	opts.Dir, opts.Layout, opts.MaxGroupBytes, opts.MemTableSize, opts.SegmentBytes = dir, layout, 1<<20, 8<<20, 4<<10
	if layout == segmentsBuffered {
		opts.Layout, opts.BufferedSegments = LayoutSegments, true
	}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestBothLayoutsRecoverAfterRestart runs the restart scenario on each layout, with segments
// small enough that the data spans several segment files. The segment layouts stop without
// their final checkpoint, as after a crash: only the first group carried high watermarks and
// producer windows (the checkpoint interval is far longer than the test), so the restart
// rebuilds them by replaying the segments after it.
func TestBothLayoutsRecoverAfterRestart(t *testing.T) {
	for _, layout := range []string{LayoutSegments, segmentsBuffered, LayoutPebble} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			l := openLayoutOpts(t, dir, layout, Options{CheckpointInterval: time.Hour}).withoutFinalCheckpoint()
			topic, _ := l.CreateTopic("t", 2, nil)
			var appends []Append
			for i := 0; i < 40; i++ {
				appends = append(appends, idempotent(topic.Partitions[i%2], 9, 0, int32(i/2*3), 3, byte(i)))
			}
			for i := 0; i < len(appends); i += 4 {
				submitWait(t, l, appends[i:i+4]...)
			}
			l.Close()
			l = openLayout(t, dir, layout)
			defer l.Close()
			topic, _ = l.Topic("t")
			for _, p := range topic.Partitions {
				if p.HighWatermark() != 60 {
					t.Fatalf("partition %d hw %d after restart", p.Index, p.HighWatermark())
				}
				got, err := l.ReadBatches(p, 0, 60, 1<<20, true, nil)
				if err != nil || len(got) != 20*62 {
					t.Fatalf("read %d bytes, err %v", len(got), err)
				}
				for i := 0; i < 20; i++ {
					b := got[i*62 : (i+1)*62]
					if binary.BigEndian.Uint64(b) != uint64(i*3) || b[61] != byte(2*i+int(p.Index)) {
						t.Fatalf("partition %d batch %d: base %d tag %d", p.Index, i, binary.BigEndian.Uint64(b), b[61])
					}
				}
			}
			r := submitWait(t, l, idempotent(topic.Partitions[1], 9, 0, 57, 3, 39))
			if r.Appends[0].BaseOffset != 57 || topic.Partitions[1].HighWatermark() != 60 {
				t.Fatalf("last batch not a duplicate after restart: %+v", r.Appends[0])
			}
		})
	}
}

func TestLayoutMismatchIsRefused(t *testing.T) {
	dir := t.TempDir()
	l := openLayout(t, dir, LayoutPebble)
	l.Close()
	if _, err := Open(Options{Dir: dir, Layout: LayoutSegments}); err == nil {
		t.Fatal("opened a pebble-layout directory as segments")
	}
}

// TestTornSegmentTailIsTruncated appends half an entry and some garbage after the last
// complete group, as a crash during a write would leave it: the restart keeps every complete
// entry, drops the rest, and appends after it.
func TestTornSegmentTailIsTruncated(t *testing.T) {
	for _, layout := range []string{LayoutSegments, segmentsBuffered} {
		t.Run(layout, func(t *testing.T) { testTornSegmentTail(t, layout) })
	}
}

func testTornSegmentTail(t *testing.T, layout string) {
	dir := t.TempDir()
	l := openLayout(t, dir, layout)
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]
	submitWait(t, l, plain(p, 2, 'a'))
	submitWait(t, l, plain(p, 3, 'b'))
	l.Close()
	seg := lastSegment(t, dir)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	entry := make([]byte, 8+62)
	binary.BigEndian.PutUint32(entry, p.ID)
	f.Write(entry[:30]) // torn: header and part of a batch
	f.Close()

	l = openLayout(t, dir, layout)
	defer l.Close()
	p = mustTopic(t, l, "t").Partitions[0]
	if p.HighWatermark() != 5 {
		t.Fatalf("hw %d", p.HighWatermark())
	}
	r := submitWait(t, l, plain(p, 1, 'c'))
	if r.Appends[0].BaseOffset != 5 {
		t.Fatalf("append after torn tail at %d", r.Appends[0].BaseOffset)
	}
	got, _ := l.ReadBatches(p, 0, 6, 1<<20, true, nil)
	if len(got) != 3*62 || got[2*62+61] != 'c' {
		t.Fatalf("read %d bytes after repair", len(got))
	}
}

// TestPebbleTailLossIsReplayedFromSegments simulates Pebble losing its unsynced tail: the
// index, high watermarks, producer windows and checkpoint are rolled back to nothing, and the
// restart must rebuild all of them from the segment files.
func TestPebbleTailLossIsReplayedFromSegments(t *testing.T) {
	for _, layout := range []string{LayoutSegments, segmentsBuffered} {
		t.Run(layout, func(t *testing.T) { testPebbleTailLoss(t, layout) })
	}
}

func testPebbleTailLoss(t *testing.T, layout string) {
	dir := t.TempDir()
	l := openLayout(t, dir, layout)
	topic, _ := l.CreateTopic("t", 2, nil)
	for i := int32(0); i < 6; i++ {
		submitWait(t, l, idempotent(topic.Partitions[i%2], 4, 0, i/2*2, 2, byte(i)))
	}
	l.Close()

	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for _, prefix := range []byte{kindData, kindHigh, kindProducer} {
		_ = b.DeleteRange([]byte{prefix}, []byte{prefix + 1}, nil)
	}
	_ = b.Delete(metaCheckpoint, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()

	l = openLayout(t, dir, layout)
	defer l.Close()
	topic = mustTopic(t, l, "t")
	for _, p := range topic.Partitions {
		if p.HighWatermark() != 6 {
			t.Fatalf("partition %d hw %d after replay", p.Index, p.HighWatermark())
		}
		if got, _ := l.ReadBatches(p, 0, 6, 1<<20, true, nil); len(got) != 3*62 {
			t.Fatalf("read %d bytes after replay", len(got))
		}
	}
	// The producer window came back from the replay: the last batch is a duplicate, a gap is not.
	r := submitWait(t, l, idempotent(topic.Partitions[1], 4, 0, 4, 2, 5), idempotent(topic.Partitions[0], 4, 0, 9, 1, 9))
	if r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != 4 || r.Appends[1].Err != 45 {
		t.Fatalf("after replay: %+v", r.Appends)
	}
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(m) == 0 {
		t.Fatal("no segment files")
	}
	return m[len(m)-1]
}

func mustTopic(t *testing.T, l *Log, name string) *Topic {
	t.Helper()
	topic, ok := l.Topic(name)
	if !ok {
		t.Fatalf("topic %q missing", name)
	}
	return topic
}

// TestDirectGroupsArePaddedToBlocks: with O_DIRECT each group occupies whole blocks, and the
// next group starts on a block boundary; reads see only the entries.
func TestDirectGroupsArePaddedToBlocks(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]
	submitWait(t, l, plain(p, 1, 'a'))
	ss := l.segs
	if !ss.WritesDirect() {
		t.Skip("file system refuses O_DIRECT")
	}
	submitWait(t, l, plain(p, 1, 'b'))
	st, err := os.Stat(lastSegment(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 2*blockSize {
		t.Fatalf("segment is %d bytes after two small groups, want two blocks", st.Size())
	}
	got, _ := l.ReadBatches(p, 0, 2, 1<<20, true, nil)
	if len(got) != 2*62 || got[61] != 'a' || got[123] != 'b' {
		t.Fatalf("read %d bytes", len(got))
	}
}

// TestGroupsOfOnlyDuplicatesBetweenDirectGroups guards the direct path against groups with
// nothing to write (every append a duplicate): such a group is answered without a flush and
// recycled at once, so it must never sit in the list of staged groups the next flush writes
// (the next group reuses the recycled one, and the flush would write it twice).
func TestGroupsOfOnlyDuplicatesBetweenDirectGroups(t *testing.T) {
	dir := t.TempDir()
	l := openLayout(t, dir, LayoutSegments)
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]
	const batches = 50
	for i := range int32(batches) {
		submitWait(t, l, idempotent(p, 5, 0, i, 1, byte(i)))
		if r := submitWait(t, l, idempotent(p, 5, 0, i, 1, byte(i))); r.Appends[0].BaseOffset != int64(i) {
			t.Fatalf("retry of batch %d answered with offset %d", i, r.Appends[0].BaseOffset)
		}
	}
	if p.HighWatermark() != batches {
		t.Fatalf("high watermark %d, want %d", p.HighWatermark(), batches)
	}
	l.Close()
	l = openLayout(t, dir, LayoutSegments)
	defer l.Close()
	p = mustTopic(t, l, "t").Partitions[0]
	got, err := l.ReadBatches(p, 0, batches, 1<<30, true, nil)
	if err != nil || len(got) != batches*62 {
		t.Fatalf("read %d bytes after restart, want %d (err %v)", len(got), batches*62, err)
	}
	for i := range batches {
		if b := got[i*62 : (i+1)*62]; binary.BigEndian.Uint64(b) != uint64(i) || b[61] != byte(i) {
			t.Fatalf("batch %d: base %d tag %d", i, binary.BigEndian.Uint64(b), b[61])
		}
	}
}

// TestCloseWritesFinalCheckpoint: a clean Close leaves Pebble's metadata whole, so the restart
// replays nothing: the high watermarks are in Pebble although no group within the checkpoint
// interval carried them.
func TestCloseWritesFinalCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := openLayoutOpts(t, dir, LayoutSegments, Options{CheckpointInterval: time.Hour})
	topic, _ := l.CreateTopic("t", 2, nil)
	for i := range int32(6) {
		submitWait(t, l, idempotent(topic.Partitions[i%2], 4, 0, i/2*2, 2, byte(i)))
	}
	l.Close()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, p := range topic.Partitions {
		v, c, err := db.Get(partKey(nil, kindHigh, p.ID))
		if err != nil {
			t.Fatalf("partition %d: no high watermark in Pebble after Close: %v", p.Index, err)
		}
		if hw := binary.BigEndian.Uint64(v); hw != 6 {
			t.Errorf("partition %d: high watermark %d in Pebble, want 6", p.Index, hw)
		}
		c.Close()
	}
	var k [producerKeyLen]byte
	putProducerKey(k[:], 4, topic.Partitions[1].ID)
	if _, c, err := db.Get(k[:]); err != nil {
		t.Errorf("no producer window in Pebble after Close: %v", err)
	} else {
		c.Close()
	}
}
