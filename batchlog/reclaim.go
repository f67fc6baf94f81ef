package batchlog

// Space follows retention per partition: the reclaim of segment files, which an upkeep pass
// asks for (Pass.ReclaimSegments) with its cost rule (ReclaimPolicy). Which files can go, and
// which batches must be copied first, is the segment store's own knowledge: it follows from
// the checkpoint (replay never reads below it), the index's locations and the relocated-below
// keys, the invariants replay relies on; so the choice is made here, not by the pass.
//
// Segment files are shared by every partition, so a segment can be deleted only once no
// partition has a live batch in it. Left alone, one partition that keeps its data long (a
// low-volume topic with Kafka's default 7-day retention, a compacted topic) would pin every
// segment written after its oldest live batch, and a firehose with one hour of retention
// beside it would fill the disk. So after each retention pass reclaimSegments looks at the
// oldest segments and, when the batches still live in them are few, copies those batches
// forward (through the committer, into the active segment, keeping their offsets) and then
// deletes the segments.
//
// The cost rule (upkeep's default): the bytes copied in one pass are at most an eighth of the
// bytes of the segments the pass deletes (write amplification at most 1/8 per reclaimed
// byte), and at most 256 MiB. So a firehose whose retention expires its own data frees space at
// the rate it writes, while a segment still full of live data (a slow consumer's topic with
// long retention is data that retention keeps) is never copied.
//
// Finding the live batches: a partition's index entries are in offset order. Batches are
// appended in offset order, so the segments they lie in are non-decreasing along the index,
// except for the batches copied forward, which now lie in a newer segment than batches above
// them. Those always form a prefix of the partition's offsets (the copies are of its oldest
// batches), below the offset kept in its relocated key: reclaim reads that prefix whole, and
// the rest, monotonic, only as far as the segments it considers. The scan walks all
// partitions together in segment order and stops once copying would cost too much, so a
// pass reads the index of the oldest segments only, not the whole log.
//
// Crash safety: the copies and the partition's relocated key are written by the committer
// like any group, and their index entries take the place of the old ones when the group is
// durable. Before any file is unlinked, Pebble is synced (the index then names only the
// copies). Replay meets copies as entries below the partition's next offset: it indexes them
// where they now lie and raises the relocated key. Readers that took an index entry naming
// a segment unlinked since read it again (Log.ReadBatches).

import (
	"container/heap"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"inlet/batchlog/segments"
)

// relocateChunk is the record data of one relocation request to the committer.
const relocateChunk = 4 << 20

// liveEntry is one live batch as the index names it.
type liveEntry struct {
	p    *Partition
	base int64
	seg  uint32
	pos  int64
	size int
}

func decodeIndexEntry(p *Partition, k, v []byte) (liveEntry, error) {
	loc, err := segments.ParseLoc(v)
	if err != nil {
		return liveEntry{}, err
	}
	return liveEntry{p: p, base: dataKeyOffset(k), seg: loc.Seg, pos: loc.Pos, size: loc.Length}, nil
}

// indexCursor walks the monotonic part of one partition's index (offsets at and above its
// relocated key).
type indexCursor struct {
	it  *pebble.Iterator
	cur liveEntry
}

type cursorHeap []*indexCursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return h[i].cur.seg < h[j].cur.seg }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*indexCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

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
	live, target, err := l.chooseReclaim(ckSeg, sizes, policy)
	if err != nil {
		return 0, err
	}
	if target == 0 {
		return 0, nil
	}
	if len(live) > 0 {
		if err := l.relocate(live); err != nil {
			return 0, err
		}
		l.log.Info("batchlog: copied live batches forward out of old segments", "batches", len(live), "below segment", target)
	}
	return ss.DeleteBelow(target)
}

// chooseReclaim picks the segment below which every file can go (0: none) and the live
// batches below it that must be copied forward first. sizes holds the segments below the
// checkpoint, the only candidates.
func (l *Log) chooseReclaim(ckSeg uint32, sizes map[uint32]int64, policy ReclaimPolicy) ([]liveEntry, uint32, error) {
	prefix, cursors, err := l.indexCursors()
	defer func() {
		for _, c := range cursors {
			c.it.Close()
		}
	}()
	if err != nil {
		return nil, 0, err
	}
	heap.Init(&cursors)
	w := reclaimWalk{policy: policy, cursors: &cursors, prefixBySeg: map[uint32][]liveEntry{}}
	for _, e := range prefix {
		w.prefixBySeg[e.seg] = append(w.prefixBySeg[e.seg], e)
	}
	// Walk the segments below the checkpoint in order: target is a candidate end; cost the
	// live bytes below it, freed the file bytes below it.
	minSeg := ckSeg
	for id := range sizes {
		minSeg = min(minSeg, id)
	}
	for seg := minSeg; seg < ckSeg; seg++ {
		if ok, err := w.add(seg); err != nil || !ok {
			if err != nil {
				return nil, 0, err
			}
			break
		}
		w.freed += sizes[seg]
		if w.cost*policy.CopyRatio <= w.freed && (w.cost == 0 || !policy.NoCopy) {
			w.best, w.bestCount = seg+1, len(w.live)
		}
	}
	return w.live[:w.bestCount], w.best, nil
}

// indexCursors reads every partition's relocated prefix whole (entries in any segment order)
// and opens a cursor on the monotonic rest of each partition's index that has one.
func (l *Log) indexCursors() ([]liveEntry, cursorHeap, error) {
	var (
		prefix  []liveEntry
		cursors cursorHeap
	)
	for _, t := range l.Topics() {
		for _, p := range t.Partitions {
			below := max(p.relocatedBelow.Load(), p.LocalLogStartOffset())
			it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(p.ID, 0), UpperBound: dataKey(p.ID+1, 0)})
			if err != nil {
				return nil, cursors, err
			}
			valid := it.First()
			for ; valid && dataKeyOffset(it.Key()) < below; valid = it.Next() {
				v, err := it.ValueAndErr()
				if err != nil {
					it.Close()
					return nil, cursors, err
				}
				e, err := decodeIndexEntry(p, it.Key(), v)
				if err != nil {
					it.Close()
					return nil, cursors, err
				}
				prefix = append(prefix, e)
			}
			if !valid {
				if err := it.Close(); err != nil {
					return nil, cursors, err
				}
				continue
			}
			c := &indexCursor{it: it}
			if err := c.load(p); err != nil {
				it.Close()
				return nil, cursors, err
			}
			cursors = append(cursors, c)
		}
	}
	return prefix, cursors, nil
}

// reclaimWalk is chooseReclaim's state as it moves its candidate end up one segment at a time.
type reclaimWalk struct {
	policy      ReclaimPolicy
	cursors     *cursorHeap
	prefixBySeg map[uint32][]liveEntry
	live        []liveEntry
	cost, freed int64
	best        uint32
	bestCount   int
}

// add moves the candidate end from seg to seg+1: segment seg's live batches join the copies.
// It reports false once copying would cost more than the policy allows.
func (w *reclaimWalk) add(seg uint32) (bool, error) {
	for _, e := range w.prefixBySeg[seg] {
		w.live = append(w.live, e)
		w.cost += int64(e.size)
	}
	cursors := w.cursors
	for len(*cursors) > 0 && (*cursors)[0].cur.seg <= seg {
		c := (*cursors)[0]
		if c.cur.seg < seg {
			// Below minSeg: names a segment already deleted, which cannot be.
			return false, fmt.Errorf("batchlog: partition %d batch %d names segment %d, which is gone", c.cur.p.ID, c.cur.base, c.cur.seg)
		}
		w.live = append(w.live, c.cur)
		w.cost += int64(c.cur.size)
		if !c.it.Next() {
			heap.Pop(cursors)
			c.it.Close()
		} else if err := c.load(c.cur.p); err != nil {
			return false, err
		} else {
			heap.Fix(cursors, 0)
		}
		if w.cost > w.policy.MaxCopyBytes {
			break
		}
	}
	return w.cost <= w.policy.MaxCopyBytes, nil
}

func (c *indexCursor) load(p *Partition) error {
	v, err := c.it.ValueAndErr()
	if err != nil {
		return err
	}
	c.cur, err = decodeIndexEntry(p, c.it.Key(), v)
	return err
}

// relocate copies the batches of live forward through the committer, a few megabytes per
// group, and raises each partition's relocated key past the batches copied. It returns once
// the copies are durable and indexed.
func (l *Log) relocate(live []liveEntry) error {
	ss := l.segs
	for len(live) > 0 {
		n, bytes := 0, 0
		for n < len(live) && (n == 0 || bytes+live[n].size <= relocateChunk) {
			bytes += live[n].size
			n++
		}
		chunk := live[:n]
		live = live[n:]
		req := &Request{Appends: make([]Append, 0, len(chunk))}
		buf := make([]byte, 0, bytes)
		for _, e := range chunk {
			start := len(buf)
			var err error
			buf, err = ss.ReadBatch(segments.Loc{Seg: e.seg, Pos: e.pos, Length: e.size}, buf)
			if err != nil {
				return err
			}
			req.Appends = append(req.Appends, Append{Partition: e.p, Batch: buf[start:len(buf):len(buf)],
				BaseOffset: e.base, Relocate: true})
		}
		if err := l.submitRelocations(req, "copying batches forward"); err != nil {
			return err
		}
		l.relocatedBytes.Add(int64(bytes))
	}
	return nil
}
