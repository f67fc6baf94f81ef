package batchlog

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/segfs"
)

// indexedBases lists the base offsets of p's batches the index names.
func indexedBases(t *testing.T, l *Log, p *Partition) []int64 {
	t.Helper()
	var bases []int64
	if err := l.IndexedBatches(p, 0, p.HighWatermark()+1, func(base int64, _ int) bool {
		bases = append(bases, base)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return bases
}

func advanceLocal(t *testing.T, l *Log, p *Partition, start int64) error {
	t.Helper()
	return l.RunPass(func(ps *Pass) error { return ps.AdvanceLocalStart(p, start) })
}

// TestLocalStartSurvivesRestartAndPowerLoss: a local log start moved by AdvanceLocalStart
// leaves the log start where it is, drops the index entries of the batches wholly below it
// (the one containing it stays), and comes back after a power loss, where replay reads those
// batches again from the segments and must not index them, and after a clean restart. A log
// start moved past it (DeleteRecords) carries it along; one moved below it leaves it. A
// partition never tiered keeps the two equal.
func TestLocalStartSurvivesRestartAndPowerLoss(t *testing.T) {
	for _, layout := range []string{LayoutSegments, LayoutPebble} {
		t.Run(layout, func(t *testing.T) {
			segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
			opts := Options{Dir: "/data", Layout: layout, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 8 << 10,
				SegmentFS: segFS, PebbleFS: pebFS, CheckpointInterval: time.Hour, // replay rebuilds it all after the crash
				OnFatal: func(err error) { t.Errorf("log stopped: %v", err) }}
			open := func() (*Log, *Partition, *Partition) {
				t.Helper()
				l, err := Open(opts)
				if err != nil {
					t.Fatal(err)
				}
				topic := mustTopic(t, l, "t")
				return l, topic.Partitions[0], topic.Partitions[1]
			}
			l, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.CreateTopic("t", 2, nil); err != nil {
				t.Fatal(err)
			}
			topic := mustTopic(t, l, "t")
			p, other := topic.Partitions[0], topic.Partitions[1]
			for i := range 10 {
				wantOK(t, submitWait(t, l, plain(p, 2, byte(i)), plain(other, 2, byte(i)))) // batches at 0, 2, ..., 18
			}
			if err := advanceLocal(t, l, p, 9); err != nil {
				t.Fatal(err)
			}
			want := func(when string, l *Log, p *Partition, logStart, localStart int64, firstBase int64) {
				t.Helper()
				if got, gotLocal := p.LogStartOffset(), p.LocalLogStartOffset(); got != logStart || gotLocal != localStart {
					t.Fatalf("%s: log start %d, local start %d; want %d and %d", when, got, gotLocal, logStart, localStart)
				}
				if hw := p.HighWatermark(); hw != 20 {
					t.Fatalf("%s: high watermark %d, want 20", when, hw)
				}
				bases := indexedBases(t, l, p)
				if len(bases) == 0 || bases[0] != firstBase || bases[len(bases)-1] != 18 || len(bases) != int(20-firstBase)/2 {
					t.Fatalf("%s: indexed batches %v, want every second offset from %d to 18", when, bases, firstBase)
				}
				got, err := l.ReadBatches(p, localStart, 20, 1<<20, true, nil)
				if err != nil || len(got) != len(bases)*62 || got[61] != byte(firstBase/2) {
					t.Fatalf("%s: read from the local start: %d bytes, err %v", when, len(got), err)
				}
			}
			want("after AdvanceLocalStart", l, p, 0, 9, 8)
			want("the other partition", l, other, 0, 0, 0)
			if err := advanceLocal(t, l, p, 5); err != nil || p.LocalLogStartOffset() != 9 {
				t.Fatalf("a local start below the one in force: err %v, local start %d", err, p.LocalLogStartOffset())
			}
			if err := advanceLocal(t, l, p, 21); !errors.Is(err, ErrLocalStartPastHighWatermark) || p.LocalLogStartOffset() != 9 {
				t.Fatalf("a local start past the high watermark: err %v, local start %d", err, p.LocalLogStartOffset())
			}
			// A synced write of the catalog syncs Pebble's WAL, and the unsynced local start
			// with it: what the reclaim does before a file goes.
			if _, err := l.CreateTopic("sync", 1, nil); err != nil {
				t.Fatal(err)
			}

			crashedSeg, crashedPeb := segFS.Crash(segfs.SyncedOnly, nil, nil), pebFS.CrashClone(vfs.CrashCloneCfg{})
			l.withoutFinalCheckpoint().Close()
			opts.SegmentFS, opts.PebbleFS = crashedSeg, crashedPeb
			l, p, other = open()
			want("after a power loss", l, p, 0, 9, 8)
			want("the other partition after a power loss", l, other, 0, 0, 0)
			l.Close()
			l, p, other = open()
			want("after a clean restart", l, p, 0, 9, 8)

			// DeleteRecords below the local start moves the log start alone.
			if _, err := l.DeleteRecords(p, 4); err != nil {
				t.Fatal(err)
			}
			want("DeleteRecords below the local start", l, p, 4, 9, 8)
			if _, err := l.DeleteRecords(other, 3); err != nil {
				t.Fatal(err)
			}
			want("DeleteRecords on the other partition", l, other, 3, 3, 2)
			l.Close()
			l, p, other = open()
			want("DeleteRecords below the local start, restarted", l, p, 4, 9, 8)
			want("the other partition, restarted", l, other, 3, 3, 2)
			// Past it, the local start follows.
			if _, err := l.DeleteRecords(p, 13); err != nil {
				t.Fatal(err)
			}
			want("DeleteRecords past the local start", l, p, 13, 13, 12)
			l.Close()
			l, p, _ = open()
			defer l.Close()
			want("DeleteRecords past the local start, restarted", l, p, 13, 13, 12)
		})
	}
}

// TestAbortedIndexOutlivesTheLocalStart: the aborted transactions between the log start and
// the local start stay listed (a read_committed read of them from the remote tier needs
// them) after AdvanceLocalStart, a power loss and a clean restart, and the last stable offset
// is not clamped to the local start; the log start moving past them drops them.
func TestAbortedIndexOutlivesTheLocalStart(t *testing.T) {
	segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
	opts := Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 8 << 10,
		SegmentFS: segFS, PebbleFS: pebFS, CheckpointInterval: time.Hour,
		OnFatal: func(err error) { t.Errorf("log stopped: %v", err) },
		Txns:    verifyFunc(func(string, int64, int16, string, int32) bool { return true })}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]
	wantOK(t, submitWait(t, l, transactional(p, 1, 0, 0, 3, 'a'))) // 0..2
	wantOK(t, submitWait(t, l, marker(p, 1, 0, AbortMarker)))      // 3
	wantOK(t, submitWait(t, l, transactional(p, 2, 0, 0, 2, 'b'))) // 4..5, left open
	wantOK(t, submitWait(t, l, plain(p, 2, 'c')))                  // 6..7
	if err := advanceLocal(t, l, p, 6); err != nil {
		t.Fatal(err)
	}
	check := func(when string, l *Log) {
		t.Helper()
		p := mustTopic(t, l, "t").Partitions[0]
		got := p.AbortedTxns(0, 8)
		for i := range got {
			got[i].LastStable = 0 // known when written, unknown (-1) after a replay
		}
		if want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 3}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: aborted %+v, want %+v", when, got, want)
		}
		if lso, local := p.LastStableOffset(), p.LocalLogStartOffset(); lso != 4 || local != 6 || p.LogStartOffset() != 0 {
			t.Fatalf("%s: last stable offset %d, local start %d, log start %d; want 4, 6, 0", when, lso, local, p.LogStartOffset())
		}
	}
	check("after AdvanceLocalStart", l)
	if _, err := l.CreateTopic("sync", 1, nil); err != nil {
		t.Fatal(err)
	}
	crashedSeg, crashedPeb := segFS.Crash(segfs.SyncedOnly, nil, nil), pebFS.CrashClone(vfs.CrashCloneCfg{})
	l.withoutFinalCheckpoint().Close()
	opts.SegmentFS, opts.PebbleFS = crashedSeg, crashedPeb
	if l, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	check("after a power loss", l)
	l.Close()
	if l, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check("after a clean restart", l)
	p = mustTopic(t, l, "t").Partitions[0]
	if _, err := l.DeleteRecords(p, 4); err != nil {
		t.Fatal(err)
	}
	if got := p.AbortedTxns(0, 8); len(got) != 0 {
		t.Fatalf("aborted entry below the log start kept: %+v", got)
	}
}

// goneStore answers every read as a read whose segment was reclaimed meanwhile.
type goneStore struct{ discardStore }

func (goneStore) PlanRead(partition uint32, offset, _ int64, _ int, _ bool, _ *ReadPlan) error {
	return fmt.Errorf("%w: partition %d at %d", errSegmentGone, partition, offset)
}

// TestReadBelowTheLocalStartIsOutOfRange: a read that lost its segment is out of range when it
// asked for an offset below the local start, even with the log start below it (the batches
// are only remote now: the fetch must go there); above the local start it is retried.
func TestReadBelowTheLocalStartIsOutOfRange(t *testing.T) {
	l := newWithStore(goneStore{}, Options{})
	defer l.Close()
	p := &Partition{ID: 1, Topic: "t"}
	p.hw.Store(20)
	if err := l.advanceLocalStart(p, 10, nil); err != nil {
		t.Fatal(err)
	}
	if p.LogStartOffset() != 0 || p.LocalLogStartOffset() != 10 {
		t.Fatalf("log start %d, local start %d; want 0 and 10", p.LogStartOffset(), p.LocalLogStartOffset())
	}
	var plan ReadPlan
	if err := l.PlanRead(p, 5, 20, 1<<20, true, &plan); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the local start: %v, want ErrOffsetOutOfRange", err)
	}
	if err := l.PlanRead(p, 10, 20, 1<<20, true, &plan); !errors.Is(err, errSegmentGone) {
		t.Fatalf("read at the local start: %v, want the segment gone after the retries", err)
	}
}
