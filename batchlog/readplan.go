package batchlog

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"inlet/wire"
)

// The read path of a fetch, in two steps, so the record data is copied once:
//
//  1. PlanRead walks the partition's batch index (Pebble) and records where each batch the
//     fetch returns lies (segment, position, length), taking a reference on each segment so
//     reclaim cannot close it meanwhile. It reads no record data, so the caller learns the
//     size of the answer before building it.
//  2. ReadPlan.AppendTo copies the batches to the end of the caller's buffer (the response
//     frame itself): from the tail cache when the batch was written recently, else with one
//     pread per batch straight into the buffer.
//
// The tail cache holds the log's own staging buffers (the blocks the completer has just
// written and synced), newest last, up to Options.FetchCacheBytes. Segments are written with
// O_DIRECT, so without it a consumer following the tail would read every batch back from the
// disk. The completer hands a group's buffer to the cache once the group is durable instead of
// reusing it; buffers pushed out of the cache go back to the staging pool.

// ReadPlan is the stored batches one read returns, located but not yet read. The zero value
// is ready for PlanRead; Release lets go of it (AppendTo does too).
type ReadPlan struct {
	spans []span
	// Bytes is the size of the planned batches.
	Bytes int
	// End is past the base offset of every planned batch and at or before the first offset of
	// the batch after them: the range a read_committed fetch lists aborted transactions for (a
	// transaction starts at a batch's base offset).
	End int64
}

// span is one planned batch: in a segment file (seg holds a reference), or a copy of it
// (the Pebble layout keeps batches as values).
type span struct {
	seg  *segment
	pos  int64
	n    int
	data []byte
}

// Release lets go of the plan's segment references; the plan can then be used again.
func (p *ReadPlan) Release() {
	for i := range p.spans {
		if p.spans[i].seg != nil {
			p.spans[i].seg.unref()
		}
	}
	clear(p.spans)
	p.spans = p.spans[:0]
	p.Bytes, p.End = 0, 0
}

// PlanRead locates what ReadBatches would return: the stored batches of p from the one that
// contains offset, below limit, up to maxBytes (the first one whatever its size when
// includeFirst is set). plan must be empty (new, or released).
func (l *Log) PlanRead(p *Partition, offset, limit int64, maxBytes int, includeFirst bool, plan *ReadPlan) error {
	if offset >= limit {
		return nil
	}
	for attempt := 0; ; attempt++ {
		err := l.store.PlanRead(p.ID, offset, limit, maxBytes, includeFirst, plan)
		if err == nil {
			return nil
		}
		plan.Release()
		if !errors.Is(err, errSegmentGone) {
			return err
		}
		if offset < p.LogStartOffset() {
			// Retention removed what this read was after while it ran: as if it had come after.
			return ErrOffsetOutOfRange
		}
		if attempt == 2 {
			return err
		}
		// The batches were copied forward and their old segment reclaimed after this read's
		// index snapshot was taken (reclaim.go): the index names the copies now.
	}
}

// ReadBatches appends to dst the stored batches PlanRead locates: whole stored batches of p,
// starting with the batch containing offset and ending before limit (which the caller takes
// from HighWatermark, or the LSO), up to maxBytes. ErrOffsetOutOfRange: retention moved the
// log start past offset while the read ran.
func (l *Log) ReadBatches(p *Partition, offset, limit int64, maxBytes int, includeFirst bool, dst []byte) ([]byte, error) {
	var plan ReadPlan
	if err := l.PlanRead(p, offset, limit, maxBytes, includeFirst, &plan); err != nil {
		return dst, err
	}
	return l.AppendPlanned(dst, &plan)
}

// AppendPlanned appends the planned batches to dst (growing it at most once) and releases the
// plan. On an error dst is returned as it came.
func (l *Log) AppendPlanned(dst []byte, plan *ReadPlan) ([]byte, error) {
	defer plan.Release()
	start := len(dst)
	dst = slices.Grow(dst, plan.Bytes)
	for i := range plan.spans {
		sp := &plan.spans[i]
		if sp.seg == nil {
			dst = append(dst, sp.data...)
			continue
		}
		at := len(dst)
		dst = dst[:at+sp.n]
		if err := l.segs.read(dst[at:], sp.seg, sp.pos); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

// readStored reads the one stored batch at base (nothing if there is none), without the
// retries of PlanRead: errSegmentGone tells the caller its segment was reclaimed meanwhile.
func (l *Log) readStored(p *Partition, base int64) ([]byte, error) {
	var plan ReadPlan
	if err := l.store.PlanRead(p.ID, base, base+1, 1, true, &plan); err != nil {
		plan.Release()
		return nil, err
	}
	return l.AppendPlanned(nil, &plan)
}

// PlanRead of the segment layout: the index entries (from the recent index when it has
// them, recent.go), and a reference on each segment.
func (s *segmentStore) PlanRead(partition uint32, offset, limit int64, maxBytes int, includeFirst bool, plan *ReadPlan) error {
	plan.End = limit
	add := func(base int64, loc batchLoc) (bool, error) {
		return s.planBatch(plan, base, loc, offset, maxBytes, includeFirst)
	}
	if ok, err := s.recent.each(partition, offset, limit, add); ok || err != nil {
		return err
	}
	return eachIndexedBatch(s.db, partition, offset, limit, func(base int64, v []byte) (bool, error) {
		loc, err := parseBatchLoc(v)
		if err != nil {
			return false, err
		}
		return add(base, loc)
	})
}

// planBatch adds the batch at base, stored at loc, to plan, unless it ends before offset or
// would pass maxBytes; more: the next batch may be added too.
func (s *segmentStore) planBatch(plan *ReadPlan, base int64, loc batchLoc, offset int64, maxBytes int, includeFirst bool) (more bool, err error) {
	var seg *segment
	acquire := func() error {
		if seg = s.acquire(loc.seg); seg == nil {
			// Reclaimed after this read's index snapshot was taken: retention moved the log
			// start past it meanwhile, or reclaim copied it forward (PlanRead tells).
			return fmt.Errorf("%w: segment %d", errSegmentGone, loc.seg)
		}
		return nil
	}
	if base < offset {
		// The batch the index finds for offset may end before it (compaction leaves gaps):
		// then it is not returned, and does not count against maxBytes (as in the Pebble
		// layout). Only its header is read to tell.
		if err := acquire(); err != nil {
			return false, err
		}
		last, err := s.lastOffset(seg, loc)
		if err != nil || last < offset {
			seg.unref()
			return err == nil, err
		}
	}
	if (plan.Bytes > 0 || !includeFirst) && plan.Bytes+loc.length > maxBytes {
		if seg != nil {
			seg.unref()
		}
		plan.End = base
		return false, nil
	}
	if seg == nil {
		if err := acquire(); err != nil {
			return false, err
		}
	}
	plan.spans = append(plan.spans, span{seg: seg, pos: loc.pos, n: loc.length})
	plan.Bytes += loc.length
	if plan.Bytes >= maxBytes {
		plan.End = base + 1 // at least; the next batch starts at or after it
		return false, nil
	}
	return true, nil
}

// lastOffset reads the last offset of the batch at loc from its header.
func (s *segmentStore) lastOffset(seg *segment, loc batchLoc) (int64, error) {
	var hdr [wire.RecordBatchOverhead]byte
	if loc.length < len(hdr) {
		return 0, fmt.Errorf("batchlog: segment %d at %d: batch of %d bytes", loc.seg, loc.pos, loc.length)
	}
	if err := s.read(hdr[:], seg, loc.pos); err != nil {
		return 0, err
	}
	return wire.BatchLastOffset(hdr[:]), nil
}

// read fills dst with the bytes of seg at pos: from the tail cache if it holds them, else
// from the file.
func (s *segmentStore) read(dst []byte, seg *segment, pos int64) error {
	if s.tail != nil && s.tail.copyOut(dst, seg.id, pos) {
		return nil
	}
	if _, err := seg.f.ReadAt(dst, pos); err != nil {
		return fmt.Errorf("batchlog: read segment %d at %d: %w", seg.id, pos, err)
	}
	return nil
}

// PlanRead of the Pebble layout: copies of the values.
func (s *pebbleStore) PlanRead(partition uint32, offset, limit int64, maxBytes int, includeFirst bool, plan *ReadPlan) error {
	plan.End = limit
	return eachIndexedBatch(s.db, partition, offset, limit, func(base int64, v []byte) (bool, error) {
		if len(v) < 61 {
			panic("BUG: batchlog: stored batch shorter than a record batch header")
		}
		if wire.BatchLastOffset(v) < offset {
			return true, nil
		}
		if (plan.Bytes > 0 || !includeFirst) && plan.Bytes+len(v) > maxBytes {
			plan.End = base
			return false, nil
		}
		plan.spans = append(plan.spans, span{n: len(v), data: slices.Clone(v)})
		plan.Bytes += len(v)
		if plan.Bytes >= maxBytes {
			plan.End = base + 1
			return false, nil
		}
		return true, nil
	})
}

// defaultFetchCacheBytes is Options.FetchCacheBytes' default.
const defaultFetchCacheBytes = 64 << 20

// tailCache holds the most recently written staging buffers of the segment store, in write
// order, up to limit bytes. The completer adds and evicts (under mu); readers copy out under
// the read lock, so a buffer is never reused while it is read.
type tailCache struct {
	limit int
	// hits and misses count the reads copyOut served and could not (Stats).
	hits, misses atomic.Int64
	mu           sync.RWMutex
	ents         []tailEntry // ents[head:] are cached, oldest first
	head         int
	bytes        int
}

type tailEntry struct {
	seg   uint32
	start int64
	buf   []byte // the group's entries as written from start; the staging buffer's full capacity is kept for reuse
}

// add caches buf, the bytes of segment seg from start, and returns the buffers it pushed out.
func (c *tailCache) add(seg uint32, start int64, buf []byte, evicted [][]byte) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ents = append(c.ents, tailEntry{seg: seg, start: start, buf: buf})
	c.bytes += cap(buf)
	for c.bytes > c.limit && c.head < len(c.ents) {
		e := &c.ents[c.head]
		c.bytes -= cap(e.buf)
		evicted = append(evicted, e.buf)
		*e = tailEntry{}
		c.head++
	}
	if c.head > len(c.ents)/2 {
		n := copy(c.ents, c.ents[c.head:])
		clear(c.ents[n:])
		c.ents = c.ents[:n]
		c.head = 0
	}
	return evicted
}

// copyOut fills dst with the bytes of segment seg at pos if one cached buffer holds them all.
func (c *tailCache) copyOut(dst []byte, seg uint32, pos int64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ents := c.ents[c.head:]
	// The first entry past (seg, pos); the one before it is the only one that can hold pos.
	i, _ := slices.BinarySearchFunc(ents, tailEntry{seg: seg, start: pos}, func(e, t tailEntry) int {
		if e.seg != t.seg {
			return int(int64(e.seg) - int64(t.seg))
		}
		if e.start <= t.start {
			return -1
		}
		return 1
	})
	if i == 0 {
		c.misses.Add(1)
		return false
	}
	e := &ents[i-1]
	if e.seg != seg || pos+int64(len(dst)) > e.start+int64(len(e.buf)) {
		c.misses.Add(1)
		return false
	}
	copy(dst, e.buf[pos-e.start:])
	c.hits.Add(1)
	return true
}

// reset drops every cached buffer (the files are being reset after a failure).
func (c *tailCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.ents)
	c.ents, c.head, c.bytes = c.ents[:0], 0, 0
}
