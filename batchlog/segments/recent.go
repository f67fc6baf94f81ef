package segments

import "sync"

// recentIndex keeps, per partition, the segment index entries of its last few batches in
// memory, so that a fetch near the end of a partition (a consumer following the tail) finds
// its batches without a Pebble iterator, which was most of a tail fetch's planning (with this
// index planning is 1% of the tail profile, profiles/README.md).
//
// Each partition's ring holds every index entry from its oldest entry's base offset on: the
// completer adds entries in offset order as it commits them to Pebble (commitIndex), before
// the high watermark that lets readers at them moves. Whatever would break that forgets the
// partition's ring (it starts again with the next append): a batch stored again elsewhere
// (reclaim, compaction) or dropped, a log start moved (retention, DeleteRecords), a deleted
// topic, the files reset after a failure. A reader that finds its offset below a ring's
// oldest entry, or no ring, reads the index in Pebble.
type recentIndex struct {
	mu    sync.RWMutex // guards rings (the map); each ring has its own lock
	rings map[uint32]*recentRing
}

// recentEntries is the ring size: 32 entries cost under 1 KiB a partition.
const recentEntries = 32

type recentRing struct {
	mu   sync.RWMutex
	ents [recentEntries]recentEntry
	head int // oldest entry
	n    int
}

type recentEntry struct {
	base int64
	loc  Loc
}

func (r *recentIndex) ring(partition uint32, create bool) *recentRing {
	r.mu.RLock()
	ring := r.rings[partition]
	r.mu.RUnlock()
	if ring != nil || !create {
		return ring
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rings == nil {
		r.rings = map[uint32]*recentRing{}
	}
	if ring = r.rings[partition]; ring == nil {
		ring = new(recentRing)
		r.rings[partition] = ring
	}
	return ring
}

// add records the index entry of the batch at base. A relocated batch, or one not after the
// ring's newest entry, forgets the ring instead.
func (r *recentIndex) add(partition uint32, base int64, loc Loc, relocated bool) {
	ring := r.ring(partition, !relocated)
	if ring == nil {
		return
	}
	ring.mu.Lock()
	defer ring.mu.Unlock()
	if relocated || (ring.n > 0 && base <= ring.ents[(ring.head+ring.n-1)%recentEntries].base) {
		ring.head, ring.n = 0, 0
		return
	}
	if ring.n == recentEntries {
		ring.head = (ring.head + 1) % recentEntries
		ring.n--
	}
	ring.ents[(ring.head+ring.n)%recentEntries] = recentEntry{base: base, loc: loc}
	ring.n++
}

// forget drops partition's ring (the next append starts another).
func (r *recentIndex) forget(partition uint32) {
	r.mu.Lock()
	ring := r.rings[partition]
	delete(r.rings, partition)
	r.mu.Unlock()
	if ring != nil {
		ring.mu.Lock() // a reader that found it before the delete sees it empty
		ring.head, ring.n = 0, 0
		ring.mu.Unlock()
	}
}

// forgetAll empties every ring.
func (r *recentIndex) forgetAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ring := range r.rings {
		ring.mu.Lock()
		ring.head, ring.n = 0, 0
		ring.mu.Unlock()
	}
}

// each calls fn with the entries of partition from the one that contains offset (the last
// whose base is <= offset) while their base is below limit, until fn returns false, and
// reports whether the ring could answer: false when it holds nothing at or below offset.
// The entries are copied out first: fn may read the disk, and the completer must not wait on
// that for the ring's lock.
func (r *recentIndex) each(partition uint32, offset, limit int64, fn func(base int64, loc Loc) (bool, error)) (bool, error) {
	ring := r.ring(partition, false)
	if ring == nil {
		return false, nil
	}
	var ents [recentEntries]recentEntry
	n := 0
	ring.mu.RLock()
	if ring.n == 0 || ring.ents[ring.head].base > offset {
		ring.mu.RUnlock()
		return false, nil
	}
	i := 0
	for i+1 < ring.n && ring.ents[(ring.head+i+1)%recentEntries].base <= offset {
		i++
	}
	for ; i < ring.n; i++ {
		e := ring.ents[(ring.head+i)%recentEntries]
		if e.base >= limit {
			break
		}
		ents[n] = e
		n++
	}
	ring.mu.RUnlock()
	for _, e := range ents[:n] {
		if more, err := fn(e.base, e.loc); err != nil || !more {
			return true, err
		}
	}
	return true, nil
}
