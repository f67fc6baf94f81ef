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
//     transaction is never compacted), nor, when min.compaction.lag.ms is set, than the first
//     batch younger than it.
//  2. The pass runs only when the dirty part [cleaned-to, end) is at least
//     min.cleanable.dirty.ratio of the range's bytes: checked first on the index up to the
//     last stable offset (a bound of the real ratio, read without touching a batch), then
//     exactly.
//  3. A map of the dirty part, up to the last stable offset, gives each key's last offset
//     (records of aborted transactions and control batches do not count; it is built in the
//     same scan as step 1's headers, and bounded to compactMaxMapBytes, past which the pass
//     ends early); then every batch of the range is filtered: a record stays if no later record
//     in the map has its key; a tombstone (null value) that stays goes delete.retention.ms
//     after the first pass that compacted past it (Kafka's delete horizon, KIP-534: never the
//     producer's timestamp); records of aborted transactions go; control batches stay whole.
//  4. A batch that lost records is rewritten under its own header (base offset, last offset
//     delta, timestamps, producer id, epoch and base sequence unchanged: offsets and the
//     sequence ranges of what remains stay as they were), uncompressed; a batch that lost
//     them all leaves the index. Both go through the committer as relocations (reclaim.go):
//     a rewritten batch is written forward and its index entry replaced in the group's
//     Pebble batch, once durable; readers see either version, both valid at every offset.
//
// Crash safety is the reclaim pass's: a crash before the group's index is durable leaves the
// old batches indexed (the pass is simply redone); replay indexes a rewritten copy where it
// now lies. A dropped batch leaves nothing in the segments to tell replay, so the group that
// drops it carries the checkpoint (commit.go's forceMeta): once its deletion is durable,
// replay starts after the batch and every copy of it, and never indexes it again (which
// would bring back a key whose tombstone went). The old segments go later, through
// reclaimSegments, once nothing names them.
//
// Pacing: a pass rewrites at most compactMaxBytes and sleeps after each request so that it
// writes at most compactBytesPerSec: produce keeps the disk.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
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
	compactMaxMapBytes = 128 << 20 // one pass's key map (log.cleaner.dedupe.buffer.size); past it, the dirty part ends early
	mapEntryOverhead   = 64        // a map entry's bytes beside its key, roughly
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
		for b := buf; ; {
			batch, rest, err := wire.NextBatch(b)
			if err != nil {
				return fmt.Errorf("batchlog: %s/%d: %w", p.Topic, p.Index, err)
			}
			if batch == nil {
				break
			}
			if err := fn(batch); err != nil {
				return err
			}
			from = wire.BatchLastOffset(batch) + 1
			b = rest
		}
	}
	return nil
}

func metaOf(batch []byte) (batchMeta, error) {
	h, err := wire.ParseBatchHeader(batch)
	return batchMeta{base: h.BaseOffset, last: h.BaseOffset + int64(h.LastOffsetDelta), size: len(batch),
		firstTs: h.FirstTimestamp, maxTs: h.MaxTimestamp, producerID: h.ProducerID,
		control: h.IsControl(), txnl: h.IsTransactional()}, err
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
	if st.MinCompactionLagMs <= 0 {
		return end // as Kafka: no lag, no timestamp check (a future timestamp stops nothing)
	}
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

// abortedAt reports whether the batch is data of an aborted transaction. aborted is sorted by
// LastOffset; a transaction holding the batch ends after it, and none listed after an entry
// whose LastStable is past the batch began before the batch.
func abortedAt(aborted []AbortedTxn, b batchMeta) bool {
	if !b.txnl || b.control {
		return false
	}
	for i := sort.Search(len(aborted), func(i int) bool { return aborted[i].LastOffset > b.base }); i < len(aborted); i++ {
		a := aborted[i]
		if a.ProducerID == b.producerID && b.base >= a.FirstOffset {
			return true
		}
		if a.LastStable > b.base {
			break
		}
	}
	return false
}

// compactPartition runs one pass on p; it returns the bytes it rewrote.
func (l *Log) compactPartition(p *Partition, st topicconfig.Settings, nowMs int64) (int, error) {
	start, hw, lso := p.LogStartOffset(), p.HighWatermark(), p.LastStableOffset()
	cleaned := max(p.cleanedTo.Load(), start)
	// From the index alone, before reading any batch: the dirty ratio up to the last stable
	// offset bounds the ratio up to any end before it (taking dirty bytes off the tail lowers
	// it), so a partition with too little dirt is left unread.
	if ok, err := l.dirtyEnough(p, start, cleaned, lso, st.MinCleanableRatio); err != nil || !ok {
		return 0, err
	}
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
	mapBytes := 0
	err := l.scanBatches(p, start, hw, func(batch []byte) error {
		m, err := metaOf(batch)
		if err != nil {
			return fmt.Errorf("batchlog: compacting %s/%d: %w", p.Topic, p.Index, err)
		}
		batches = append(batches, m)
		if m.base < cleaned || m.last >= lso || m.control || abortedAt(aborted, m) || mapFull >= 0 {
			return nil
		}
		if mapBytes >= compactMaxMapBytes {
			mapFull = m.base // the map is full: this pass cleans up to here
			return nil
		}
		scratch, err = wire.ForEachRecord(batch, scratch, func(r wire.Record) error {
			if r.Key != nil {
				if _, ok := last[string(r.Key)]; !ok {
					mapBytes += len(r.Key) + mapEntryOverhead
				}
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
		kept                      []wire.Record
		removed, rewrote, dropped int64
	)
	flush := func() error {
		if len(req.Appends) == 0 {
			return nil
		}
		if err := l.submitRelocations(req, "compacting"); err != nil {
			return err
		}
		if reqBytes > 0 {
			time.Sleep(time.Duration(float64(reqBytes) / float64(pace) * float64(time.Second)))
		}
		req, reqBytes = &Request{}, 0
		return nil
	}
	err = l.scanBatches(p, start, end, func(batch []byte) error {
		m, err := metaOf(batch)
		if err != nil {
			return err
		}
		if m.base >= end || m.control || rewritten >= compactMaxBytes {
			return nil
		}
		dropAll := abortedAt(aborted, m)
		kept = kept[:0]
		total := 0
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
				if r.Value == nil && p.tombstoneExpired(off, nowMs, st.DeleteRetentionMs) {
					return nil // a tombstone past delete.retention.ms
				}
			}
			kept = append(kept, r)
			return nil
		})
		if err != nil {
			return fmt.Errorf("batchlog: compacting %s/%d at %d: %w", p.Topic, p.Index, m.base, err)
		}
		if len(kept) == total {
			return nil
		}
		removed += int64(total - len(kept))
		a := Append{Partition: p, BaseOffset: m.base, Relocate: true}
		if len(kept) == 0 {
			dropped++
			reqBytes += m.size // paced as what it frees: deletes load the committer and Pebble too
		} else {
			a.Batch = wire.AppendRebuiltBatch(nil, batch, kept)
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
		p.notePass(start, end, nowMs)
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

// submitRelocations hands a request of relocations (copies forward, compacted batches) to the
// committer and waits until it is durable; what names the work in errors.
func (l *Log) submitRelocations(req *Request, what string) error {
	done := make(chan struct{})
	req.Done = func(*Request) { close(done) }
	l.Submit(req)
	select {
	case <-done:
	case <-l.stop:
		return fmt.Errorf("batchlog: closed while %s", what)
	}
	for i := range req.Appends {
		if code := req.Appends[i].Err; code != 0 {
			return fmt.Errorf("batchlog: %s: error code %d", what, code)
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
			if l.closed.Load() {
				return errors.Join(errs...)
			}
			if _, err := l.compactPartition(p, t.Settings, now.UnixMilli()); err != nil {
				errs = append(errs, fmt.Errorf("compact %s/%d: %w", t.Name, p.Index, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cleanPass is when a pass compacted a partition up to end (unix ms).
type cleanPass struct{ end, atMs int64 }

// notePass records that a pass compacted [start, end) at nowMs; passes wholly below start are
// forgotten.
func (p *Partition) notePass(start, end, nowMs int64) {
	i := 0
	for i < len(p.cleanPasses) && p.cleanPasses[i].end <= start {
		i++
	}
	p.cleanPasses = append(p.cleanPasses[i:], cleanPass{end, nowMs})
}

// tombstoneExpired reports whether the tombstone at off has been in the compacted part of
// the partition for deleteRetentionMs: the delete horizon counts from the first pass that
// compacted past it (KIP-534), never from the producer's timestamp. Passes are remembered in
// memory: after a restart the horizon starts again, which keeps tombstones longer, never
// shorter.
func (p *Partition) tombstoneExpired(off, nowMs, deleteRetentionMs int64) bool {
	for _, c := range p.cleanPasses {
		if c.end > off {
			return nowMs-c.atMs > deleteRetentionMs
		}
	}
	return false
}

// dirtyEnough reports whether the bytes of p's batches in [cleaned, to) are at least ratio of
// those in [start, to), reading only the index.
func (l *Log) dirtyEnough(p *Partition, start, cleaned, to int64, ratio float64) (bool, error) {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(p.ID, start), UpperBound: dataKey(p.ID, to)})
	if err != nil {
		return false, err
	}
	var dirty, total int64
	for valid := it.First(); valid; valid = it.Next() {
		size, err := l.indexedBatchSize(it)
		if err != nil {
			it.Close()
			return false, err
		}
		total += int64(size)
		if dataKeyOffset(it.Key()) >= cleaned {
			dirty += int64(size)
		}
	}
	if err := it.Close(); err != nil {
		return false, err
	}
	return dirty > 0 && float64(dirty) >= ratio*float64(total), nil
}
