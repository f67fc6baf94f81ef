// Package idem holds the idempotent-producer state of one (producer id, partition) pair and the
// rules that decide whether an incoming batch is appended, answered as a duplicate, or refused.
//
// The rules are Kafka's (ProducerStateManager / ProducerAppendInfo / ProducerStateEntry in
// storage/internals/log): the last NumBatchesToRetain batches are remembered per producer and
// partition; an exact duplicate of one of them (same epoch, same first and last sequence) is a
// success carrying the original offsets; a lower epoch is INVALID_PRODUCER_EPOCH; a higher epoch
// must start at sequence 0; any other gap or overlap is OUT_OF_ORDER_SEQUENCE_NUMBER; sequences
// wrap from MaxInt32 to 0.
//
// The package is pure: no I/O, no clocks, no locks. The caller (the batch log's single committer)
// owns every State and serialises all calls on it.
package idem

import (
	"encoding/binary"
	"errors"
	"math"

	"inlet/wire"
)

// NumBatchesToRetain is ProducerStateEntry.NUM_BATCHES_TO_RETAIN: it matches the client's
// max.in.flight.requests.per.connection ceiling of 5 for idempotent producers, so every batch a
// client can still be retrying is remembered.
const NumBatchesToRetain = 5

// NoEpoch marks a State that has never seen a batch (RecordBatch.NO_PRODUCER_EPOCH).
const NoEpoch int16 = -1

// Batch is the part of an appended batch that identifies it for duplicate detection and lets a
// duplicate be answered with the original offsets.
type Batch struct {
	FirstSeq        int32
	LastSeq         int32
	BaseOffset      int64
	LastOffsetDelta int32
}

// Verdict says what the committer must do with a batch.
type Verdict uint8

const (
	// Append: assign offsets, store the batch, then Push it.
	Append Verdict = iota
	// Duplicate: store nothing; answer success with the original batch's BaseOffset.
	Duplicate
	// Reject: store nothing; answer the returned error code.
	Reject
)

// State is one producer's window on one partition. The zero value is not ready: use NewState.
// Batches form a ring of at most NumBatchesToRetain entries, oldest at head.
type State struct {
	Epoch int16
	// LastWrite is when a batch of the producer was last appended here (unix ms; 0: not
	// known, a state written before it was kept): producer.id.expiration.ms counts from it.
	LastWrite int64
	// TxnFirstOffset is the offset of the producer's first batch in its open transaction on
	// the partition, or -1 when it has none (ProducerStateEntry.currentTxnFirstOffset). It
	// holds the partition's last stable offset down and keeps the window from expiring.
	TxnFirstOffset int64

	n       uint8
	head    uint8
	batches [NumBatchesToRetain]Batch
}

// NewState returns the state of a producer that has written nothing to the partition.
func NewState() State { return State{Epoch: NoEpoch, TxnFirstOffset: -1} }

// Len is the number of remembered batches.
func (s *State) Len() int { return int(s.n) }

// At returns the i-th remembered batch, oldest first.
func (s *State) At(i int) Batch { return s.batches[(int(s.head)+i)%NumBatchesToRetain] }

// Last returns the newest remembered batch; ok is false when there is none.
func (s *State) Last() (b Batch, ok bool) {
	if s.n == 0 {
		return Batch{}, false
	}
	return s.At(int(s.n) - 1), true
}

// LastSeq is DefaultRecordBatch.incrementSequence(firstSeq, count-1): the sequence of the last
// record of a batch of count records, wrapping past MaxInt32 to 0.
func LastSeq(firstSeq, count int32) int32 {
	inc := count - 1
	if firstSeq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - firstSeq) - 1
	}
	return firstSeq + inc
}

// nextSeq is the sequence that follows seq (ProducerStateEntry's inSequence check).
func nextSeq(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// Check decides the fate of a batch of count records starting at firstSeq from a producer at
// epoch. It does not change s; call Push after appending.
//
// Order follows UnifiedLog.analyzeAndValidateProducerState: the epoch first (a fenced producer
// never learns about duplicates), then the duplicate lookup within the same epoch, then the
// sequence check.
func (s *State) Check(epoch int16, firstSeq, count int32) (Verdict, Batch, int16) {
	if s.Epoch != NoEpoch && epoch < s.Epoch {
		return Reject, Batch{}, wire.ErrInvalidProducerEpoch
	}
	lastSeq := LastSeq(firstSeq, count)
	if epoch == s.Epoch {
		for i := 0; i < int(s.n); i++ {
			if b := s.At(i); b.FirstSeq == firstSeq && b.LastSeq == lastSeq {
				return Duplicate, b, wire.ErrNone
			}
		}
	}
	switch {
	case epoch != s.Epoch:
		// A new epoch (or a producer this partition has never seen with any epoch) restarts the
		// sequence. ProducerAppendInfo.checkSequence accepts any first sequence when there is
		// no earlier epoch at all, because the state may have been expired; keep that leniency.
		if firstSeq != 0 && s.Epoch != NoEpoch {
			return Reject, Batch{}, wire.ErrOutOfOrderSequenceNumber
		}
		return Append, Batch{}, wire.ErrNone
	case s.n == 0:
		// Same epoch but nothing remembered: only reachable for a restored state that held no
		// batches; accept as Kafka does for an empty entry.
		return Append, Batch{}, wire.ErrNone
	}
	last, _ := s.Last()
	if firstSeq == nextSeq(last.LastSeq) {
		return Append, Batch{}, wire.ErrNone
	}
	if s.olderThanWindow(firstSeq, lastSeq) {
		// A retry of a batch that has already left the window: it was appended (the client
		// only sends in order), but its offsets are forgotten. DUPLICATE_SEQUENCE_NUMBER tells
		// the client so without claiming data loss; kgo and the Java producer treat it as
		// success. OUT_OF_ORDER_SEQUENCE_NUMBER here would make kgo fail the partition.
		return Reject, Batch{}, wire.ErrDuplicateSequenceNumber
	}
	return Reject, Batch{}, wire.ErrOutOfOrderSequenceNumber
}

// olderThanWindow reports whether [firstSeq, lastSeq] lies wholly before the oldest remembered
// batch, comparing on the 31-bit sequence circle: "before" means within 2^30 behind it.
func (s *State) olderThanWindow(firstSeq, lastSeq int32) bool {
	oldest := s.At(0).FirstSeq
	behind := func(seq int32) bool {
		d := (int64(oldest) - int64(seq) + (1 << 31)) % (1 << 31)
		return d > 0 && d <= 1<<30
	}
	return behind(firstSeq) && behind(lastSeq)
}

// Push records an appended batch. A new epoch clears the window (ProducerStateEntry.update).
func (s *State) Push(epoch int16, firstSeq, count int32, baseOffset int64) {
	if epoch != s.Epoch {
		s.Epoch = epoch
		s.n, s.head = 0, 0
	}
	b := Batch{FirstSeq: firstSeq, LastSeq: LastSeq(firstSeq, count), BaseOffset: baseOffset, LastOffsetDelta: count - 1}
	if s.n < NumBatchesToRetain {
		s.batches[(int(s.head)+int(s.n))%NumBatchesToRetain] = b
		s.n++
		return
	}
	s.batches[s.head] = b
	s.head = (s.head + 1) % NumBatchesToRetain
}

// EndTxn records a transaction marker from the producer at epoch: the open transaction ends,
// and a higher epoch (a marker written after the coordinator bumped it, fencing the old
// producer) replaces the window's epoch and clears its batches, so the fenced epoch's
// batches are refused from here on (ProducerAppendInfo.appendEndTxnMarker). A marker from a
// lower epoch is INVALID_PRODUCER_EPOCH and changes nothing.
func (s *State) EndTxn(epoch int16) int16 {
	if s.Epoch != NoEpoch && epoch < s.Epoch {
		return wire.ErrInvalidProducerEpoch
	}
	if epoch != s.Epoch {
		s.Epoch = epoch
		s.n, s.head = 0, 0
	}
	s.TxnFirstOffset = -1
	return wire.ErrNone
}

// encodedVersion prefixes the durable encoding so it can grow. Version 3 added TxnFirstOffset,
// version 2 LastWrite; older encodings still decode (LastWrite 0, no open transaction).
const (
	encodedVersion   = 3
	encodedVersionV2 = 2
	encodedVersionV1 = 1
)

// AppendBinary appends the durable encoding of s: version, epoch, count, last write, the open
// transaction's first offset, then each batch oldest first as firstSeq, lastSeq, baseOffset,
// lastOffsetDelta, all big-endian.
func (s *State) AppendBinary(dst []byte) []byte {
	dst = append(dst, encodedVersion)
	dst = binary.BigEndian.AppendUint16(dst, uint16(s.Epoch))
	dst = append(dst, s.n)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.LastWrite))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.TxnFirstOffset))
	for i := 0; i < int(s.n); i++ {
		b := s.At(i)
		dst = binary.BigEndian.AppendUint32(dst, uint32(b.FirstSeq))
		dst = binary.BigEndian.AppendUint32(dst, uint32(b.LastSeq))
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.BaseOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(b.LastOffsetDelta))
	}
	return dst
}

const encodedBatchLen = 20

// ErrCorrupt is returned by UnmarshalBinary for bytes AppendBinary did not write.
var ErrCorrupt = errors.New("idem: corrupt producer state encoding")

// UnmarshalBinary restores a state written by AppendBinary.
func (s *State) UnmarshalBinary(b []byte) error {
	if len(b) < 4 || b[0] < encodedVersionV1 || b[0] > encodedVersion {
		return ErrCorrupt
	}
	head := 4
	switch b[0] {
	case encodedVersion:
		head += 16
	case encodedVersionV2:
		head += 8
	}
	n := int(b[3])
	if n > NumBatchesToRetain || len(b) != head+n*encodedBatchLen {
		return ErrCorrupt
	}
	*s = State{Epoch: int16(binary.BigEndian.Uint16(b[1:])), n: uint8(n), TxnFirstOffset: -1}
	if b[0] >= encodedVersionV2 {
		s.LastWrite = int64(binary.BigEndian.Uint64(b[4:]))
	}
	if b[0] == encodedVersion {
		s.TxnFirstOffset = int64(binary.BigEndian.Uint64(b[12:]))
	}
	p := b[head:]
	for i := 0; i < n; i++ {
		s.batches[i] = Batch{
			FirstSeq:        int32(binary.BigEndian.Uint32(p)),
			LastSeq:         int32(binary.BigEndian.Uint32(p[4:])),
			BaseOffset:      int64(binary.BigEndian.Uint64(p[8:])),
			LastOffsetDelta: int32(binary.BigEndian.Uint32(p[16:])),
		}
		p = p[encodedBatchLen:]
	}
	return nil
}
