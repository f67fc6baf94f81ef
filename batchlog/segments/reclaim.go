package segments

// The file side of the reclaim (the log chooses what goes, package reclaimplan, from the
// index and its relocated keys): the candidates, the read of a live batch to copy forward, and the
// deletion of files, after Pebble is synced so that no index entry naming them survives.

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// SizesBelow returns the sizes of the segments below seg, by id. Below the checkpoint they are
// what the reclaim may delete: replay never reads them.
func (s *Store) SizesBelow(seg uint32) map[uint32]int64 {
	sizes := map[uint32]int64{}
	s.mu.RLock()
	for id, sg := range s.segs {
		if id < seg {
			sizes[id] = sg.size
		}
	}
	s.mu.RUnlock()
	return sizes
}

// ReadBatch appends the batch at loc to dst; ErrSegmentGone: its segment was deleted.
func (s *Store) ReadBatch(loc Loc, dst []byte) ([]byte, error) {
	seg := s.acquire(loc.Seg)
	if seg == nil {
		return dst, fmt.Errorf("%w: segment %d", ErrSegmentGone, loc.Seg)
	}
	defer seg.unref()
	start := len(dst)
	dst = append(dst, make([]byte, loc.Length)...)
	if _, err := seg.f.ReadAt(dst[start:], loc.Pos); err != nil {
		return dst[:start], fmt.Errorf("batchlog: read segment %d at %d: %w", loc.Seg, loc.Pos, err)
	}
	return dst, nil
}

// DeleteBelow syncs Pebble, then unlinks every segment file below target and syncs the
// directory; it returns how many it deleted. The caller has made sure no live batch is left
// in them (their batches are below every log start, or copied forward and indexed again).
func (s *Store) DeleteBelow(target uint32) (int, error) {
	var doomed []*segment
	s.mu.RLock()
	for id, seg := range s.segs {
		if id < target {
			doomed = append(doomed, seg)
		}
	}
	s.mu.RUnlock()
	if len(doomed) == 0 {
		return 0, nil
	}
	// The log start moves, index deletions and relocations that put these segments below
	// every live batch were written without a sync: make them durable before any file goes,
	// or a power loss would bring back an index that names deleted files.
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return 0, err
	}
	s.mu.Lock()
	for _, seg := range doomed {
		delete(s.segs, seg.id)
	}
	s.mu.Unlock()
	var first error
	for _, seg := range doomed {
		if err := s.fs.Remove(seg.f.Name()); err != nil && first == nil {
			first = err
		}
		// A read that took the segment before it left the map keeps reading the unlinked
		// file; the last reference closes it.
		seg.unref()
	}
	if err := s.fs.SyncDir(s.dir); err != nil && first == nil {
		first = err
	}
	return len(doomed), first
}
