package batchlog

import (
	"time"

	"github.com/cockroachdb/pebble/v2"

	"inlet/batchlog/segments"
)

// Store is the seam between the committer and the storage engine, in the manner of pebble's
// commitEnv: the committer decides what a group holds and in which order groups become
// durable; a store only writes. Tests substitute a store that records calls and holds syncs
// open, so commit ordering is tested without a database (newWithStore, export_test.go). Three
// layouts implement it: the segment store (package segments, through segmentLayout below),
// Pebble values (pebbleStore) and nothing stored (discardStore). The commit pipeline
// (commit.go) and the read path (readplan.go) reach the disk only through it.
//
// Beside the seam the log calls a named set of the segment store's own operations (Log.segs,
// with the segments layout only), none of them on the produce path:
//   - recovery (log.go) and the rebuild after a full disk (nospace.go): Store.Checkpoint,
//     Store.Replay, Store.ResetAfterFailure, Store.FreeBytes (the free-space reserve), and
//     segments.IsNoSpace on a write's error;
//   - the start-up check (startcheck.go): segments.Open's ErrNoDirectory, Store.Missing;
//   - the reclaim (reclaim.go): Store.Checkpoint, Store.SizesBelow, Store.ReadBatch,
//     Store.DeleteBelow;
//   - a log start moved or a topic deleted (upkeep_ops.go, topics_admin.go):
//     Store.ForgetRecent; Stats: Store.Stats.
type Store interface {
	// NewGroup starts the write of one group; sizeHint is the bytes of record data it will hold.
	NewGroup(sizeHint int) Group
	// PlanRead adds to plan the stored batches of partition, starting with the batch that
	// contains offset, stopping before the first batch whose base offset is >= limit, and once
	// they hold at least maxBytes (the first batch is added whatever its size when includeFirst
	// is set; otherwise a batch that would pass maxBytes is left out); segments/readplan.go.
	PlanRead(partition uint32, offset, limit int64, maxBytes int, includeFirst bool, plan *ReadPlan) error
	// MetadataInterval is how often the committer must add the high watermarks and producer
	// windows changed since the last time to a group; 0 means with every group. A store can
	// allow more only if it rebuilds them after a crash from the record data written since
	// the last group that carried them (the segment store's replay does).
	MetadataInterval() time.Duration
	// DropUnwritten forgets the groups staged for writing and not written yet: writes are
	// suspended, and their groups are answered with an error instead (nospace.go).
	DropUnwritten()
	Close() error
}

// Group is one atomic, synced write.
type Group interface {
	// SetData stores a batch; relocated: one already stored, moved or rewritten (reclaim,
	// compaction), not a new append.
	SetData(partition uint32, baseOffset int64, batch []byte, relocated bool)
	Set(key, value []byte)
	Del(key []byte)
	// Apply makes the group visible to the engine and starts its sync, without waiting for it.
	// Groups are applied in commit order by the single committer goroutine.
	Apply() error
	// Wait returns once the group is durable and its index visible to reads: a store may
	// write and sync here (the segment store does, and then commits the group's index and
	// fills its read caches). Called in apply order by the completer.
	Wait() error
	// CarriesMetadata marks the group as holding every high watermark and producer window
	// changed since the previous such group: the store's view of the log is whole up to the
	// group's end. Called by the committer before apply.
	CarriesMetadata()
	Release()
}

// segmentLayout is the segment store behind the seam: NewGroup answers the store's concrete
// group as a Group (a pointer in an interface: nothing allocated); the rest is the store's.
type segmentLayout struct{ *segments.Store }

func (s segmentLayout) NewGroup(sizeHint int) Group { return s.Store.NewGroup(sizeHint) }

// pebbleStore keeps the log in Pebble.
type pebbleStore struct {
	db   *pebble.DB
	free chan *pebbleGroup
}

type pebbleGroup struct {
	s *pebbleStore
	b *pebble.Batch
}

func (s *pebbleStore) NewGroup(sizeHint int) Group {
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

func (g *pebbleGroup) SetData(partition uint32, baseOffset int64, batch []byte, _ bool) {
	// SetDeferred writes the key and value straight into the batch representation: one copy
	// of the record data into the batch, none through an intermediate key buffer.
	op := g.b.SetDeferred(dataKeyLen, len(batch))
	putDataKey(op.Key, partition, baseOffset)
	copy(op.Value, batch)
	op.Finish()
}

func (g *pebbleGroup) Set(key, value []byte) { _ = g.b.Set(key, value, nil) }

func (g *pebbleGroup) Del(key []byte) { _ = g.b.Delete(key, nil) }

func (g *pebbleGroup) Apply() error { return g.s.db.ApplyNoSyncWait(g.b, pebble.Sync) }

func (g *pebbleGroup) Wait() error { return g.b.SyncWait() }

func (s *pebbleStore) MetadataInterval() time.Duration { return 0 }
func (g *pebbleGroup) CarriesMetadata()                {}

func (g *pebbleGroup) Release() {
	_ = g.b.Close()
	g.b = nil
	select {
	case g.s.free <- g:
	default:
	}
}

func (s *pebbleStore) Close() error { return nil } // the database is the catalog's

func (s *pebbleStore) DropUnwritten() {}

// discardStore acknowledges without storing: the ceiling the protocol, network and load
// generator leave, measured by the benchmark harness. Nothing is readable.
type discardStore struct{}

type discardGroup struct{}

func (discardStore) NewGroup(int) Group { return discardGroup{} }
func (discardStore) PlanRead(uint32, int64, int64, int, bool, *ReadPlan) error {
	return nil
}
func (discardStore) Close() error                        { return nil }
func (discardStore) DropUnwritten()                      {}
func (discardGroup) SetData(uint32, int64, []byte, bool) {}
func (discardGroup) Set(_, _ []byte)                     {}
func (discardGroup) Del([]byte)                          {}
func (discardGroup) Apply() error                        { return nil }
func (discardGroup) Wait() error                         { return nil }
func (discardGroup) Release()                            {}
func (discardGroup) CarriesMetadata()                    {}
func (discardStore) MetadataInterval() time.Duration {
	return 0
}
