package batchlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"inlet/meta"
)

// Admin changes to topics: configs, partition counts, deletion, DeleteRecords.
//
// A Topic value is immutable once published; every change builds a new one (sharing the
// *Partition values, which carry the live offsets) and swaps it in under topicsMu after its
// record is synced (package meta). Partition ids are never reused (the counter only grows), so anything
// a racing produce writes for a partition of a deleted topic is an orphan that recovery and
// readers ignore rather than data that could surface in a new topic of the same name.

// ErrUnknownTopic is returned for a topic that does not exist.
var ErrUnknownTopic = errors.New("unknown topic")

// record is t as the catalog stores it.
func (t *Topic) record() meta.TopicRecord {
	rec := meta.TopicRecord{Name: t.Name, ID: t.ID, Configs: t.Configs, Creator: t.Creator}
	for _, p := range t.Partitions {
		rec.Partitions = append(rec.Partitions, p.ID)
	}
	return rec
}

// PartitionCount is the number of partitions of every topic (the node's partition bound,
// package server's max.partitions): a counter, not a walk.
func (l *Log) PartitionCount() int { return int(l.partitionsHeld.Load()) }

// PartitionCountOf is the number of partitions of the topics principal created
// (Topic.Creator; package server's max.partitions.per.principal).
func (l *Log) PartitionCountOf(principal string) int {
	l.topicsMu.RLock()
	defer l.topicsMu.RUnlock()
	return l.partitionsBy[principal]
}

// countPartitions adds n partitions (negative: removes) of a topic of creator; under topicsMu.
func (l *Log) countPartitions(creator string, n int) {
	l.partitionsHeld.Add(int64(n))
	if creator == "" {
		return
	}
	if l.partitionsBy == nil {
		l.partitionsBy = map[string]int{}
	}
	if l.partitionsBy[creator] += n; l.partitionsBy[creator] <= 0 {
		delete(l.partitionsBy, creator)
	}
}

// SetTopicConfigs replaces a topic's config overrides (validated by the caller).
func (l *Log) SetTopicConfigs(name string, configs map[string]string) (*Topic, error) {
	l.topicsMu.Lock()
	defer l.topicsMu.Unlock()
	old, ok := l.topics[name]
	if !ok {
		return nil, ErrUnknownTopic
	}
	if len(configs) == 0 {
		configs = nil
	}
	t := &Topic{Name: old.Name, ID: old.ID, Partitions: old.Partitions, Configs: configs, Settings: l.parse(configs), Creator: old.Creator}
	if err := l.meta.SaveTopic(t.record(), l.partSeq); err != nil {
		return nil, fmt.Errorf("batchlog: alter topic %q: %w", name, err)
	}
	l.topics[name] = t
	return t, nil
}

// AddPartitions grows a topic to total partitions (CreatePartitions).
func (l *Log) AddPartitions(name string, total int) (*Topic, error) {
	l.topicsMu.Lock()
	defer l.topicsMu.Unlock()
	old, ok := l.topics[name]
	if !ok {
		return nil, ErrUnknownTopic
	}
	if total <= len(old.Partitions) {
		return nil, fmt.Errorf("batchlog: topic %q has %d partitions, cannot grow to %d", name, len(old.Partitions), total)
	}
	t := &Topic{Name: old.Name, ID: old.ID, Configs: old.Configs, Settings: old.Settings, Creator: old.Creator}
	t.Partitions = append(append([]*Partition(nil), old.Partitions...), make([]*Partition, 0, total-len(old.Partitions))...)
	seq := l.partSeq
	for i := len(old.Partitions); i < total; i++ {
		t.Partitions = append(t.Partitions, &Partition{ID: seq, Topic: name, Index: int32(i), diskless: t.Settings.Diskless})
		seq++
	}
	if err := l.meta.SaveTopic(t.record(), seq); err != nil {
		return nil, fmt.Errorf("batchlog: add partitions to %q: %w", name, err)
	}
	l.partSeq = seq
	l.topics[name] = t
	l.countPartitions(t.Creator, total-len(old.Partitions))
	return t, nil
}

// DeleteTopic removes a topic: its record, its batch index (Pebble data keys for the pebble
// layout), high watermarks, log starts and producer states, in one synced batch. The name can
// be reused at once. Committed group offsets are the coordinator's to delete.
//
// In the segment layout the record bytes stay in their segment files until retention's
// reclamation finds a segment no live partition references (reclaimSegments).
//
// The producer windows of its partitions go from the committer's memory too, open
// transactions included: no marker can reach a deleted partition, so a window left there
// would never end its transaction, never expire, and be written back by the next checkpoint.
func (l *Log) DeleteTopic(name string) error {
	ids, err := l.deleteTopic(name)
	if err != nil {
		return err
	}
	l.dropWindowsOf(ids)
	return nil
}

// dropWindowsOf has the committer forget the producer windows on the partitions ids (of a
// deleted topic) and delete their keys with the next metadata group, and waits for it.
func (l *Log) dropWindowsOf(ids map[uint32]bool) {
	if len(ids) == 0 || l.closed.Load() {
		return
	}
	done := make(chan struct{})
	l.Submit(&Request{
		Inspect: func() { l.forgetWindows(func(k producerKey) bool { return ids[k.partition] }) },
		Done:    func(*Request) { close(done) },
	})
	select {
	case <-done:
	case <-l.stop:
	}
}

// forgetWindows drops the windows drop selects, on the committer (or before it starts):
// their keys are deleted with the next group that carries metadata.
func (l *Log) forgetWindows(drop func(producerKey) bool) int {
	n := 0
	for k := range l.producers {
		if drop(k) {
			l.dropWindow(k)
			n++
		}
	}
	return n
}

func (l *Log) deleteTopic(name string) (map[uint32]bool, error) {
	// retainMu first: no retention or reclaim pass (which copies batches forward and writes
	// their keys) runs while the topic's keys go.
	l.retainMu.Lock()
	defer l.retainMu.Unlock()
	l.topicsMu.Lock()
	defer l.topicsMu.Unlock()
	t, ok := l.topics[name]
	if !ok {
		return nil, ErrUnknownTopic
	}
	ids := map[uint32]bool{}
	for _, p := range t.Partitions {
		ids[p.ID] = true
	}
	if l.db != nil {
		b := l.db.NewBatch()
		defer b.Close()
		for _, p := range t.Partitions {
			_ = b.DeleteRange(dataKey(p.ID, 0), dataKey(p.ID+1, 0), nil)
			for _, kind := range []byte{kindHigh, kindLogStart, kindRelocate, kindCleaned, kindLocal} {
				_ = b.Delete(partKey(nil, kind, p.ID), nil)
			}
			_ = b.DeleteRange(abortedKey(p.ID, 0), abortedKey(p.ID+1, 0), nil)
		}
		err := l.scan([]byte{kindProducer}, func(k, _ []byte) error {
			if len(k) == producerKeyLen && ids[binary.BigEndian.Uint32(k[9:])] {
				_ = b.Delete(k, nil)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		// The topic's record goes in the same synced batch (meta.Store.DeleteTopic).
		if err := l.meta.DeleteTopic(name, b); err != nil {
			return nil, fmt.Errorf("batchlog: delete topic %q: %w", name, err)
		}
		if l.segs != nil {
			for id := range ids {
				l.segs.ForgetRecent(id)
			}
		}
	}
	delete(l.topics, name)
	l.countPartitions(t.Creator, -len(t.Partitions))
	// A long poll parked on the topic answers now (UNKNOWN_TOPIC_OR_PARTITION), not when its
	// wait runs out.
	for _, p := range t.Partitions {
		p.wake()
	}
	return ids, nil
}

// ErrOffsetOutOfRange is returned by DeleteRecords for an offset past the high watermark.
var ErrOffsetOutOfRange = errors.New("offset out of range")

// DeleteRecords advances p's log start offset to offset (-1: the high watermark), as Kafka's
// DeleteRecords does (Log.maybeIncrementLogStartOffset): the log start may fall inside a batch,
// which then stays stored whole; batches wholly below it are deleted. It returns the new log
// start. Synced: the caller is told the records are gone.
func (l *Log) DeleteRecords(p *Partition, offset int64) (int64, error) {
	l.retainMu.Lock()
	defer l.retainMu.Unlock()
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return p.LogStartOffset(), ErrOffsetOutOfRange
	}
	if offset <= p.LogStartOffset() {
		return p.LogStartOffset(), nil
	}
	return offset, l.advanceLogStart(p, offset, pebble.Sync)
}

// advanceLogStart publishes a new log start (readers see it at once: a fetch below it is
// OFFSET_OUT_OF_RANGE), raises the local log start to it if it is below, trims the aborted
// index, and deletes the index entries of the batches wholly below the local start. Callers
// hold retainMu.
//
// No local start key is written: start-up takes the later of the two (loadLogState).
func (l *Log) advanceLogStart(p *Partition, start int64, opts *pebble.WriteOptions) error {
	local := max(p.localStart.Load(), start)
	p.localStart.Store(local) // first: localStart >= logStart at every moment
	p.logStart.Store(start)
	p.trimAborted(start)
	if l.db == nil {
		return nil
	}
	b := l.db.NewBatch()
	defer b.Close()
	_ = b.Set(partKey(nil, kindLogStart, p.ID), binary.BigEndian.AppendUint64(nil, uint64(start)), nil)
	if err := l.deleteIndexBelow(b, p, local); err != nil {
		return err
	}
	_ = b.DeleteRange(abortedKey(p.ID, 0), abortedKey(p.ID, start), nil)
	if err := b.Commit(opts); err != nil {
		return err
	}
	if l.segs != nil {
		l.segs.ForgetRecent(p.ID)
	}
	return nil
}

// ErrLocalStartPastHighWatermark: Pass.AdvanceLocalStart was asked to drop batches not yet
// durable.
var ErrLocalStartPastHighWatermark = errors.New("local log start past the high watermark")

// advanceLocalStart publishes a new local log start (readers of the node's batches see it at
// once: a read that lost its batches below it is OFFSET_OUT_OF_RANGE), records it, and deletes
// the index entries of the batches wholly below it. The log start, and with it the aborted
// index, stay. A start at or below the local start is a no-op; past the high watermark, an
// error. Callers hold retainMu.
func (l *Log) advanceLocalStart(p *Partition, start int64, opts *pebble.WriteOptions) error {
	if start <= p.localStart.Load() {
		return nil
	}
	if hw := p.HighWatermark(); start > hw {
		return fmt.Errorf("batchlog: partition %s/%d: %w (%d past %d)", p.Topic, p.Index, ErrLocalStartPastHighWatermark, start, hw)
	}
	p.localStart.Store(start)
	if l.db == nil {
		return nil
	}
	b := l.db.NewBatch()
	defer b.Close()
	_ = b.Set(partKey(nil, kindLocal, p.ID), binary.BigEndian.AppendUint64(nil, uint64(start)), nil)
	if err := l.deleteIndexBelow(b, p, start); err != nil {
		return err
	}
	if err := b.Commit(opts); err != nil {
		return err
	}
	if l.segs != nil {
		l.segs.ForgetRecent(p.ID)
	}
	return nil
}

// deleteIndexBelow adds to b the deletion of p's index entries of the batches wholly below
// start. The batch containing start is the last one whose base is <= start; everything before
// it is wholly below. At or past the high watermark every batch is.
func (l *Log) deleteIndexBelow(b *pebble.Batch, p *Partition, start int64) error {
	cut := start
	if start < p.HighWatermark() {
		it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(p.ID, 0), UpperBound: dataKey(p.ID, start+1)})
		if err != nil {
			return err
		}
		if it.Last() {
			cut = dataKeyOffset(it.Key())
		} else {
			cut = 0
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	if cut > 0 {
		_ = b.DeleteRange(dataKey(p.ID, 0), dataKey(p.ID, cut), nil)
	}
	return nil
}
