package batchlog

import (
	"encoding/binary"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/segfs"
	"inlet/wire"
)

// TestFullDiskAnswersStorageErrorAndResumes: while segment writes fail with ENOSPC, appends
// are answered KAFKA_STORAGE_ERROR and nothing is acknowledged, reads go on, and once space
// returns the producer's retries are written where they belong, exactly once, across a
// power loss too.
func TestFullDiskAnswersStorageErrorAndResumes(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
		var full atomic.Bool
		segFS.Inject(func(op segfs.Op, name string) error {
			if op == segfs.OpWrite && full.Load() {
				return syscall.ENOSPC
			}
			return nil
		})
		opts := Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 16 << 10,
			SegmentFS: segFS, PebbleFS: pebFS, BufferedSegments: buffered, noSpaceRetry: 5 * time.Millisecond,
			OnFatal: func(err error) { t.Errorf("buffered=%v: the log stopped: %v", buffered, err) }}
		l, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		topic, _ := l.CreateTopic("t", 1, nil)
		p := topic.Partitions[0]
		seq := int32(0)
		for range 20 {
			r := submitWait(t, l, idempotent(p, 1, 0, seq, 5, 'a'))
			if r.Appends[0].Err != wire.ErrNone {
				t.Fatalf("before the disk filled: error %d", r.Appends[0].Err)
			}
			seq += 5
		}
		acked := p.HighWatermark()

		full.Store(true)
		for i := range 10 {
			r := submitWait(t, l, idempotent(p, 1, 0, seq, 5, 'b'))
			if r.Appends[0].Err != wire.ErrKafkaStorageError {
				t.Fatalf("buffered=%v: append %d on a full disk answered %d, want KAFKA_STORAGE_ERROR", buffered, i, r.Appends[0].Err)
			}
			if got, err := l.ReadBatches(p, 0, p.HighWatermark(), 1<<20, true, nil); err != nil || len(got) != 20*62 {
				t.Fatalf("buffered=%v: read on a full disk: %d bytes, %v", buffered, len(got), err)
			}
			time.Sleep(2 * time.Millisecond) // some appends meet a resume attempt
		}
		if p.HighWatermark() != acked {
			t.Fatalf("buffered=%v: high watermark moved from %d to %d on a full disk", buffered, acked, p.HighWatermark())
		}

		full.Store(false)
		time.Sleep(10 * time.Millisecond)
		for range 10 {
			r := submitWait(t, l, idempotent(p, 1, 0, seq, 5, 'c'))
			if r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != int64(seq) {
				t.Fatalf("buffered=%v: retry of seq %d after space returned: error %d at %d", buffered, seq, r.Appends[0].Err, r.Appends[0].BaseOffset)
			}
			seq += 5
		}
		checkSeqs := func(l *Log, when string) {
			p := mustTopic(t, l, "t").Partitions[0]
			got, err := l.ReadBatches(p, 0, p.HighWatermark(), 1<<20, true, nil)
			if err != nil || p.HighWatermark() != int64(seq) {
				t.Fatalf("buffered=%v, %s: high watermark %d, want %d (%v)", buffered, when, p.HighWatermark(), seq, err)
			}
			for i := 0; len(got) > 0; i++ {
				if base, s := binary.BigEndian.Uint64(got), binary.BigEndian.Uint32(got[53:]); base != uint64(5*i) || s != uint32(5*i) {
					t.Fatalf("buffered=%v, %s: batch %d at offset %d with sequence %d", buffered, when, i, base, s)
				}
				got = got[62:]
			}
		}
		checkSeqs(l, "after space returned")
		crashed := segFS.Crash(segfs.SyncedOnly, nil, nil)
		pebCrashed := pebFS.CrashClone(vfs.CrashCloneCfg{})
		l.Close()
		opts.SegmentFS, opts.PebbleFS = crashed, pebCrashed
		if l, err = Open(opts); err != nil {
			t.Fatal(err)
		}
		checkSeqs(l, "after a power loss")
		l.Close()
	}
}
