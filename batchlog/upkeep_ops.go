package batchlog

// What the upkeep passes (package upkeep: retention, compaction, the reclaim of segment files,
// producer expiry) may do to the log. The passes decide; these operations act, through the
// committer where the change is to record data or index entries, directly in Pebble where it
// is the log's own bookkeeping (log starts, compacted-to marks).
//
// A pass that changes log starts, index entries or segment files runs inside Log.RunPass,
// which holds retainMu: DeleteRecords, topic deletion and the resume after a full disk wait
// for it, and it for them. The operations that need that hold are methods of the *Pass it
// is handed; reads that do not are methods of Log.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"inlet/batchlog/reclaimplan"
	"inlet/batchlog/segments"
	"inlet/wire"
)

// Pass is an upkeep pass's hold on the log, valid only inside the Log.RunPass call that gave
// it.
type Pass struct{ l *Log }

// RunPass runs fn holding retainMu, so that no other pass, DeleteRecords, topic deletion or
// full-disk resume changes a log start, an index entry or a segment file beside it. With
// nothing stored (discard) or the log closed, fn is not run and RunPass returns nil.
func (l *Log) RunPass(fn func(*Pass) error) error {
	if l.db == nil {
		return nil
	}
	l.retainMu.Lock()
	defer l.retainMu.Unlock()
	if l.closed.Load() {
		return nil // Close may have closed the store while this waited for the lock
	}
	return fn(&Pass{l: l})
}

// Closing reports whether Close has begun: a long pass stops early.
func (ps *Pass) Closing() bool { return ps.l.closed.Load() }

// IndexedBatches calls fn with the base offset and stored size of each batch of p the index
// names with a base in [from, to), in offset order, until fn returns false. With segments the
// size is the index entry's (nothing is read from the files); with record data in Pebble it
// is the value's length.
func (l *Log) IndexedBatches(p *Partition, from, to int64, fn func(base int64, size int) bool) error {
	if l.db == nil {
		return nil
	}
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(p.ID, from), UpperBound: dataKey(p.ID, to)})
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		size, err := l.indexedBatchSize(it)
		if err != nil {
			it.Close()
			return err
		}
		if !fn(dataKeyOffset(it.Key()), size) {
			break
		}
	}
	return it.Close()
}

// indexedBatchSize is the stored size of the batch at it, an iterator over a partition's data
// keys: with segments the index entry records it (bytes 12..15), with record data in Pebble
// it is the value's length.
func (l *Log) indexedBatchSize(it *pebble.Iterator) (int, error) {
	if l.segs != nil {
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, err
		}
		loc, err := segments.ParseLoc(v)
		return loc.Length, err
	}
	lv := it.LazyValue()
	return lv.Len(), nil
}

// BatchMaxTimestamp reads the max timestamp of the stored batch at base.
func (l *Log) BatchMaxTimestamp(p *Partition, base int64) (int64, error) {
	buf, err := l.readStored(p, base)
	if err != nil {
		return 0, err
	}
	if len(buf) < 61 {
		return 0, errors.New("stored batch shorter than a batch header")
	}
	return wire.BatchMaxTimestamp(buf), nil
}

// AdvanceLogStart moves p's log start to start (retention): readers see it at once, and the
// index entries of the batches wholly below it go, without a sync (ReclaimSegments syncs
// before any file goes).
func (ps *Pass) AdvanceLogStart(p *Partition, start int64) error {
	return ps.l.advanceLogStart(p, start, pebble.NoSync)
}

// AdvanceLocalStart moves p's local log start to start, leaving its log start where it is
// (the local retention of a topic with remote storage: the batches below start stay readable
// from the remote tier, and so do their aborted transactions). The index entries of the
// batches wholly below start go, so that they pin no segment file, without a sync
// (ReclaimSegments syncs before any file goes). A start at or below the local start changes
// nothing; one past the high watermark is an error (ErrLocalStartPastHighWatermark). The
// caller must not go past what the remote tier holds: this does not check it.
func (ps *Pass) AdvanceLocalStart(p *Partition, start int64) error {
	return ps.l.advanceLocalStart(p, start, pebble.NoSync)
}

// SubmitRelocations hands the committer a request of relocations (Append.Relocate: copies of
// stored batches at their offsets, or, with a nil Batch, the removal of a batch's index
// entry) and waits until it is durable; what names the work in errors.
func (ps *Pass) SubmitRelocations(req *Request, what string) error {
	return ps.l.submitRelocations(req, what)
}

// submitRelocations is SubmitRelocations (the reclaim pass's copies use it too).
func (l *Log) submitRelocations(req *Request, what string) error {
	done := make(chan struct{})
	req.Done = func(*Request) { close(done) }
	l.Submit(req)
	select {
	case <-done:
	case <-l.stop:
		return fmt.Errorf("batchlog: closed while %s", what)
	}
	for i := range req.Appends {
		if code := req.Appends[i].Err; code != 0 {
			return fmt.Errorf("batchlog: %s: error code %d", what, code)
		}
	}
	return nil
}

// CompactedTo is the offset below which p's batches were compacted by the last full pass
// (kept in Pebble, unsynced: after a crash the next pass may redo work).
func (p *Partition) CompactedTo() int64 { return p.cleanedTo.Load() }

// MarkCompacted records that p is compacted up to end.
func (ps *Pass) MarkCompacted(p *Partition, end int64) error {
	p.cleanedTo.Store(end)
	return ps.l.db.Set(partKey(nil, kindCleaned, p.ID), binary.BigEndian.AppendUint64(nil, uint64(end)), pebble.NoSync)
}

// CountCompaction adds one compaction pass and what it did to Stats.
func (ps *Pass) CountCompaction(rewritten, dropped, removed int64) {
	c := &ps.l.compacted
	c.passes.Add(1)
	c.rewritten.Add(rewritten)
	c.dropped.Add(dropped)
	c.removed.Add(removed)
}

// ReclaimPolicy is the cost rule of ReclaimSegments: how much copying a file's deletion is
// worth (MaxCopyBytes, CopyRatio, NoCopy).
type ReclaimPolicy = reclaimplan.Policy

// ReclaimSegments deletes the oldest segment files once no partition has a live batch in them,
// copying forward first the live batches that keep them where policy allows (reclaim.go). It
// returns how many files it deleted; with record data in Pebble there are none.
func (ps *Pass) ReclaimSegments(policy ReclaimPolicy) (int, error) {
	if ps.l.segs == nil {
		return 0, nil
	}
	return ps.l.reclaimSegments(ps.l.segs, policy)
}

// DropIdleProducers drops, on the committer, the producer windows not written to since before
// (those of open transactions stay), and returns how many it dropped. Their keys go with the
// next group that carries metadata. While writes are suspended nothing is dropped.
func (l *Log) DropIdleProducers(before time.Time) int {
	if l.closed.Load() {
		return 0
	}
	cutoff := before.UnixMilli()
	n := 0
	done := make(chan struct{})
	l.Submit(&Request{
		Inspect: func() { n = l.dropProducersBefore(cutoff) },
		Done:    func(*Request) { close(done) },
	})
	select {
	case <-done:
		return n
	case <-l.stop:
		// Closing: the committer may be gone before it takes the request.
		return 0
	}
}

// dropProducersBefore runs on the committer: it drops the windows last written before cutoff
// (unix ms). One changed since the last checkpoint is skipped by addMetadata unless it comes
// back before then.
func (l *Log) dropProducersBefore(cutoff int64) int {
	n := 0
	for k, st := range l.producers {
		if st.LastWrite >= cutoff || st.TxnFirstOffset >= 0 {
			continue // an open transaction keeps its window (its timeout ends it first)
		}
		l.dropWindow(k)
		n++
	}
	return n
}

// Stores reports whether the log stores anything (false with Options.Discard): on one that
// does not, the passes have nothing to do.
func (l *Log) Stores() bool { return l.db != nil }
