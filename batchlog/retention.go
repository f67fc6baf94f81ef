package batchlog

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"inlet/wire"
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
// once) and deleting the batches' index entries (in the pebble layout, the batches).
//
// Space in the segment layout follows, segment files being shared by all partitions, by
// reclaimSegments (reclaim.go): it copies the few live batches that pin old segments forward
// and deletes the segments.

// RetentionCheckInterval is how often the background pass runs (Kafka's
// log.retention.check.interval.ms default is 5 minutes).
const defaultRetentionCheckInterval = 5 * time.Minute

// RetentionCheckInterval is the interval of the background pass in force (negative: none).
func (l *Log) RetentionCheckInterval() time.Duration {
	if l.opts.RetentionCheckInterval == 0 {
		return defaultRetentionCheckInterval
	}
	return l.opts.RetentionCheckInterval
}

func (l *Log) startRetention() {
	iv := l.RetentionCheckInterval()
	if iv < 0 {
		return
	}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		t := time.NewTicker(iv)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				if err := l.EnforceRetention(time.Now()); err != nil {
					l.log.Error("batchlog: retention", "err", err)
				}
				if n := l.ExpireProducers(time.Now()); n > 0 {
					l.log.Info("batchlog: producer windows expired", "count", n)
				}
			}
		}
	}()
}

// EnforceRetention runs one retention pass as of now, then reclaims segment files.
func (l *Log) EnforceRetention(now time.Time) error {
	if l.db == nil || l.closed.Load() {
		return nil
	}
	l.retainMu.Lock()
	defer l.retainMu.Unlock()
	nowMs := now.UnixMilli()
	var errs []error // a partition's error does not stop the others
	for _, t := range l.Topics() {
		st := t.Settings
		if !st.Delete || (st.RetentionMs < 0 && st.RetentionBytes < 0) {
			continue
		}
		for _, p := range t.Partitions {
			if err := l.retainPartition(p, st.RetentionMs, st.RetentionBytes, nowMs); err != nil {
				errs = append(errs, fmt.Errorf("partition %s/%d: %w", t.Name, p.Index, err))
			}
		}
	}
	if err := l.compactTopics(now); err != nil {
		errs = append(errs, err)
	}
	// A partition whose pass failed keeps its batches live: the reclaim reads the index,
	// so it is safe whatever the pass did.
	if l.segs != nil {
		n, err := l.reclaimSegments(l.segs)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			l.log.Info("batchlog: reclaimed segment files", "count", n)
		}
	}
	return errors.Join(errs...)
}

type batchInfo struct {
	base int64
	size int
}

func (l *Log) retainPartition(p *Partition, retentionMs, retentionBytes, nowMs int64) error {
	hw := p.HighWatermark()
	var batches []batchInfo
	total := int64(0)
	truncated := false
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(p.ID, 0), UpperBound: dataKey(p.ID, hw)})
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		size, err := l.indexedBatchSize(it)
		if err != nil {
			it.Close()
			return err
		}
		batches = append(batches, batchInfo{base: dataKeyOffset(it.Key()), size: size})
		total += int64(size)
		if retentionBytes < 0 && len(batches) > 1024 {
			// Time retention stops at the first live batch; no need to list them all.
			truncated = true
			break
		}
	}
	if err := it.Close(); err != nil {
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
			maxTS, err := l.batchMaxTimestamp(p, b.base)
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
		return l.advanceLogStart(p, newStart, pebble.NoSync)
	}
	return nil
}

// batchMaxTimestamp reads the max timestamp of the stored batch at base.
func (l *Log) batchMaxTimestamp(p *Partition, base int64) (int64, error) {
	buf, err := l.readStored(p, base)
	if err != nil {
		return 0, err
	}
	if len(buf) < 61 {
		return 0, errors.New("stored batch shorter than a batch header")
	}
	return wire.BatchMaxTimestamp(buf), nil
}

// indexedBatchSize is the stored size of the batch at it, an iterator over a partition's data
// keys: with segments the index entry records it (bytes 12..15), with record data in Pebble
// it is the value's length.
func (l *Log) indexedBatchSize(it *pebble.Iterator) (int, error) {
	if l.segs != nil {
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, err
		}
		loc, err := parseBatchLoc(v)
		return loc.length, err
	}
	lv := it.LazyValue()
	return lv.Len(), nil
}

// PartitionBytes is the bytes of record batches p holds from its log start to its high
// watermark (DescribeLogDirs' size). It walks p's index: an admin call's cost, not a hot
// path's.
func (l *Log) PartitionBytes(p *Partition) (int64, error) {
	if l.db == nil {
		return 0, nil // discard: nothing is stored
	}
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(p.ID, 0), UpperBound: dataKey(p.ID, p.HighWatermark())})
	if err != nil {
		return 0, err
	}
	total := int64(0)
	for valid := it.First(); valid; valid = it.Next() {
		size, err := l.indexedBatchSize(it)
		if err != nil {
			it.Close()
			return 0, err
		}
		total += int64(size)
	}
	return total, it.Close()
}

// Dir is the log's data directory ("" when nothing is stored).
func (l *Log) Dir() string { return l.opts.Dir }
