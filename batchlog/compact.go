package batchlog

// Compaction (Kafka's LogCleaner) for topics with cleanup.policy=compact: keep the latest
// record of each key, at its offset.
//
// A pass runs after retention, on the retention goroutine (under retainMu), per partition:
//
//  1. The cleanable range is [log start, end): end is the first offset of Kafka's active
//     segment (emulated: a new virtual segment starts where a batch would have made the
//     previous one larger than segment.bytes, or later than segment.ms after its first
//     batch's timestamp, as Kafka rolls), no later than the last stable offset (an open
//     transaction is never compacted), nor than the first batch younger than
//     min.compaction.lag.ms.
//  2. The pass runs only when the dirty part [cleaned-to, end) is at least
//     min.cleanable.dirty.ratio of the range's bytes.
//  3. A map of the dirty part, up to the last stable offset, gives each key's last offset
//     (records of aborted transactions and control batches do not count; it is built in the
//     same scan as step 1's headers); then every batch of the range is filtered: a record
//     stays if no later record in the map has its key; a tombstone (null value) that stays goes
//     once its batch is older than delete.retention.ms; records of aborted transactions go;
//     control batches stay whole.
//  4. A batch that lost records is rewritten under its own header (base offset, last offset
//     delta, timestamps, producer id, epoch and base sequence unchanged: offsets and the
//     sequence ranges of what remains stay as they were), uncompressed; a batch that lost
//     them all leaves the index. Both go through the committer as relocations (reclaim.go):
//     a rewritten batch is written forward and its index entry replaced in the group's
//     Pebble batch, once durable; readers see either version, both valid at every offset.
//
// Crash safety is the reclaim pass's: a crash before the group's index is durable leaves the
// old batches indexed (the pass is simply redone); replay indexes a rewritten copy where it
// now lies. The old segments go later, through reclaimSegments, once nothing names them.
//
// Pacing: a pass rewrites at most compactMaxBytes and sleeps after each request so that it
// writes at most compactBytesPerSec: produce keeps the disk.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"inlet/topicconfig"
	"inlet/wire"
)

const (
	compactChunk       = 4 << 20   // rewritten bytes per request to the committer
	compactMaxBytes    = 256 << 20 // rewritten bytes per partition per pass
	compactBytesPerSec = 64 << 20  // the pace of the rewrite
	compactReadChunk   = 8 << 20   // bytes read from the log at a time
	compactMaxKeys     = 4 << 20   // keys in one pass's map; past it, the dirty part ends early
)

// compactionCounts is what compaction passes did since start (Stats).
type compactionCounts struct {
	passes, rewritten, dropped, removed atomic.Int64
}

// batchMeta is what the cleaner needs of a stored batch without its records.
type batchMeta struct {
	base, last     int64
	size           int
	firstTs, maxTs int64
	producerID     int64
	control, txnl  bool
}

// scanBatches calls fn with each stored batch of p from the one holding from up to to.
func (l *Log) scanBatches(p *Partition, from, to int64, fn func(batch []byte) error) error {
	var buf []byte
	for from < to {
		var err error
		buf, err = l.ReadBatches(p, from, to, compactReadChunk, true, buf[:0])
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return nil
		}
		for b := buf; len(b) >= wire.RecordBatchOverhead; {
			n := 12 + int(binary.BigEndian.Uint32(b[8:]))
			if n > len(b) {
				return errors.New("batchlog: compaction read a partial batch")
			}
			if err := fn(b[:n]); err != nil {
				return err
			}
			from = wire.BatchLastOffset(b[:n]) + 1
			b = b[n:]
		}
	}
	return nil
}

func metaOf(batch []byte) batchMeta {
	h, _ := wire.ParseBatchHeader(batch)
	return batchMeta{base: h.BaseOffset, last: h.BaseOffset + int64(h.LastOffsetDelta), size: len(batch),
		firstTs: h.FirstTimestamp, maxTs: h.MaxTimestamp, producerID: h.ProducerID,
		control: h.IsControl(), txnl: h.IsTransactional()}
}

// cleanableEnd is step 1 of the package comment's pass.
func cleanableEnd(batches []batchMeta, st topicconfig.Settings, lso, nowMs int64) int64 {
	if len(batches) == 0 {
		return lso
	}
	// The active segment: the last virtual segment, rolled as Kafka rolls.
	active := 0
	segBytes, segFirstTs := 0, batches[0].maxTs
	for i, b := range batches {
		if i > active && (int64(segBytes+b.size) > st.SegmentBytes || b.maxTs-segFirstTs > st.SegmentMs) {
			active, segBytes, segFirstTs = i, 0, b.maxTs
		}
		segBytes += b.size
	}
	end := min(batches[active].base, lso)
	for _, b := range batches {
		if b.base >= end {
			break
		}
		if nowMs-b.maxTs < st.MinCompactionLagMs {
			end = b.base
			break
		}
	}
	return end
}

// abortedAt reports whether the batch is data of an aborted transaction.
func abortedAt(aborted []AbortedTxn, b batchMeta) bool {
	if !b.txnl || b.control {
		return false
	}
	for _, a := range aborted {
		if a.ProducerID == b.producerID && b.base >= a.FirstOffset && b.base < a.LastOffset {
			return true
		}
	}
	return false
}

// compactPartition runs one pass on p; it returns the bytes it rewrote.
func (l *Log) compactPartition(p *Partition, st topicconfig.Settings, nowMs int64) (int, error) {
	start, hw, lso := p.LogStartOffset(), p.HighWatermark(), p.LastStableOffset()
	cleaned := max(p.cleanedTo.Load(), start)
	aborted := p.AbortedTxns(start, lso)

	// One scan gives the batches' headers and the key map: each key's last offset among
	// the records from the dirty part up to the last stable offset (not those of aborted
	// transactions, nor markers). A record below end with a later one in the map is
	// superseded by a record that stays readable, whether or not that one is below end.
	var (
		batches []batchMeta
		last    = map[string]int64{}
		scratch []byte
		mapFull int64 = -1 // the first batch left out of a full map
	)
	err := l.scanBatches(p, start, hw, func(batch []byte) error {
		m := metaOf(batch)
		batches = append(batches, m)
		if m.base < cleaned || m.last >= lso || m.control || abortedAt(aborted, m) || mapFull >= 0 {
			return nil
		}
		if len(last) >= compactMaxKeys {
			mapFull = m.base // the map is full: this pass cleans up to here
			return nil
		}
		var err error
		scratch, err = wire.ForEachRecord(batch, scratch, func(r wire.Record) error {
			if r.Key != nil {
				last[string(r.Key)] = m.base + int64(r.OffsetDelta)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return 0, err
	}
	end := cleanableEnd(batches, st, lso, nowMs)
	if mapFull >= 0 {
		end = min(end, mapFull)
	}
	var dirtyBytes, totalBytes int64
	for _, b := range batches {
		if b.base >= end {
			break
		}
		totalBytes += int64(b.size)
		if b.base >= cleaned {
			dirtyBytes += int64(b.size)
		}
	}
	if dirtyBytes == 0 || float64(dirtyBytes) < st.MinCleanableRatio*float64(totalBytes) {
		return 0, nil
	}

	// Filter the range and submit the changes.
	pace, chunk := compactBytesPerSec, compactChunk
	if l.opts.compactPace > 0 {
		pace, chunk = l.opts.compactPace, l.opts.compactChunk
	}
	var (
		req                       = &Request{}
		reqBytes                  int
		rewritten                 int
		raws                      [][]byte
		removed, rewrote, dropped int64
	)
	flush := func() error {
		if len(req.Appends) == 0 {
			return nil
		}
		if err := l.submitRelocations(req); err != nil {
			return err
		}
		if reqBytes > 0 {
			time.Sleep(time.Duration(float64(reqBytes) / float64(pace) * float64(time.Second)))
		}
		req, reqBytes = &Request{}, 0
		return nil
	}
	err = l.scanBatches(p, start, end, func(batch []byte) error {
		m := metaOf(batch)
		if m.base >= end || m.control || rewritten >= compactMaxBytes {
			return nil
		}
		dropAll := abortedAt(aborted, m)
		raws = raws[:0]
		total := 0
		var err error
		scratch, err = wire.ForEachRecord(batch, scratch, func(r wire.Record) error {
			total++
			if dropAll {
				return nil
			}
			off := m.base + int64(r.OffsetDelta)
			if r.Key != nil {
				if latest, ok := last[string(r.Key)]; ok && latest > off {
					return nil // a later record of the key replaces it
				}
				if r.Value == nil && nowMs-m.maxTs > st.DeleteRetentionMs {
					return nil // a tombstone past delete.retention.ms
				}
			}
			raws = append(raws, r.Raw)
			return nil
		})
		if err != nil {
			return fmt.Errorf("batchlog: compacting %s/%d at %d: %w", p.Topic, p.Index, m.base, err)
		}
		if len(raws) == total {
			return nil
		}
		removed += int64(total - len(raws))
		a := Append{Partition: p, BaseOffset: m.base, Relocate: true}
		if len(raws) == 0 {
			dropped++
		} else {
			a.Batch = wire.AppendRebuiltBatch(nil, batch, raws)
			rewrote++
			reqBytes += len(a.Batch)
			rewritten += len(a.Batch)
		}
		req.Appends = append(req.Appends, a)
		if reqBytes >= chunk || len(req.Appends) >= 4096 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return rewritten, err
	}
	if rewritten < compactMaxBytes {
		p.cleanedTo.Store(end)
		var k [highKeyLen]byte
		putCleanedKey(k[:], p.ID)
		if err := l.db.Set(k[:], binary.BigEndian.AppendUint64(nil, uint64(end)), pebble.NoSync); err != nil {
			return rewritten, err
		}
	}
	l.compacted.passes.Add(1)
	l.compacted.rewritten.Add(rewrote)
	l.compacted.dropped.Add(dropped)
	l.compacted.removed.Add(removed)
	return rewritten, nil
}

// submitRelocations hands a request of relocations to the committer and waits until it is
// durable.
func (l *Log) submitRelocations(req *Request) error {
	done := make(chan struct{})
	req.Done = func(*Request) { close(done) }
	l.Submit(req)
	select {
	case <-done:
	case <-l.stop:
		return errors.New("batchlog: closed while compacting")
	}
	for i := range req.Appends {
		if code := req.Appends[i].Err; code != 0 {
			return fmt.Errorf("batchlog: compaction: error code %d", code)
		}
	}
	return nil
}

// compactTopics runs a pass on every partition of every compacted topic (under retainMu).
func (l *Log) compactTopics(now time.Time) error {
	var errs []error
	for _, t := range l.Topics() {
		if !t.Settings.Compact || t.Internal() {
			continue
		}
		for _, p := range t.Partitions {
			if _, err := l.compactPartition(p, t.Settings, now.UnixMilli()); err != nil {
				errs = append(errs, fmt.Errorf("compact %s/%d: %w", t.Name, p.Index, err))
			}
		}
	}
	return errors.Join(errs...)
}
