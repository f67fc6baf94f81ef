// Package reclaimplan chooses what a reclaim pass deletes: the segment below which every file
// can go, and the live batches below it that must be copied forward first, within a cost rule
// (Policy). It reads the batch index (package segments' keys and values) and writes nothing;
// batchlog's reclaim.go copies the batches through the committer and deletes the files.
//
// Segment files are shared by every partition, so a segment can be deleted only once no
// partition has a live batch in it. Left alone, one partition that keeps its data long (a
// low-volume topic with Kafka's default 7-day retention, a compacted topic) would pin every
// segment written after its oldest live batch, and a firehose with one hour of retention
// beside it would fill the disk. So after each retention pass the reclaim looks at the
// oldest segments and, when the batches still live in them are few, copies those batches
// forward (into the active segment, keeping their offsets) and then deletes the segments.
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
// batches), below the offset kept in its relocated key: Choose reads that prefix whole, and
// the rest, monotonic, only as far as the segments it considers. The scan walks all
// partitions together in segment order and stops once copying would cost too much, so a
// pass reads the index of the oldest segments only, not the whole log.
package reclaimplan

import (
	"container/heap"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"inlet/batchlog/segments"
)

// Policy is the cost rule: how much copying a file's deletion is worth.
type Policy struct {
	// MaxCopyBytes caps the bytes of live batches one call copies forward.
	MaxCopyBytes int64
	// CopyRatio: a call copies at most 1/CopyRatio of the bytes of the files it deletes.
	CopyRatio int64
	// NoCopy deletes only files no live batch is in (a benchmark's comparison).
	NoCopy bool
}

// Partition is one partition's index as Choose reads it.
type Partition struct {
	ID uint32
	// Below is the partition's relocated key, raised to its local log start: its entries
	// below it are read whole, in any segment order; those at and above lie in
	// non-decreasing segments.
	Below int64
}

// Batch is one live batch as the index names it.
type Batch struct {
	Part int // its partition's place in Choose's parts
	Base int64
	segments.Loc
}

// Reader is what Choose reads the index from (a *pebble.DB).
type Reader interface {
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// indexCursor walks the monotonic part of one partition's index (offsets at and above its
// relocated key).
type indexCursor struct {
	it   *pebble.Iterator
	part int
	cur  Batch
}

func (c *indexCursor) load() error {
	v, err := c.it.ValueAndErr()
	if err != nil {
		return err
	}
	c.cur, err = decode(c.part, c.it.Key(), v)
	return err
}

func decode(part int, k, v []byte) (Batch, error) {
	loc, err := segments.ParseLoc(v)
	if err != nil {
		return Batch{}, err
	}
	return Batch{Part: part, Base: segments.DataKeyOffset(k), Loc: loc}, nil
}

type cursorHeap []*indexCursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return h[i].cur.Seg < h[j].cur.Seg }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*indexCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// Choose picks the segment below which every file can go (0: none) and the live batches of
// parts below it that must be copied forward first. sizes holds the segments below the
// checkpoint ckSeg, the only candidates: the checkpoint is read before the index, so every
// index entry of a segment below it is visible to db.
func Choose(db Reader, parts []Partition, ckSeg uint32, sizes map[uint32]int64, policy Policy) ([]Batch, uint32, error) {
	prefix, cursors, err := indexCursors(db, parts)
	defer func() {
		for _, c := range cursors {
			c.it.Close()
		}
	}()
	if err != nil {
		return nil, 0, err
	}
	heap.Init(&cursors)
	w := walk{policy: policy, parts: parts, cursors: &cursors, prefixBySeg: map[uint32][]Batch{}}
	for _, e := range prefix {
		w.prefixBySeg[e.Seg] = append(w.prefixBySeg[e.Seg], e)
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
func indexCursors(db Reader, parts []Partition) ([]Batch, cursorHeap, error) {
	var (
		prefix  []Batch
		cursors cursorHeap
	)
	for i, p := range parts {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: segments.DataKey(p.ID, 0), UpperBound: segments.DataKey(p.ID+1, 0)})
		if err != nil {
			return nil, cursors, err
		}
		valid := it.First()
		for ; valid && segments.DataKeyOffset(it.Key()) < p.Below; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return nil, cursors, err
			}
			e, err := decode(i, it.Key(), v)
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
		c := &indexCursor{it: it, part: i}
		if err := c.load(); err != nil {
			it.Close()
			return nil, cursors, err
		}
		cursors = append(cursors, c)
	}
	return prefix, cursors, nil
}

// walk is Choose's state as it moves its candidate end up one segment at a time.
type walk struct {
	policy      Policy
	parts       []Partition
	cursors     *cursorHeap
	prefixBySeg map[uint32][]Batch
	live        []Batch
	cost, freed int64
	best        uint32
	bestCount   int
}

// add moves the candidate end from seg to seg+1: segment seg's live batches join the copies.
// It reports false once copying would cost more than the policy allows.
func (w *walk) add(seg uint32) (bool, error) {
	for _, e := range w.prefixBySeg[seg] {
		w.live = append(w.live, e)
		w.cost += int64(e.Length)
	}
	cursors := w.cursors
	for len(*cursors) > 0 && (*cursors)[0].cur.Seg <= seg {
		c := (*cursors)[0]
		if c.cur.Seg < seg {
			// Below minSeg: names a segment already deleted, which cannot be.
			return false, fmt.Errorf("batchlog: partition %d batch %d names segment %d, which is gone", w.parts[c.part].ID, c.cur.Base, c.cur.Seg)
		}
		w.live = append(w.live, c.cur)
		w.cost += int64(c.cur.Length)
		if !c.it.Next() {
			heap.Pop(cursors)
			c.it.Close()
		} else if err := c.load(); err != nil {
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
