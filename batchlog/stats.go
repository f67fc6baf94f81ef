package batchlog

import (
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Stats is the log's state as it is now, read when asked (a metrics scrape) rather than kept up
// to date on the commit path. What happens per group is reported as it happens instead
// (Options.Observer).
type Stats struct {
	SegmentFiles int   // segment files, the active one included
	SegmentBytes int64 // their sizes (block-aligned groups included)
	// RelocatedBytes counts the bytes of live batches the reclaim pass copied forward out of
	// old segments since Open (reclaim.go).
	RelocatedBytes int64
	// WritesSuspended: a full disk has suspended writes (nospace.go).
	WritesSuspended bool
	// Compaction since Open (upkeep/compact.go): passes that changed something or found nothing to
	// do past the dirty ratio, batches rewritten and dropped, records removed.
	CompactionPasses, CompactedBatchesRewritten, CompactedBatchesDropped, CompactedRecordsRemoved int64
	// WriteStalls counts the times Pebble delayed writes since Open (too many memtables or L0
	// files waiting for flushes and compactions); WriteStallTime is their total duration, a
	// stall under way included.
	WriteStalls    int64
	WriteStallTime time.Duration
	// FetchCacheHits and FetchCacheMisses count the batch reads the tail cache served and
	// those that went to the segment files; FetchCacheBytes is what it holds now (segments/readplan.go).
	FetchCacheHits, FetchCacheMisses, FetchCacheBytes int64
	// Partitions is the number of partitions of all topics (PartitionCount).
	Partitions int
	// Producers: the producer windows held, evicted and refused (producers.go).
	Producers ProducerWindowStats
	// Pebble is the metadata store's own metrics (compaction debt, levels, WAL and its fsync
	// latency); nil when nothing is stored (discard).
	Pebble *pebble.Metrics
}

// Stats reads the log's current state. It stats every segment file and takes Pebble's metrics
// (which walk its current version): a scrape's cost, not a request's. After Close it returns
// the zero Stats.
func (l *Log) Stats() Stats {
	var st Stats
	if l.closed.Load() {
		return st
	}
	st.WriteStalls, st.WriteStallTime = l.meta.WriteStalls()
	st.RelocatedBytes = l.relocatedBytes.Load()
	st.Partitions = l.PartitionCount()
	st.Producers = ProducerWindowStats{Held: l.windowsHeld.Load(), Evicted: l.windowsEvicted.Load(), Refused: l.windowsRefused.Load()}
	st.WritesSuspended = l.suspended.Load()
	st.CompactionPasses, st.CompactedRecordsRemoved = l.compacted.passes.Load(), l.compacted.removed.Load()
	st.CompactedBatchesRewritten, st.CompactedBatchesDropped = l.compacted.rewritten.Load(), l.compacted.dropped.Load()
	if l.db != nil {
		st.Pebble = l.db.Metrics()
	}
	if l.segs != nil {
		ss := l.segs.Stats()
		st.SegmentFiles, st.SegmentBytes = ss.Files, ss.Bytes
		st.FetchCacheHits, st.FetchCacheMisses, st.FetchCacheBytes = ss.CacheHits, ss.CacheMisses, ss.CacheBytes
	}
	return st
}

// compactionCounts is what compaction passes did since start (Stats; Pass.CountCompaction).
type compactionCounts struct {
	passes, rewritten, dropped, removed atomic.Int64
}

// PartitionBytes is the bytes of record batches p holds from its log start to its high
// watermark (DescribeLogDirs' size). It walks p's index: an admin call's cost, not a hot
// path's.
func (l *Log) PartitionBytes(p *Partition) (int64, error) {
	total := int64(0)
	err := l.IndexedBatches(p, 0, p.HighWatermark(), func(_ int64, size int) bool {
		total += int64(size)
		return true
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}

// Dir is the log's data directory ("" when nothing is stored).
func (l *Log) Dir() string { return l.opts.Dir }
