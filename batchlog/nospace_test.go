package batchlog

import (
	"encoding/binary"
	"errors"
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
			SegmentFS: segFS, PebbleFS: pebFS, BufferedSegments: buffered,
			OnFatal: func(err error) { t.Errorf("buffered=%v: the log stopped: %v", buffered, err) }}
		l, err := open(opts, 5*time.Millisecond)
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
		if l, err = open(opts, 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		checkSeqs(l, "after a power loss")
		l.Close()
	}
}

// TestReserveSuspendsWritesBeforeTheDiskIsFull: below MinFreeBytes appends are refused with
// KAFKA_STORAGE_ERROR though no write has failed; above it again, they are written.
func TestReserveSuspendsWritesBeforeTheDiskIsFull(t *testing.T) {
	segFS := segfs.NewCrashableMem()
	l, err := open(Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentFS: segFS,
		PebbleFS: vfs.NewCrashableMem(), MinFreeBytes: 64 << 20,
		OnFatal: func(err error) { t.Errorf("the log stopped: %v", err) }}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := mustCreate(t, l, "t")
	if r := submitWait(t, l, idempotent(p, 1, 0, 0, 1, 'a')); r.Appends[0].Err != wire.ErrNone {
		t.Fatalf("with space: error %d", r.Appends[0].Err)
	}
	segFS.SetFreeBytes(32 << 20)
	time.Sleep(2 * freeCheckEvery)
	for i := range 3 {
		if r := submitWait(t, l, idempotent(p, 1, 0, 1, 1, 'b')); r.Appends[0].Err != wire.ErrKafkaStorageError {
			t.Fatalf("append %d below the reserve answered %d", i, r.Appends[0].Err)
		}
	}
	if !l.Stats().WritesSuspended || p.HighWatermark() != 1 {
		t.Fatalf("suspended %v, high watermark %d", l.Stats().WritesSuspended, p.HighWatermark())
	}
	segFS.SetFreeBytes(128 << 20)
	time.Sleep(5 * time.Millisecond)
	if r := submitWait(t, l, idempotent(p, 1, 0, 1, 1, 'b')); r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != 1 {
		t.Fatalf("once space returned: %+v", r.Appends[0])
	}
}

// TestFailedSyncStopsTheLogAndTheRestartRecovers: an fdatasync that fails (EIO) is never
// retried: the log stops (OnFatal), refuses every later append, and a restart on what the
// disk kept has every acknowledged batch.
func TestFailedSyncStopsTheLogAndTheRestartRecovers(t *testing.T) {
	segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
	var fatal atomic.Value
	var failSync atomic.Bool
	segFS.Inject(func(op segfs.Op, name string) error {
		if op == segfs.OpSync && failSync.Load() {
			return syscall.EIO
		}
		return nil
	})
	opts := Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentFS: segFS, PebbleFS: pebFS,
		OnFatal: func(err error) { fatal.Store(err) }}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := mustCreate(t, l, "t")
	for seq := int32(0); seq < 10; seq++ {
		if r := submitWait(t, l, idempotent(p, 1, 0, seq, 1, 'a')); r.Appends[0].Err != wire.ErrNone {
			t.Fatalf("before the failure: error %d", r.Appends[0].Err)
		}
	}
	failSync.Store(true)
	if r := submitWait(t, l, idempotent(p, 1, 0, 10, 1, 'b')); r.Appends[0].Err != wire.ErrKafkaStorageError {
		t.Fatalf("append whose sync failed answered %d", r.Appends[0].Err)
	}
	if err, _ := fatal.Load().(error); !errors.Is(err, syscall.EIO) {
		t.Fatalf("OnFatal got %v, want the EIO", err)
	}
	failSync.Store(false) // the device recovers; the log must not
	if r := submitWait(t, l, idempotent(p, 1, 0, 10, 1, 'b')); r.Appends[0].Err != wire.ErrKafkaStorageError {
		t.Fatalf("append after a failed sync answered %d: a sync was retried", r.Appends[0].Err)
	}
	segAfter, pebAfter := segFS.Crash(segfs.SyncedOnly, nil, nil), pebFS.CrashClone(vfs.CrashCloneCfg{})
	l.Close()
	opts.SegmentFS, opts.PebbleFS, opts.OnFatal = segAfter, pebAfter, func(err error) { t.Errorf("after the restart: %v", err) }
	if l, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p = mustTopic(t, l, "t").Partitions[0]
	if p.HighWatermark() != 10 {
		t.Fatalf("high watermark %d after the restart, want the 10 acknowledged", p.HighWatermark())
	}
	if r := submitWait(t, l, idempotent(p, 1, 0, 10, 1, 'b')); r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != 10 {
		t.Fatalf("retry after the restart: %+v", r.Appends[0])
	}
}
