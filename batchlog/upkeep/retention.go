package upkeep

import (
	"errors"
	"fmt"
	"math"
	"time"

	"inlet/batchlog"
	"inlet/topicconfig"
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
// A topic with remote.storage.enable (and an Upkeep with a Config.Tier) keeps two starts:
// its log start, across tiers, and its local log start, the first offset on this node
// (retainTiered says which limit moves which).
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
		if !st.Delete {
			continue
		}
		tiered := (st.RemoteStorage || st.Diskless) && u.cfg.Tier != nil // diskless implies tiered
		if !tiered && st.RetentionMs < 0 && st.RetentionBytes < 0 {
			continue
		}
		for _, p := range t.Partitions {
			var err error
			if tiered {
				err = u.retainTiered(ps, p, st, nowMs)
			} else {
				err = retainTotal(u.log, ps, p, st.RetentionMs, st.RetentionBytes, nowMs)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("partition %s/%d: %w", t.Name, p.Index, err))
			}
		}
	}
	return errors.Join(errs...)
}

// retainTotal is the retention of a topic whose batches are all on this node: retention.ms and
// retention.bytes move the log start.
func retainTotal(l *batchlog.Log, ps *batchlog.Pass, p *batchlog.Partition, retentionMs, retentionBytes, nowMs int64) error {
	to, err := retainedFrom(l, p, retentionMs, retentionBytes, nowMs, noCap)
	if err != nil || to <= p.LogStartOffset() {
		return err
	}
	return ps.AdvanceLogStart(p, to)
}

// retainTiered is the retention of a topic with remote.storage.enable, on the batches still
// on this node (KIP-405: RemoteLogManager's retention of the remote tier is the tier's, and
// UnifiedLog.deleteOldSegments's of the local log is this):
//
//   - retention.ms, the total by time, moves the log start past the local batches it expires,
//     uploaded or not (expired data goes either way; the local start follows);
//   - local.retention.ms and local.retention.bytes move only the local start, never past
//     Tier.UploadedEnd: a batch leaves the node only once the remote tier holds it.
//
// retention.bytes, the total by size, counts remote bytes too: the tier applies it, and the
// deletion of remote objects is the tier's too.
func (u *Upkeep) retainTiered(ps *batchlog.Pass, p *batchlog.Partition, st topicconfig.Settings, nowMs int64) error {
	if st.RetentionMs >= 0 {
		if err := retainTotal(u.log, ps, p, st.RetentionMs, -1, nowMs); err != nil {
			return err
		}
	}
	if st.LocalRetentionMs < 0 && st.LocalRetentionBytes < 0 {
		return nil
	}
	uploaded := u.cfg.Tier.UploadedEnd(p)
	to, err := retainedFrom(u.log, p, st.LocalRetentionMs, st.LocalRetentionBytes, nowMs, uploaded)
	if err != nil || to <= p.LocalLogStartOffset() {
		return err
	}
	return ps.AdvanceLocalStart(p, to)
}

type batchInfo struct {
	base int64
	size int
}

// noCap: retainedFrom may move the start past any batch.
const noCap = math.MaxInt64

// retainedFrom walks p's batches on this node from the first, and returns the offset after
// the leading batches that retentionMs or retentionBytes (either < 0: no such limit) expire,
// stopping before a batch that ends past capEnd: the offset a start may move to. Bytes count
// the batches on this node only.
func retainedFrom(l *batchlog.Log, p *batchlog.Partition, retentionMs, retentionBytes, nowMs, capEnd int64) (int64, error) {
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
		return 0, err
	}
	newStart := int64(0)
	for i, b := range batches {
		next := hw
		if i+1 < len(batches) {
			next = batches[i+1].base
		} else if truncated {
			break // listing was cut short; the next pass continues
		}
		if next > capEnd {
			break // not in the remote tier yet: the next pass, once it is
		}
		expired := false
		if retentionBytes >= 0 && total-int64(b.size) >= retentionBytes {
			expired = true
		}
		if !expired && retentionMs >= 0 {
			maxTS, err := l.BatchMaxTimestamp(p, b.base)
			if err != nil {
				return 0, err
			}
			expired = maxTS < nowMs-retentionMs
		}
		if !expired {
			break
		}
		total -= int64(b.size)
		newStart = max(newStart, next)
	}
	return newStart, nil
}
