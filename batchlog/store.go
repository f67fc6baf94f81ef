package batchlog

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// store is the seam between the committer and the storage engine, in the manner of pebble's
// commitEnv: the committer decides what a group holds and in which order groups become
// durable; a store only writes. Tests substitute a store that records calls and holds syncs
// open, so commit ordering is tested without a database.
type store interface {
	// newGroup starts the write of one group; sizeHint is the bytes of record data it will hold.
	newGroup(sizeHint int) group
	// planRead adds to plan the stored batches of partition, starting with the batch that
	// contains offset, stopping before the first batch whose base offset is >= limit, and once
	// they hold at least maxBytes (the first batch is added whatever its size when includeFirst
	// is set; otherwise a batch that would pass maxBytes is left out); readplan.go.
	planRead(partition uint32, offset, limit int64, maxBytes int, includeFirst bool, plan *ReadPlan) error
	// metadataInterval is how often the committer must add the high watermarks and producer
	// windows changed since the last time to a group; 0 means with every group. A store can
	// allow more only if it rebuilds them after a crash from the record data written since
	// the last group that carried them (the segment store's replay does).
	metadataInterval() time.Duration
	// dropUnwritten forgets the groups staged for writing and not written yet: writes are
	// suspended, and their groups are answered with an error instead (nospace.go).
	dropUnwritten()
	close() error
}

// group is one atomic, synced write.
type group interface {
	// setData stores a batch; relocated: one already stored, moved or rewritten (reclaim,
	// compaction), not a new append.
	setData(partition uint32, baseOffset int64, batch []byte, relocated bool)
	set(key, value []byte)
	del(key []byte)
	// apply makes the group visible to the engine and starts its sync, without waiting for it.
	// Groups are applied in commit order by the single committer goroutine.
	apply() error
	// wait blocks until the group is durable. Called in apply order by the completer.
	wait() error
	// carriesMetadata marks the group as holding every high watermark and producer window
	// changed since the previous such group: the store's view of the log is whole up to the
	// group's end. Called by the committer before apply.
	carriesMetadata()
	release()
}

// pebbleStore keeps the log in Pebble.
type pebbleStore struct {
	db   *pebble.DB
	free chan *pebbleGroup
}

type pebbleGroup struct {
	s *pebbleStore
	b *pebble.Batch
}

func (s *pebbleStore) newGroup(sizeHint int) group {
	// Pre-size the batch so appending record data never regrows (and re-copies) it.
	// Pebble pools batches; retaining buffers up to a full group keeps steady-state commits
	// from allocating a fresh multi-megabyte buffer each time.
	var g *pebbleGroup
	select {
	case g = <-s.free:
	default:
		g = &pebbleGroup{s: s}
	}
	g.b = s.db.NewBatchWithSize(sizeHint+4096, pebble.WithMaxRetainedSizeBytes(64<<20))
	return g
}

func (g *pebbleGroup) setData(partition uint32, baseOffset int64, batch []byte, _ bool) {
	// SetDeferred writes the key and value straight into the batch representation: one copy
	// of the record data into the batch, none through an intermediate key buffer.
	op := g.b.SetDeferred(dataKeyLen, len(batch))
	putDataKey(op.Key, partition, baseOffset)
	copy(op.Value, batch)
	op.Finish()
}

func (g *pebbleGroup) set(key, value []byte) { _ = g.b.Set(key, value, nil) }

func (g *pebbleGroup) del(key []byte) { _ = g.b.Delete(key, nil) }

func (g *pebbleGroup) apply() error { return g.s.db.ApplyNoSyncWait(g.b, pebble.Sync) }

func (g *pebbleGroup) wait() error { return g.b.SyncWait() }

func (s *pebbleStore) metadataInterval() time.Duration { return 0 }
func (g *pebbleGroup) carriesMetadata()                {}

func (g *pebbleGroup) release() {
	_ = g.b.Close()
	g.b = nil
	select {
	case g.s.free <- g:
	default:
	}
}

// eachIndexedBatch calls fn with the base offset and value of every data key of partition below limit,
// starting with the batch that contains offset (the last one whose base offset is <= offset,
// or the first one if none is), until fn returns false. Both layouts read through it; the
// value is the batch itself (pebble layout) or its 16-byte segment index entry (segments).
func eachIndexedBatch(db *pebble.DB, partition uint32, offset, limit int64, fn func(base int64, v []byte) (bool, error)) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: dataKey(partition, 0), UpperBound: dataKey(partition, limit)})
	if err != nil {
		return err
	}
	defer it.Close()
	valid := it.SeekLT(dataKey(partition, offset+1))
	if !valid {
		valid = it.First()
	}
	for ; valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if more, err := fn(dataKeyOffset(it.Key()), v); err != nil || !more {
			return err
		}
	}
	return it.Error()
}

func (s *pebbleStore) close() error { return nil } // the database is the catalog's

func (s *pebbleStore) dropUnwritten() {}

// discardStore acknowledges without storing: the ceiling the protocol, network and load
// generator leave, measured by the benchmark harness. Nothing is readable.
type discardStore struct{}

type discardGroup struct{}

func (discardStore) newGroup(int) group { return discardGroup{} }
func (discardStore) planRead(uint32, int64, int64, int, bool, *ReadPlan) error {
	return nil
}
func (discardStore) close() error                        { return nil }
func (discardStore) dropUnwritten()                      {}
func (discardGroup) setData(uint32, int64, []byte, bool) {}
func (discardGroup) set(_, _ []byte)                     {}
func (discardGroup) del([]byte)                          {}
func (discardGroup) apply() error                        { return nil }
func (discardGroup) wait() error                         { return nil }
func (discardGroup) release()                            {}
func (discardGroup) carriesMetadata()                    {}
func (discardStore) metadataInterval() time.Duration {
	return 0
}
