package batchlog

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/segfs"
	"inlet/wire"
)

// transactional is an idempotent batch with the transactional attribute.
func transactional(p *Partition, pid int64, epoch int16, seq, n int32, tag byte) Append {
	a := idempotent(p, pid, epoch, seq, n, tag)
	binary.BigEndian.PutUint16(a.Batch[21:], 0x10)
	a.Batch = sealBatch(a.Batch, n)
	a.Transactional = true
	return a
}

func marker(p *Partition, pid int64, epoch int16, kind Marker) Append {
	return MarkerAppend(p, pid, epoch, kind, 0, time.Now().UnixMilli())
}

func wantOK(t *testing.T, r *Request) {
	t.Helper()
	for i, a := range r.Appends {
		if a.Err != wire.ErrNone {
			t.Fatalf("append %d: error %d", i, a.Err)
		}
	}
}

// TestTransactionsOnThePartition: an open transaction holds the last stable offset at its first
// batch, a commit marker releases it, an abort marker records the aborted range; a
// transactional batch the coordinator did not expect, a plain batch inside a transaction and a
// marker from a fenced epoch are refused; a second marker for the same end writes nothing.
// After a clean restart and after a power loss the same state comes back.
func TestTransactionsOnThePartition(t *testing.T) {
	segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
	allowed := map[int64]bool{1: true, 2: true}
	opts := Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 8 << 10,
		SegmentFS: segFS, PebbleFS: pebFS, OnFatal: func(err error) { t.Errorf("log stopped: %v", err) },
		Txns: verifyFunc(func(_ string, pid int64, _ int16, _ string, _ int32) bool { return allowed[pid] })}
	open := func() *Log {
		l, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]

	wantOK(t, submitWait(t, l, transactional(p, 1, 0, 0, 3, 'a'))) // 0..2, producer 1 opens
	wantOK(t, submitWait(t, l, plain(p, 2, 'b')))                  // 3..4
	wantOK(t, submitWait(t, l, transactional(p, 2, 0, 0, 1, 'c'))) // 5, producer 2 opens
	if hw, lso := p.HighWatermark(), p.LastStableOffset(); hw != 6 || lso != 0 {
		t.Fatalf("two open transactions: hw %d lso %d, want 6 and 0", hw, lso)
	}
	if r := submitWait(t, l, transactional(p, 3, 0, 0, 1, 'x')); r.Appends[0].Err != wire.ErrInvalidTxnState {
		t.Fatalf("unexpected transactional batch: error %d", r.Appends[0].Err)
	}
	if r := submitWait(t, l, idempotent(p, 1, 0, 3, 1, 'y')); r.Appends[0].Err != wire.ErrInvalidTxnState {
		t.Fatalf("plain batch inside a transaction: error %d", r.Appends[0].Err)
	}
	if r := submitWait(t, l, transactional(p, 1, 1, 0, 1, 'w')); r.Appends[0].Err != wire.ErrInvalidProducerEpoch {
		t.Fatalf("a new epoch inside an open transaction: error %d, want INVALID_PRODUCER_EPOCH", r.Appends[0].Err)
	}
	r := submitWait(t, l, marker(p, 1, 0, CommitMarker))
	wantOK(t, r)
	if r.Appends[0].BaseOffset != 6 || p.LastStableOffset() != 5 || p.HighWatermark() != 7 {
		t.Fatalf("after commit: marker at %d, lso %d hw %d", r.Appends[0].BaseOffset, p.LastStableOffset(), p.HighWatermark())
	}
	if r := submitWait(t, l, marker(p, 1, 0, CommitMarker)); r.Appends[0].BaseOffset != -1 || p.HighWatermark() != 7 {
		t.Fatalf("repeated marker wrote at %d", r.Appends[0].BaseOffset)
	}
	// Producer 2's transaction is aborted by the coordinator at a bumped epoch: its old epoch
	// is fenced from then on.
	r = submitWait(t, l, marker(p, 2, 1, AbortMarker))
	wantOK(t, r)
	if p.LastStableOffset() != 8 || p.HighWatermark() != 8 {
		t.Fatalf("after abort: lso %d hw %d", p.LastStableOffset(), p.HighWatermark())
	}
	if r := submitWait(t, l, transactional(p, 2, 0, 1, 1, 'z')); r.Appends[0].Err != wire.ErrInvalidProducerEpoch {
		t.Fatalf("fenced epoch after the abort: error %d", r.Appends[0].Err)
	}
	wantOK(t, submitWait(t, l, transactional(p, 1, 0, 3, 2, 'd'))) // 8..9, producer 1 opens again
	wantAborted := []AbortedTxn{{ProducerID: 2, FirstOffset: 5, LastOffset: 7}}
	check := func(when string, l *Log) {
		t.Helper()
		p := mustTopic(t, l, "t").Partitions[0]
		if hw, lso := p.HighWatermark(), p.LastStableOffset(); hw != 10 || lso != 8 {
			t.Fatalf("%s: hw %d lso %d, want 10 and 8", when, hw, lso)
		}
		got := p.AbortedTxns(0, 10)
		for i := range got {
			// Known when the marker was written (8); after a replay, unknown (-1).
			if got[i].LastStable == 8 || got[i].LastStable == -1 {
				got[i].LastStable = 0
			}
		}
		if !reflect.DeepEqual(got, wantAborted) {
			t.Fatalf("%s: aborted %+v", when, got)
		}
		if got := p.AbortedTxns(8, 10); len(got) != 0 {
			t.Fatalf("%s: aborted after the range: %+v", when, got)
		}
		if got := p.AbortedTxns(0, 5); len(got) != 0 {
			t.Fatalf("%s: aborted before the range: %+v", when, got)
		}
	}
	check("before a restart", l)

	// A power loss: only what was synced survives, and replay reads the markers again.
	crashed, pebCrashed := segFS.Crash(segfs.SyncedOnly, nil, nil), pebFS.CrashClone(vfs.CrashCloneCfg{})
	l.Close()
	opts.SegmentFS, opts.PebbleFS = crashed, pebCrashed
	segFS, pebFS = crashed, pebCrashed
	l = open()
	check("after a power loss", l)
	p = mustTopic(t, l, "t").Partitions[0]
	wantOK(t, submitWait(t, l, marker(p, 1, 0, CommitMarker)))
	if p.LastStableOffset() != 11 {
		t.Fatalf("commit after the power loss: lso %d", p.LastStableOffset())
	}
	l.Close()
	l = open()
	defer l.Close()
	p = mustTopic(t, l, "t").Partitions[0]
	if p.LastStableOffset() != 11 || p.HighWatermark() != 11 || len(p.AbortedTxns(0, 11)) != 1 {
		t.Fatalf("after a clean restart: lso %d hw %d aborted %v", p.LastStableOffset(), p.HighWatermark(), p.AbortedTxns(0, 11))
	}
	// Retention past the abort marker drops the aborted entry.
	if _, err := l.DeleteRecords(p, 8); err != nil {
		t.Fatal(err)
	}
	if got := p.AbortedTxns(0, 11); len(got) != 0 {
		t.Fatalf("aborted entry below the log start kept: %v", got)
	}
}
