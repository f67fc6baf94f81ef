package diskless

import (
	"bytes"
	"errors"
	"sync/atomic"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/txn"
)

// Transactions in the commit log. On a node with the committer running, the transaction
// coordinator's store (txn.Store) is the catalog wrapped as GroupStore wraps it for offsets:
// every change of a transactional id's record (InitProducerId's producer id and epoch,
// AddPartitionsToTxn's partitions, AddOffsetsToTxn's group, TxnOffsetCommit's pending
// offsets, EndTxn's PrepareCommit/PrepareAbort and the Complete* after the markers, an
// expired id's removal) goes into the next commit object as a StateTxn entry, and the
// coordinator writes the catalog, and answers, only once that object is in the bucket
// (putState). The record is the coordinator's own, whole: the last entry of an id is its state.
//
// The markers that end a transaction go through the log like its batches: on a diskless
// partition they are held for the bucket (batchlog's DisklessGroup) and their request is
// answered after the PUT, so EndTxn, which waits for its markers, is answered once they are
// in the bucket. In the log's order, each id's entries and its batches and markers land in
// the order the coordinator and the log made them: the Ongoing record that added a partition
// before any transactional batch to it, its markers before the Complete* record.
//
// A start replays the transactional batches and markers the local log lacks with the rest
// (recover.go), through the committer, which rebuilds each partition's open transactions,
// aborted index and last stable offset as it builds them for a produce; the coordinator's
// check of each transactional batch (TxnVerifier) is skipped for them, as they were checked
// when first written. Then the last record of each id goes to the catalog, before the
// coordinator loads it (txn.Coordinator.Load): an Ongoing transaction the catalog does not
// hold open itself (a node restored on an empty disk) is made PrepareAbort at a bumped epoch
// (txn.Restored), and the coordinator's start aborts it as it completes a prepared one: a
// transaction open at the loss is aborted, one whose EndTxn was answered (PrepareCommit or
// later in the bucket) is committed. A node restarted on its own disk keeps its Ongoing
// transactions, as without a bucket (with the bucket's last record of each, which may be
// ahead of the catalog by a change answered an error that landed after all).

// StateTxn payload: op u8 (opTxnSave, opTxnDelete), transactional id u16 length + bytes,
// then for opTxnSave the record as the coordinator stores it (the rest of the payload).
const (
	opTxnSave   = 1
	opTxnDelete = 2
)

func encodeTxnOp(op byte, id string, v []byte) []byte {
	b := appendString16([]byte{op}, id)
	return append(b, v...)
}

var errBadTxnOp = errors.New("diskless: not a transaction state entry")

func decodeTxnOp(b []byte) (op byte, id string, v []byte, err error) {
	r := stateReader{b: b, ok: true}
	op = r.u8()
	id = r.str16()
	if !r.ok || op < opTxnSave || op > opTxnDelete || op == opTxnDelete && len(r.b) != 0 {
		return 0, "", nil, errBadTxnOp
	}
	if op == opTxnSave {
		v = r.b
	}
	return op, id, v, nil
}

// TxnStore is the transaction coordinator's store (txn.Store) on a node with the committer:
// the catalog, with every record change PUT in a commit object before the catalog is written
// and the change answered.
type TxnStore struct {
	*meta.Store
	c *Committer
}

// TxnStore wraps the catalog m as the transaction coordinator's store.
func (c *Committer) TxnStore(m *meta.Store) *TxnStore { return &TxnStore{Store: m, c: c} }

// SaveTxn: every change of a transactional id's record.
func (s *TxnStore) SaveTxn(id string, v []byte) error {
	if !fits16(id) {
		return meta.ErrNameTooLong
	}
	if err := s.c.putState(StateTxn, encodeTxnOp(opTxnSave, id, v)); err != nil {
		return err
	}
	return s.Store.SaveTxn(id, v)
}

// DeleteTxn: an expired transactional id (transactional.id.expiration.ms).
func (s *TxnStore) DeleteTxn(id string) error {
	if !fits16(id) {
		return meta.ErrNameTooLong
	}
	if err := s.c.putState(StateTxn, encodeTxnOp(opTxnDelete, id, nil)); err != nil {
		return err
	}
	return s.Store.DeleteTxn(id)
}

// txnFold is the last word of the log on each transactional id: its record, or nil once
// deleted, with when the deletion was folded (dropCarried).
type txnFold map[string]foldedTxn

type foldedTxn struct {
	record []byte // nil: deleted
	goneAt uint64
}

// add folds a record change in, folded as entry number at of the fold.
func (f txnFold) add(payload []byte, at uint64) error {
	op, id, v, err := decodeTxnOp(payload)
	if err != nil {
		return err
	}
	if op == opTxnDelete {
		f[id] = foldedTxn{goneAt: at}
	} else {
		f[id] = foldedTxn{record: bytes.Clone(v)} // the object's buffer is dropped after its replay
	}
	return nil
}

// dropCarried lets go of the deletions folded at or before entry through, as groupsFold's.
func (f txnFold) dropCarried(through uint64) {
	for id, v := range f {
		if v.record == nil && v.goneAt <= through {
			delete(f, id)
		}
	}
}

// apply writes the fold to the catalog: an id deleted goes, a record the catalog does not
// hold as it is goes in as txn.Restored keeps it (an Ongoing transaction not open on the node
// to be aborted). It
// returns how many records it wrote and the highest producer id the records name (none of
// which may be handed out again).
func (f txnFold) apply(m *meta.Store) (written int, maxPID int64, err error) {
	maxPID = -1
	if len(f) == 0 {
		return 0, maxPID, nil
	}
	stored, err := m.LoadTxns()
	if err != nil {
		return 0, maxPID, err
	}
	for id, ft := range f {
		v := ft.record
		if v == nil {
			if _, ok := stored[id]; ok {
				if err := m.DeleteTxn(id); err != nil {
					return written, maxPID, err
				}
			}
			continue
		}
		out, pid, err := txn.Restored(v, stored[id])
		if err != nil {
			// Not a record the coordinator reads: written as it is, and the coordinator
			// skips it as it skips any stored record that does not decode.
			out, pid = v, -1
		}
		maxPID = max(maxPID, pid)
		if bytes.Equal(stored[id], out) {
			continue // the node's own disk holds it
		}
		if err := m.SaveTxn(id, out); err != nil {
			return written, maxPID, err
		}
		written++
	}
	return written, maxPID, nil
}

// TxnVerifier wraps the transaction coordinator's check of transactional batches for the log
// (batchlog.Options.Txns): while Recover replays the commit log, the transactional batches the
// log is handed are those the bucket holds, checked when they were first written, and the
// coordinator has not loaded its records yet; they are taken. Otherwise v answers.
func (c *Committer) TxnVerifier(v batchlog.TxnVerifier) batchlog.TxnVerifier {
	return &replayVerifier{v: v, replaying: &c.replaying}
}

type replayVerifier struct {
	v         batchlog.TxnVerifier
	replaying *atomic.Bool
}

func (r *replayVerifier) Verify(id string, producerID int64, epoch int16, topic string, partition int32) bool {
	if r.replaying.Load() {
		return true
	}
	return r.v != nil && r.v.Verify(id, producerID, epoch, topic, partition)
}
