package upkeep

import (
	"errors"
	"fmt"
	"time"

	"inlet/batchlog"
)

// Retention (Kafka's LogManager.cleanupLogs / UnifiedLog.deleteOldSegments), per batch rather
// than per segment: a pass walks each partition of a topic with cleanup.policy=delete from its
// log start and drops leading batches while
//
//   - retention.ms >= 0 and the batch's max timestamp is older than now - retention.ms
//     (a batch with a timestamp in the future is never expired by time, as in Kafka), or
//   - retention.bytes >= 0 and the partition stays at or above retention.bytes without it.
//
// Dropping means advancing the log start offset (ListOffsets earliest and Fetch follow at
// once) and deleting the batches' index entries (in the pebble layout, the batches):
// Pass.AdvanceLogStart.
//
// Space in the segment layout follows, segment files being shared by all partitions, by
// the reclaim (Pass.ReclaimSegments, batchlog's reclaim.go): it copies the few live batches
// that pin old segments forward and deletes the segments.

// defaultRetentionCheckInterval is how often the background pass runs (Kafka's
// log.retention.check.interval.ms default is 5 minutes).
const defaultRetentionCheckInterval = 5 * time.Minute

// CheckInterval is the interval of the background pass in force (negative: none).
func (c Config) CheckInterval() time.Duration {
	if c.RetentionCheckInterval == 0 {
		return defaultRetentionCheckInterval
	}
	return c.RetentionCheckInterval
}

// EnforceRetention runs one retention pass as of now, then compaction, then reclaims segment
// files, all in one Log.RunPass.
func (u *Upkeep) EnforceRetention(now time.Time) error {
	return u.log.RunPass(func(ps *batchlog.Pass) error {
		// A pass's error does not stop the next: a partition whose retention or compaction
		// failed keeps its batches live, and the reclaim reads the index, so it is safe
		// whatever they did.
		retained := u.retain(ps, now)
		compacted := u.compactTopics(ps, now)
		return errors.Join(retained, compacted, u.reclaim(ps))
	})
}

// retain runs retention on every partition of every topic with cleanup.policy=delete and a
// limit (inside RunPass).
func (u *Upkeep) retain(ps *batchlog.Pass, now time.Time) error {
	nowMs := now.UnixMilli()
	var errs []error // a partition's error does not stop the others
	for _, t := range u.log.Topics() {
		st := t.Settings
		if !st.Delete || (st.RetentionMs < 0 && st.RetentionBytes < 0) {
			continue
		}
		for _, p := range t.Partitions {
			if err := retainPartition(u.log, ps, p, st.RetentionMs, st.RetentionBytes, nowMs); err != nil {
				errs = append(errs, fmt.Errorf("partition %s/%d: %w", t.Name, p.Index, err))
			}
		}
	}
	return errors.Join(errs...)
}

type batchInfo struct {
	base int64
	size int
}

func retainPartition(l *batchlog.Log, ps *batchlog.Pass, p *batchlog.Partition, retentionMs, retentionBytes, nowMs int64) error {
	hw := p.HighWatermark()
	var batches []batchInfo
	total := int64(0)
	truncated := false
	err := l.IndexedBatches(p, 0, hw, func(base int64, size int) bool {
		batches = append(batches, batchInfo{base: base, size: size})
		total += int64(size)
		if retentionBytes < 0 && len(batches) > 1024 {
			// Time retention stops at the first live batch; no need to list them all.
			truncated = true
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	start := p.LogStartOffset()
	newStart := start
	for i, b := range batches {
		next := hw
		if i+1 < len(batches) {
			next = batches[i+1].base
		} else if truncated {
			break // listing was cut short; the next pass continues
		}
		expired := false
		if retentionBytes >= 0 && total-int64(b.size) >= retentionBytes {
			expired = true
		}
		if !expired && retentionMs >= 0 {
			maxTS, err := l.BatchMaxTimestamp(p, b.base)
			if err != nil {
				return err
			}
			expired = maxTS < nowMs-retentionMs
		}
		if !expired {
			break
		}
		total -= int64(b.size)
		newStart = max(newStart, next)
	}
	if newStart > start {
		return ps.AdvanceLogStart(p, newStart)
	}
	return nil
}
