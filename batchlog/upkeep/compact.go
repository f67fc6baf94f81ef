package upkeep

// Compaction (Kafka's LogCleaner) for topics with cleanup.policy=compact: keep the latest
// record of each key, at its offset.
//
// A pass runs after retention, on the upkeep goroutine (inside Log.RunPass), per partition:
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
//     Pebble batch, once durable; readers see either version, both valid at every offset
//     (Pass.SubmitRelocations).
//
// Crash safety is the reclaim pass's: a crash before the group's index is durable leaves the
// old batches indexed (the pass is simply redone); replay indexes a rewritten copy where it
// now lies. A dropped batch leaves nothing in the segments to tell replay, so the group that
// drops it carries the checkpoint (batchlog's commit.go, forceMeta): once its deletion is
// durable, replay starts after the batch and every copy of it, and never indexes it again
// (which would bring back a key whose tombstone went). The old segments go later, through
// the reclaim (Pass.ReclaimSegments), once nothing names them.
//
// Pacing: a pass rewrites at most compactMaxBytes and sleeps after each request so that it
// writes at most compactBytesPerSec: produce keeps the disk.

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"inlet/batchlog"
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

// batchMeta is what the cleaner needs of a stored batch without its records.
type batchMeta struct {
	base, last     int64
	size           int
	firstTs, maxTs int64
	producerID     int64
	control, txnl  bool
}

// scanBatches calls fn with each stored batch of p from the one holding from up to to.
func scanBatches(l *batchlog.Log, p *batchlog.Partition, from, to int64, fn func(batch []byte) error) error {
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
func abortedAt(aborted []batchlog.AbortedTxn, b batchMeta) bool {
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
func (u *Upkeep) compactPartition(ps *batchlog.Pass, p *batchlog.Partition, st topicconfig.Settings, nowMs int64) (int, error) {
	// The batches on this node: a compacted topic has no remote tier (topicconfig's
	// CheckCombination), so its local start is its log start.
	start, hw, lso := p.LocalLogStartOffset(), p.HighWatermark(), p.LastStableOffset()
	cleaned := max(p.CompactedTo(), start)
	// From the index alone, before reading any batch: the dirty ratio up to the last stable
	// offset bounds the ratio up to any end before it (taking dirty bytes off the tail lowers
	// it), so a partition with too little dirt is left unread.
	if ok, err := dirtyEnough(u.log, p, start, cleaned, lso, st.MinCleanableRatio); err != nil || !ok {
		return 0, err
	}
	aborted := p.AbortedTxns(start, lso)
	km, err := mapKeys(u.log, p, start, hw, cleaned, lso, aborted)
	if err != nil {
		return 0, err
	}
	end, ok := km.cleanableEnd(st, cleaned, lso, nowMs)
	if !ok {
		return 0, nil
	}
	rw := u.newRewriter(ps, p, aborted, km.last)
	err = scanBatches(u.log, p, start, end, func(batch []byte) error {
		return rw.filter(batch, end, st.DeleteRetentionMs, nowMs)
	})
	if err == nil {
		err = rw.flush()
	}
	if err != nil {
		return rw.rewritten, err
	}
	if rw.rewritten < compactMaxBytes {
		u.notePass(p.ID, start, end, nowMs)
		if err := ps.MarkCompacted(p, end); err != nil {
			return rw.rewritten, err
		}
	}
	ps.CountCompaction(rw.rewrote, rw.dropped, rw.removed)
	return rw.rewritten, nil
}

// keyMap is the first scan of a pass: the headers of the partition's batches, and each key's
// last offset among the records from the dirty part up to the last stable offset (not those
// of aborted transactions, nor markers). A record below the cleanable end with a later one in
// the map is superseded by a record that stays readable, whether or not that one is below
// the end.
type keyMap struct {
	batches []batchMeta
	last    map[string]int64
	mapFull int64 // the first batch left out of a full map; -1: none
}

// mapKeys reads p's batches from start to hw into a keyMap.
func mapKeys(l *batchlog.Log, p *batchlog.Partition, start, hw, cleaned, lso int64, aborted []batchlog.AbortedTxn) (keyMap, error) {
	km := keyMap{last: map[string]int64{}, mapFull: -1}
	var scratch []byte
	mapBytes := 0
	err := scanBatches(l, p, start, hw, func(batch []byte) error {
		m, err := metaOf(batch)
		if err != nil {
			return fmt.Errorf("batchlog: compacting %s/%d: %w", p.Topic, p.Index, err)
		}
		km.batches = append(km.batches, m)
		if m.base < cleaned || m.last >= lso || m.control || abortedAt(aborted, m) || km.mapFull >= 0 {
			return nil
		}
		if mapBytes >= compactMaxMapBytes {
			km.mapFull = m.base // the map is full: this pass cleans up to here
			return nil
		}
		scratch, err = wire.ForEachRecord(batch, scratch, func(r wire.Record) error {
			if r.Key != nil {
				if _, ok := km.last[string(r.Key)]; !ok {
					mapBytes += len(r.Key) + mapEntryOverhead
				}
				km.last[string(r.Key)] = m.base + int64(r.OffsetDelta)
			}
			return nil
		})
		return err
	})
	return km, err
}

// cleanableEnd is where the pass cleans to (steps 1 and 2 of the file comment), and whether
// the dirty part below it is enough to run.
func (km *keyMap) cleanableEnd(st topicconfig.Settings, cleaned, lso, nowMs int64) (int64, bool) {
	end := cleanableEnd(km.batches, st, lso, nowMs)
	if km.mapFull >= 0 {
		end = min(end, km.mapFull)
	}
	var dirtyBytes, totalBytes int64
	for _, b := range km.batches {
		if b.base >= end {
			break
		}
		totalBytes += int64(b.size)
		if b.base >= cleaned {
			dirtyBytes += int64(b.size)
		}
	}
	return end, dirtyBytes > 0 && float64(dirtyBytes) >= st.MinCleanableRatio*float64(totalBytes)
}

// rewriter is the second scan of a pass (steps 3 and 4): it filters each batch and hands the
// changes to the committer a chunk at a time, at the pace.
type rewriter struct {
	u       *Upkeep
	ps      *batchlog.Pass
	p       *batchlog.Partition
	aborted []batchlog.AbortedTxn
	last    map[string]int64

	pace, chunk int
	req         *batchlog.Request
	reqBytes    int
	kept        []wire.Record
	scratch     []byte

	rewritten                 int // bytes
	removed, rewrote, dropped int64
}

func (u *Upkeep) newRewriter(ps *batchlog.Pass, p *batchlog.Partition, aborted []batchlog.AbortedTxn, last map[string]int64) *rewriter {
	rw := &rewriter{u: u, ps: ps, p: p, aborted: aborted, last: last, pace: compactBytesPerSec, chunk: compactChunk, req: &batchlog.Request{}}
	if u.hooks.compactPace > 0 {
		rw.pace, rw.chunk = u.hooks.compactPace, u.hooks.compactChunk
	}
	return rw
}

// filter keeps the records of batch that stay and queues the batch's rewrite (or its removal
// when none stays).
func (rw *rewriter) filter(batch []byte, end, deleteRetentionMs, nowMs int64) error {
	m, err := metaOf(batch)
	if err != nil {
		return err
	}
	if m.base >= end || m.control || rw.rewritten >= compactMaxBytes {
		return nil
	}
	dropAll := abortedAt(rw.aborted, m)
	rw.kept = rw.kept[:0]
	total := 0
	rw.scratch, err = wire.ForEachRecord(batch, rw.scratch, func(r wire.Record) error {
		total++
		if dropAll {
			return nil
		}
		off := m.base + int64(r.OffsetDelta)
		if r.Key != nil {
			if latest, ok := rw.last[string(r.Key)]; ok && latest > off {
				return nil // a later record of the key replaces it
			}
			if r.Value == nil && rw.u.tombstoneExpired(rw.p.ID, off, nowMs, deleteRetentionMs) {
				return nil // a tombstone past delete.retention.ms
			}
		}
		rw.kept = append(rw.kept, r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("batchlog: compacting %s/%d at %d: %w", rw.p.Topic, rw.p.Index, m.base, err)
	}
	if len(rw.kept) == total {
		return nil
	}
	rw.removed += int64(total - len(rw.kept))
	a := batchlog.Append{Partition: rw.p, BaseOffset: m.base, Relocate: true}
	if len(rw.kept) == 0 {
		rw.dropped++
		rw.reqBytes += m.size // paced as what it frees: deletes load the committer and Pebble too
	} else {
		a.Batch = wire.AppendRebuiltBatch(nil, batch, rw.kept)
		rw.rewrote++
		rw.reqBytes += len(a.Batch)
		rw.rewritten += len(a.Batch)
	}
	rw.req.Appends = append(rw.req.Appends, a)
	if rw.reqBytes >= rw.chunk || len(rw.req.Appends) >= 4096 {
		return rw.flush()
	}
	return nil
}

// flush submits the queued changes, waits until they are durable, and sleeps to keep the pace.
func (rw *rewriter) flush() error {
	if len(rw.req.Appends) == 0 {
		return nil
	}
	if err := rw.ps.SubmitRelocations(rw.req, "compacting"); err != nil {
		return err
	}
	if rw.reqBytes > 0 {
		time.Sleep(time.Duration(float64(rw.reqBytes) / float64(rw.pace) * float64(time.Second)))
	}
	rw.req, rw.reqBytes = &batchlog.Request{}, 0
	return nil
}

// compactTopics runs a pass on every partition of every compacted topic (inside RunPass).
func (u *Upkeep) compactTopics(ps *batchlog.Pass, now time.Time) error {
	var errs []error
	topics := u.log.Topics()
	u.forgetPassesNotIn(topics)
	for _, t := range topics {
		if !t.Settings.Compact || t.Internal() {
			continue
		}
		for _, p := range t.Partitions {
			if ps.Closing() || u.stopping() {
				return errors.Join(errs...)
			}
			if _, err := u.compactPartition(ps, p, t.Settings, now.UnixMilli()); err != nil {
				errs = append(errs, fmt.Errorf("compact %s/%d: %w", t.Name, p.Index, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cleanPass is when a pass compacted a partition up to end (unix ms).
type cleanPass struct{ end, atMs int64 }

// notePass records that a pass compacted [start, end) of partition id at nowMs; passes wholly
// below start are forgotten.
func (u *Upkeep) notePass(id uint32, start, end, nowMs int64) {
	passes := u.passes[id]
	i := 0
	for i < len(passes) && passes[i].end <= start {
		i++
	}
	u.passes[id] = append(passes[i:], cleanPass{end, nowMs})
}

// tombstoneExpired reports whether the tombstone at off of partition id has been in the
// compacted part of the partition for deleteRetentionMs: the delete horizon counts from the
// first pass that compacted past it (KIP-534), never from the producer's timestamp. Passes
// are remembered in memory: after a restart the horizon starts again, which keeps tombstones
// longer, never shorter.
func (u *Upkeep) tombstoneExpired(id uint32, off, nowMs, deleteRetentionMs int64) bool {
	for _, c := range u.passes[id] {
		if c.end > off {
			return nowMs-c.atMs > deleteRetentionMs
		}
	}
	return false
}

// forgetPassesNotIn drops the passes of partitions no topic has any more (deleted topics:
// partition ids are never reused).
func (u *Upkeep) forgetPassesNotIn(topics []*batchlog.Topic) {
	if len(u.passes) == 0 {
		return
	}
	live := map[uint32]bool{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			live[p.ID] = true
		}
	}
	for id := range u.passes {
		if !live[id] {
			delete(u.passes, id)
		}
	}
}

// dirtyEnough reports whether the bytes of p's batches in [cleaned, to) are at least ratio of
// those in [start, to), reading only the index.
func dirtyEnough(l *batchlog.Log, p *batchlog.Partition, start, cleaned, to int64, ratio float64) (bool, error) {
	var dirty, total int64
	err := l.IndexedBatches(p, start, to, func(base int64, size int) bool {
		total += int64(size)
		if base >= cleaned {
			dirty += int64(size)
		}
		return true
	})
	if err != nil {
		return false, err
	}
	return dirty > 0 && float64(dirty) >= ratio*float64(total), nil
}
