package segments

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
//  1. Store.PlanRead (the log's PlanRead, through its store seam) walks the partition's
//     batch index (Pebble) and records where each batch the fetch returns lies (segment, position, length), taking a reference on each segment so
//     reclaim cannot close it meanwhile. It reads no record data, so the caller learns the
//     size of the answer before building it.
//  2. ReadPlan.AppendTo copies the batches to the end of the caller's buffer (the response
//     frame itself): from the tail cache when the batch was written recently, else from the
//     segment file, with O_DIRECT in aligned reads that take close batches together
//     (coldread.go), or with one pread per batch where the file has no direct reader.
//
// The tail cache holds the log's own staging buffers (the blocks the completer has just
// written and synced), newest last, up to Config.CacheBytes (the log's
// Options.FetchCacheBytes). Segments are written with
// O_DIRECT, so without it a consumer following the tail would read every batch back from the
// disk. The completer hands a group's buffer to the cache once the group is durable instead of
// reusing it; buffers pushed out of the cache go back to the staging pool.

// ReadPlan is the stored batches one read returns, located but not yet read. The zero value
// is ready for PlanRead; Release lets go of it (the log's AppendPlanned does too).
type ReadPlan struct {
	spans []span
	runs  []coldRun       // AppendTo's cold reads (coldread.go)
	wg    *sync.WaitGroup // the helpers' part of them
	store *Store          // the store whose segments the spans name (its tail cache); nil: copies only
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
	clear(p.runs)
	p.runs = p.runs[:0]
	p.Bytes, p.End = 0, 0
}

// AddCopy adds a batch held in memory (copied: v need not outlive the call), for a layout
// that keeps batches as Pebble values.
func (p *ReadPlan) AddCopy(v []byte) {
	p.spans = append(p.spans, span{n: len(v), data: slices.Clone(v)})
	p.Bytes += len(v)
}

// AddShared adds a batch held in memory that nobody changes while the plan holds it (the
// remote tier's cached reads): referenced, not copied.
func (p *ReadPlan) AddShared(v []byte) {
	p.spans = append(p.spans, span{n: len(v), data: v})
	p.Bytes += len(v)
}

// AppendTo appends the planned batches to dst (growing it at most once). On an error dst is
// returned as it came. The plan is left as it is: Release lets go of it.
func (p *ReadPlan) AppendTo(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, p.Bytes)
	for i := 0; i < len(p.spans); {
		sp := &p.spans[i]
		if sp.seg == nil {
			dst = append(dst, sp.data...)
			i++
			continue
		}
		at := len(dst)
		dst = dst[:at+sp.n]
		if p.store.fromTail(dst[at:], sp.seg, sp.pos) {
			i++
			continue
		}
		if sp.seg.rd == nil {
			if err := readBuffered(dst[at:], sp.seg, sp.pos); err != nil {
				return dst[:start], err
			}
			i++
			continue
		}
		// A cold batch: read with the cold ones that follow it closely (coldread.go), once
		// every run is known. dst does not move: it was grown to its final size.
		j, grown, hit := p.runEnd(i, dst)
		runEnd := len(grown)
		if hit {
			runEnd -= p.spans[j].n
		}
		p.runs = append(p.runs, coldRun{dst: grown[at:runEnd], spans: p.spans[i:j]})
		dst, i = grown, j
		if hit {
			i++
		}
	}
	err := p.readRuns()
	clear(p.runs) // they point into dst
	p.runs = p.runs[:0]
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// ErrSegmentGone: an index entry read names a segment that has been reclaimed since.
var ErrSegmentGone = errors.New("batchlog: index names a reclaimed segment")

// PlanRead of the segment layout: the index entries (from the recent index when it has
// them, recent.go), and a reference on each segment.
func (s *Store) PlanRead(partition uint32, offset, limit int64, maxBytes int, includeFirst bool, plan *ReadPlan) error {
	plan.End = limit
	plan.store = s
	add := func(base int64, loc Loc) (bool, error) {
		return s.planBatch(plan, base, loc, offset, maxBytes, includeFirst)
	}
	if ok, err := s.recent.each(partition, offset, limit, add); ok || err != nil {
		return err
	}
	return EachIndexedBatch(s.db, partition, offset, limit, func(base int64, v []byte) (bool, error) {
		loc, err := ParseLoc(v)
		if err != nil {
			return false, err
		}
		return add(base, loc)
	})
}

// planBatch adds the batch at base, stored at loc, to plan, unless it ends before offset or
// would pass maxBytes; more: the next batch may be added too.
func (s *Store) planBatch(plan *ReadPlan, base int64, loc Loc, offset int64, maxBytes int, includeFirst bool) (more bool, err error) {
	var seg *segment
	acquire := func() error {
		if seg = s.acquire(loc.Seg); seg == nil {
			// Reclaimed after this read's index snapshot was taken: retention moved the log
			// start past it meanwhile, or reclaim copied it forward (PlanRead tells).
			return fmt.Errorf("%w: segment %d", ErrSegmentGone, loc.Seg)
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
	if (plan.Bytes > 0 || !includeFirst) && plan.Bytes+loc.Length > maxBytes {
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
	plan.spans = append(plan.spans, span{seg: seg, pos: loc.Pos, n: loc.Length})
	plan.Bytes += loc.Length
	if plan.Bytes >= maxBytes {
		plan.End = base + 1 // at least; the next batch starts at or after it
		return false, nil
	}
	return true, nil
}

// lastOffset reads the last offset of the batch at loc from its header.
func (s *Store) lastOffset(seg *segment, loc Loc) (int64, error) {
	var hdr [wire.RecordBatchOverhead]byte
	if loc.Length < len(hdr) {
		return 0, fmt.Errorf("batchlog: segment %d at %d: batch of %d bytes", loc.Seg, loc.Pos, loc.Length)
	}
	if err := s.read(hdr[:], seg, loc.Pos); err != nil {
		return 0, err
	}
	return wire.BatchLastOffset(hdr[:]), nil
}

// read fills dst with the bytes of seg at pos: from the tail cache if it holds them, else
// from the file (direct where the segment has a direct reader, coldread.go).
func (s *Store) read(dst []byte, seg *segment, pos int64) error {
	if s.fromTail(dst, seg, pos) {
		return nil
	}
	if seg.rd != nil {
		return readDirect(dst, seg, pos)
	}
	return readBuffered(dst, seg, pos)
}

// fromTail fills dst with the bytes of seg at pos if the tail cache holds them all.
func (s *Store) fromTail(dst []byte, seg *segment, pos int64) bool {
	return s.tail != nil && s.tail.copyOut(dst, seg.id, pos)
}

// readBuffered fills dst with the bytes of seg at pos, read through the page cache.
func readBuffered(dst []byte, seg *segment, pos int64) error {
	if _, err := seg.f.ReadAt(dst, pos); err != nil {
		return fmt.Errorf("batchlog: read segment %d at %d: %w", seg.id, pos, err)
	}
	return nil
}

// DefaultCacheBytes is Config.CacheBytes' default.
const DefaultCacheBytes = 64 << 20

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
	buf   []byte    // the group's entries as written from start
	box   *stageBuf // the staging buffer buf lies in, whole, handed back on eviction
}

// add caches buf (the bytes of segment seg from start, in the staging buffer box) and returns
// the staging buffers it pushed out.
func (c *tailCache) add(seg uint32, start int64, buf []byte, box *stageBuf, evicted []*stageBuf) []*stageBuf {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ents = append(c.ents, tailEntry{seg: seg, start: start, buf: buf, box: box})
	c.bytes += cap(box.b)
	for c.bytes > c.limit && c.head < len(c.ents) {
		e := &c.ents[c.head]
		c.bytes -= cap(e.box.b)
		evicted = append(evicted, e.box)
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
