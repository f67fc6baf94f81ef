package batchlog

// Space follows retention per partition: the reclaim of segment files, which an upkeep pass
// asks for (Pass.ReclaimSegments) with its cost rule (ReclaimPolicy). Which files can go, and
// which batches must be copied first, is the segment store's own knowledge: it follows from
// the checkpoint (replay never reads below it), the index's locations and the relocated-below
// keys, the invariants replay relies on; so the choice is made by the log (package
// reclaimplan explains it), not by the pass. Here the chosen batches are copied forward
// through the committer and the files deleted.
//
// Crash safety: the copies and the partition's relocated key are written by the committer
// like any group, and their index entries take the place of the old ones when the group is
// durable. Before any file is unlinked, Pebble is synced (the index then names only the
// copies). Replay meets copies as entries below the partition's next offset: it indexes them
// where they now lie and raises the relocated key. Readers that took an index entry naming
// a segment unlinked since read it again (Log.ReadBatches).

import (
	"inlet/batchlog/reclaimplan"
	"inlet/batchlog/segments"
)

// relocateChunk is the record data of one relocation request to the committer.
const relocateChunk = 4 << 20

// reclaimSegments deletes the oldest segments once no partition has a live batch in them,
// copying forward the live batches that would keep them when that is cheap (see the top of
// the file). It returns how many segment files it deleted. Callers hold retainMu.
func (l *Log) reclaimSegments(ss *segments.Store, policy ReclaimPolicy) (int, error) {
	// The checkpoint is read before the index, so every index entry of a segment below it
	// is already visible when the index is scanned, and replay never reads below it.
	ckSeg, _, err := ss.Checkpoint()
	if err != nil {
		return 0, err
	}
	sizes := ss.SizesBelow(ckSeg)
	if len(sizes) == 0 {
		return 0, nil
	}
	var (
		parts []*Partition
		index []reclaimplan.Partition
	)
	for _, t := range l.Topics() {
		for _, p := range t.Partitions {
			parts = append(parts, p)
			index = append(index, reclaimplan.Partition{ID: p.ID, Below: max(p.relocatedBelow.Load(), p.LocalLogStartOffset())})
		}
	}
	live, target, err := reclaimplan.Choose(l.db, index, ckSeg, sizes, policy)
	if err != nil {
		return 0, err
	}
	if target == 0 {
		return 0, nil
	}
	if len(live) > 0 {
		if err := l.relocate(parts, live); err != nil {
			return 0, err
		}
		l.log.Info("batchlog: copied live batches forward out of old segments", "batches", len(live), "below segment", target)
	}
	return ss.DeleteBelow(target)
}

// relocate copies the batches of live (of parts) forward through the committer, a few
// megabytes per group, and raises each partition's relocated key past the batches copied. It
// returns once the copies are durable and indexed.
func (l *Log) relocate(parts []*Partition, live []reclaimplan.Batch) error {
	ss := l.segs
	for len(live) > 0 {
		n, bytes := 0, 0
		for n < len(live) && (n == 0 || bytes+live[n].Length <= relocateChunk) {
			bytes += live[n].Length
			n++
		}
		chunk := live[:n]
		live = live[n:]
		req := &Request{Appends: make([]Append, 0, len(chunk))}
		buf := make([]byte, 0, bytes)
		for _, e := range chunk {
			start := len(buf)
			var err error
			buf, err = ss.ReadBatch(e.Loc, buf)
			if err != nil {
				return err
			}
			req.Appends = append(req.Appends, Append{Partition: parts[e.Part], Batch: buf[start:len(buf):len(buf)],
				BaseOffset: e.Base, Relocate: true})
		}
		if err := l.submitRelocations(req, "copying batches forward"); err != nil {
			return err
		}
		l.relocatedBytes.Add(int64(bytes))
	}
	return nil
}
