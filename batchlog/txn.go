package batchlog

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"inlet/idem"
	"inlet/wire"
)

// Transactions on the log side: what a partition knows of the transactions writing to it
// (Kafka's ProducerStateManager and TransactionIndex). The coordinator's side (who is in a
// transaction, its partitions, its timeout) lives in package txn; this file only
//
//   - opens a transaction on a partition at a producer's first transactional batch there
//     (idem.State.TxnFirstOffset), asking the coordinator first (Options.Txns, a TxnVerifier):
//     a batch for a partition the transaction has not added, or after it began to end, is
//     INVALID_TXN_STATE, as with KIP-890's verification;
//   - appends the markers that end it (control batches, Append.Marker), through the same
//     committer and group as data, and on an abort records the aborted range in the
//     partition's aborted-transaction index, a Pebble key in the marker's group;
//   - publishes each partition's last stable offset (the first offset of its oldest open
//     transaction, or the high watermark) with the high watermark, once the group is durable.
//
// After a crash the windows loaded from the checkpoint plus replay (which reads markers and
// transactional batches as the committer would have) give every open transaction back, and
// the aborted index is whatever Pebble holds plus what replay adds: both exact.
//
//	a <partition u32> <marker offset u64> -> producer id u64, first offset u64, last stable offset u64

// Marker is the kind of control batch an Append carries.
type Marker uint8

const (
	NoMarker Marker = iota
	AbortMarker
	CommitMarker
)

// AbortedTxn is one aborted transaction's range on a partition (FetchResponse's
// AbortedTransactions entry, and TxnIndexEntry's lastOffset: the abort marker's offset).
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
	// LastStable is the partition's last stable offset once the abort was written
	// (TxnIndexEntry's lastStableOffset): every transaction aborted later began at or after
	// it, so a search for those meeting [from, to) stops at the first entry where it is >= to.
	// -1 where unknown.
	LastStable int64
}

// txnState is a partition's share of transaction state.
type txnState struct {
	lso atomic.Int64
	// ongoing maps each producer with an open transaction here to its first offset; owned by
	// the committer (and rebuilt at start-up and after a full disk).
	ongoing map[int64]int64
	// aborted is sorted by LastOffset. Writers (the completer appending, retention
	// trimming) hold abortedMu and publish a new slice header; an append writes past the
	// length every published header has, so readers, who load a header and never look past
	// its length, need no lock.
	abortedMu sync.Mutex
	aborted   atomic.Pointer[[]AbortedTxn]
}

// LastStableOffset is the offset below which every transaction has ended: read_committed
// consumers read up to it. It never exceeds the high watermark.
func (p *Partition) LastStableOffset() int64 {
	lso, hw := p.txn.lso.Load(), p.hw.Load()
	// Never below the log start: retention may pass an open transaction's first offset
	// (UnifiedLog.updateFirstUnstableOffset clamps it the same way).
	return max(min(lso, hw), p.logStart.Load())
}

// AbortedTxns returns the aborted transactions whose range meets [from, to): what a
// read_committed Fetch returning data from from up to to must list.
func (p *Partition) AbortedTxns(from, to int64) []AbortedTxn {
	lp := p.txn.aborted.Load()
	if lp == nil {
		return nil
	}
	all := *lp
	i := sort.Search(len(all), func(i int) bool { return all[i].LastOffset >= from })
	var out []AbortedTxn
	for ; i < len(all); i++ {
		if all[i].FirstOffset < to {
			out = append(out, all[i])
		}
		if all[i].LastStable >= to {
			break
		}
	}
	return out
}

func (p *Partition) addAborted(a AbortedTxn) {
	p.txn.abortedMu.Lock()
	defer p.txn.abortedMu.Unlock()
	var next []AbortedTxn
	if lp := p.txn.aborted.Load(); lp != nil {
		next = *lp
	}
	next = append(next, a) // in place when there is room: past every published length
	p.txn.aborted.Store(&next)
}

// trimAborted drops the entries wholly below the log start (retention, DeleteRecords).
func (p *Partition) trimAborted(start int64) {
	p.txn.abortedMu.Lock()
	defer p.txn.abortedMu.Unlock()
	lp := p.txn.aborted.Load()
	if lp == nil || len(*lp) == 0 || (*lp)[0].LastOffset >= start {
		return
	}
	i := sort.Search(len(*lp), func(i int) bool { return (*lp)[i].LastOffset >= start })
	next := append([]AbortedTxn(nil), (*lp)[i:]...)
	p.txn.aborted.Store(&next)
}

// stableOffset is the committer's view of the last stable offset.
func (p *Partition) stableOffset() int64 {
	lso := p.next
	for _, first := range p.txn.ongoing {
		lso = min(lso, first)
	}
	return lso
}

// TxnVerifier is what the committer asks about every transactional batch (Options.Txns; package
// txn's Coordinator is one): is the transactional id's current producer this one, at this
// epoch, in a transaction that added the partition (the coordinator's record of
// AddPartitionsToTxn)? Verify runs on the committer goroutine: it must be quick and must not
// wait for the committer.
type TxnVerifier interface {
	Verify(transactionalID string, producerID int64, epoch int16, topic string, partition int32) bool
}

// MarkerAppend returns the append of a transaction marker for producerID at epoch on p.
func MarkerAppend(p *Partition, producerID int64, epoch int16, kind Marker, coordinatorEpoch int32, nowMs int64) Append {
	t := wire.ControlAbort
	if kind == CommitMarker {
		t = wire.ControlCommit
	}
	return Append{
		Partition: p, Batch: wire.AppendControlBatch(nil, producerID, epoch, t, coordinatorEpoch, nowMs),
		ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: -1, NumRecords: 1, Marker: kind,
	}
}

const abortedKeyLen = 1 + 4 + 8

func abortedKey(partition uint32, lastOffset int64) []byte {
	return binary.BigEndian.AppendUint64(partKey(make([]byte, 0, abortedKeyLen), kindAborted, partition), uint64(lastOffset))
}

func abortedValue(a AbortedTxn) []byte {
	v := binary.BigEndian.AppendUint64(nil, uint64(a.ProducerID))
	v = binary.BigEndian.AppendUint64(v, uint64(a.FirstOffset))
	return binary.BigEndian.AppendUint64(v, uint64(a.LastStable))
}

// checkTransactional is the committer's check of a data batch against the producer's
// transaction on the partition, after the idempotence check accepted it: a transactional
// batch opening a transaction must be one the coordinator expects; a plain batch from a
// producer inside a transaction is refused (ProducerAppendInfo.checkProducerEpoch's sibling).
//
// Every transactional batch is checked against the coordinator, with the request's
// transactional id, not only the one that opens the transaction: a producer id is no secret
// (DescribeProducers lists them), and a batch under another principal's id must not join its
// transaction. A batch at a new epoch while a transaction is open is refused too: only the
// coordinator's markers move an open transaction's epoch, and a window raised past them would
// refuse the marker that ends it.
func (l *Log) checkTransactional(transactionalID string, a *Append, st *idem.State) int16 {
	if !a.Transactional {
		if st.TxnFirstOffset >= 0 {
			return wire.ErrInvalidTxnState
		}
		return wire.ErrNone
	}
	if st.TxnFirstOffset >= 0 && a.ProducerEpoch != st.Epoch {
		return wire.ErrInvalidProducerEpoch
	}
	v := l.opts.Txns
	if v == nil || !v.Verify(transactionalID, a.ProducerID, a.ProducerEpoch, a.Partition.Topic, a.Partition.Index) {
		return wire.ErrInvalidTxnState
	}
	return wire.ErrNone
}

// openTxn records an appended transactional batch at base.
func openTxn(p *Partition, st *idem.State, producerID, base int64) {
	if st.TxnFirstOffset >= 0 {
		return
	}
	st.TxnFirstOffset = base
	if p.txn.ongoing == nil {
		p.txn.ongoing = map[int64]int64{}
	}
	p.txn.ongoing[producerID] = base
}

// commitMarker appends a transaction marker. A marker for a producer with no open transaction
// on the partition (a retried end, or recovery completing one whose markers were written) is
// answered with base offset -1 and writes nothing.
func (l *Log) commitMarker(g Group, pg *pendingGroup, a *Append) {
	p := a.Partition
	key := producerKey{a.ProducerID, p.ID}
	st := l.producers[key]
	a.LogStartOffset, a.AppendTime, a.BaseOffset = p.logStart.Load(), -1, -1
	if st == nil || st.TxnFirstOffset < 0 {
		return
	}
	first := st.TxnFirstOffset
	if code := st.EndTxn(a.ProducerEpoch); code != wire.ErrNone {
		a.Err = code
		return
	}
	delete(p.txn.ongoing, a.ProducerID)
	st.LastWrite = l.scratch.nowMs
	l.windows.Touch(st, "")
	l.touchProducer(key)
	base := l.assignOffsets(p, a)
	binary.BigEndian.PutUint64(a.Batch[0:8], uint64(base))
	wire.SetPartitionLeaderEpoch(a.Batch, p.LeaderEpoch())
	g.SetData(p.ID, base, a.Batch, false)
	if a.BaseOffset = base; pg.dl != nil && p.diskless {
		pg.dl.Appends = append(pg.dl.Appends, a) // in the bucket before its group is published
	}
	pg.records, pg.bytes = pg.records+1, pg.bytes+len(a.Batch)
	if a.Marker == AbortMarker {
		ab := AbortedTxn{ProducerID: a.ProducerID, FirstOffset: first, LastOffset: base, LastStable: p.stableOffset()}
		g.Set(abortedKey(p.ID, base), abortedValue(ab))
		pg.aborts = append(pg.aborts, abortedAdd{p, ab})
	}
	pg.advance(p)
}

type abortedAdd struct {
	p *Partition
	a AbortedTxn
}

// replayTxn applies a replayed batch's transaction effects to the producer's window: a
// marker closes the transaction (and an abort marker's range goes into b), a transactional
// batch opens one.
func replayTxn(b *pebble.Batch, p *Partition, st *idem.State, h wire.BatchHeader, batch []byte, seg uint32, pos int64) error {
	if !h.IsControl() {
		if h.IsTransactional() && st.TxnFirstOffset < 0 {
			st.TxnFirstOffset = h.BaseOffset
		}
		return nil
	}
	kind, err := wire.ControlBatchType(batch)
	if err != nil {
		return fmt.Errorf("batchlog: segment %d at %d: %w", seg, pos, err)
	}
	first := st.TxnFirstOffset
	st.EndTxn(h.ProducerEpoch)
	if kind == wire.ControlAbort && first >= 0 {
		// The last stable offset after this marker is not known here (other producers'
		// transactions are rebuilt after replay): -1 keeps the search from stopping at it.
		_ = b.Set(abortedKey(p.ID, h.BaseOffset), abortedValue(AbortedTxn{h.ProducerID, first, h.BaseOffset, -1}), nil)
	}
	return nil
}

// loadTxnState rebuilds every partition's open transactions from the producer windows and its
// aborted index from Pebble, and publishes their last stable offsets: at start-up and after a
// full disk, once the windows are exact.
func (l *Log) loadTxnState(byID map[uint32]*Partition) error {
	for _, p := range byID {
		p.txn.ongoing = nil
	}
	// Windows on partitions of deleted topics (stored by a checkpoint after the deletion, or
	// brought back from Pebble by a rebuild before their deletes were written): an open
	// transaction there would never end nor expire. Their keys go with the next metadata group.
	if n := l.forgetWindows(func(k producerKey) bool { return byID[k.partition] == nil }); n > 0 {
		l.log.Info("batchlog: dropped producer windows of deleted partitions", "windows", n)
	}
	for k, st := range l.producers {
		if st.TxnFirstOffset < 0 {
			continue
		}
		if p := byID[k.partition]; p != nil {
			if p.txn.ongoing == nil {
				p.txn.ongoing = map[int64]int64{}
			}
			p.txn.ongoing[k.id] = st.TxnFirstOffset
		}
	}
	aborted := map[*Partition][]AbortedTxn{}
	err := l.scan([]byte{kindAborted}, func(k, v []byte) error {
		if len(k) != abortedKeyLen || len(v) != 24 {
			return fmt.Errorf("batchlog: corrupt aborted-transaction key %x", k)
		}
		p := byID[binary.BigEndian.Uint32(k[1:])]
		if p == nil {
			return nil
		}
		a := AbortedTxn{
			ProducerID:  int64(binary.BigEndian.Uint64(v)),
			FirstOffset: int64(binary.BigEndian.Uint64(v[8:])),
			LastOffset:  int64(binary.BigEndian.Uint64(k[5:])),
			LastStable:  int64(binary.BigEndian.Uint64(v[16:])),
		}
		if a.LastOffset >= p.logStart.Load() {
			aborted[p] = append(aborted[p], a)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range byID {
		list := aborted[p]
		p.txn.abortedMu.Lock()
		p.txn.aborted.Store(&list)
		p.txn.abortedMu.Unlock()
		p.txn.lso.Store(p.stableOffset())
	}
	return nil
}
