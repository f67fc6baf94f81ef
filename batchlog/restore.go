package batchlog

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"inlet/idem"
)

// RestoredStart is where a partition of a topic rebuilt from the remote tier begins: its log
// start (the first uploaded batch) and its next offset (after the last uploaded batch), with
// nothing stored locally. The zero value is an empty partition.
type RestoredStart struct{ LogStart, Next int64 }

// RestoreTopic creates topic name with the given id (the zero id: a new one) and configs, its
// partitions starting as starts says (package tier's Restore): the high watermark and the next
// offset at Next, the log start at LogStart, the local log start at Next. The topic record and
// the partitions' keys are synced before it returns. Only before the node serves: nothing may
// append to the log meanwhile.
func (l *Log) RestoreTopic(name string, id [16]byte, configs map[string]string, starts []RestoredStart) (*Topic, error) {
	if len(starts) == 0 {
		return nil, fmt.Errorf("batchlog: topic %q needs at least one partition", name)
	}
	for i, s := range starts {
		if s.LogStart < 0 || s.Next < s.LogStart {
			return nil, fmt.Errorf("batchlog: restore topic %q partition %d: start %d, next %d", name, i, s.LogStart, s.Next)
		}
	}
	l.topicsMu.Lock()
	defer l.topicsMu.Unlock()
	if t, ok := l.topics[name]; ok {
		return t, ErrTopicExists
	}
	t := &Topic{Name: name, ID: id, Configs: configs, Settings: l.parse(configs)}
	if t.ID == ([16]byte{}) {
		_, _ = rand.Read(t.ID[:])
	}
	seq := l.partSeq
	b := l.db.NewBatch()
	defer b.Close()
	for i, s := range starts {
		p := &Partition{ID: seq, Topic: name, Index: int32(i), diskless: t.Settings.Diskless}
		// The partition is not published yet: nothing else reads these.
		p.next, t.Partitions = s.Next, append(t.Partitions, p)
		p.hw.Store(s.Next)
		p.logStart.Store(s.LogStart)
		p.localStart.Store(s.Next)
		v := binary.BigEndian.AppendUint64(nil, uint64(s.Next))
		_ = b.Set(partKey(nil, kindHigh, p.ID), binary.BigEndian.AppendUint64(v, uint64(s.LogStart)), nil)
		_ = b.Set(partKey(nil, kindLocal, p.ID), binary.BigEndian.AppendUint64(nil, uint64(s.Next)), nil)
		seq++
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("batchlog: restore topic %q: %w", name, err)
	}
	if err := l.meta.SaveTopic(t.record(), seq); err != nil {
		return nil, fmt.Errorf("batchlog: restore topic %q: %w", name, err)
	}
	l.partSeq = seq
	l.topics[name] = t
	l.countPartitions(t.Creator, len(t.Partitions))
	return t, nil
}

// RestoreProducers gives p, a partition rebuilt from the bucket (package diskless's Recover),
// the producer state its batches do not carry: its windows (by producer id) and aborted
// transactions (by marker offset) replace p's, and its open transactions and last stable
// offset follow from the windows. A next above p's next offset restarts p, which must hold
// no batch, empty there (its log start too). Synced before it returns; only before the node
// serves, with nothing appending to p.
func (l *Log) RestoreProducers(p *Partition, next int64, windows map[int64]idem.State, aborted []AbortedTxn) error {
	var err error
	done := make(chan struct{})
	l.Submit(&Request{Inspect: func() {
		if s := &l.scratch; next > p.next {
			if p.next != p.localStart.Load() {
				err = fmt.Errorf("batchlog: restart %s/%d at %d: it holds batches up to %d", p.Topic, p.Index, next, p.next)
				return
			}
			p.next, p.metaGen, s.partitions = next, s.gen, append(s.partitions, p)
			p.hw.Store(next)
			p.localStart.Store(next) // first: localStart >= logStart at every moment
			p.logStart.Store(next)
		}
		l.forgetWindows(func(k producerKey) bool { return k.partition == p.ID })
		p.txn.ongoing = nil
		for id, st := range windows {
			l.newWindow(producerKey{id, p.ID}, "").State = st
			l.touchProducer(producerKey{id, p.ID})
			if st.TxnFirstOffset >= 0 { // openTxn, from a state that had none
				openTxn(p, &idem.State{TxnFirstOffset: -1}, id, st.TxnFirstOffset)
			}
		}
		l.scratch.forceMeta = true
		p.txn.lso.Store(p.stableOffset())
	}, Done: func(*Request) { close(done) }})
	if <-done; err != nil || l.db == nil {
		return err
	}
	p.txn.abortedMu.Lock()
	list := slices.Clone(aborted)
	p.txn.aborted.Store(&list)
	p.txn.abortedMu.Unlock()
	b := l.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange(abortedKey(p.ID, 0), abortedKey(p.ID, math.MaxInt64), nil)
	for _, a := range list {
		_ = b.Set(abortedKey(p.ID, a.LastOffset), abortedValue(a), nil)
	}
	return b.Commit(pebble.Sync)
}
