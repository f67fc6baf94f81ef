package wire

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Control batches: the transaction markers a broker writes into a partition when a transaction
// ends (EndTransactionMarker.java, ControlRecordType.java). A control batch has the control and
// transactional attribute bits, the producer's id and epoch, base sequence -1, and one record
// whose key is (version int16 0, type int16: 0 abort, 1 commit) and whose value is (version
// int16 0, coordinator epoch int32). Clients never send one (ValidateProduceBatch refuses
// them); consumers skip them, and read_committed consumers use the abort markers' positions.

// Control record types (ControlRecordType.ABORT, COMMIT).
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ControlBatchSize is the size of a marker batch: the header, and one record of 1 length byte,
// attributes, timestamp delta, offset delta, key length, a 4-byte key, value length, a 6-byte
// value and a header count.
const ControlBatchSize = RecordBatchOverhead + 1 + 1 + 1 + 1 + 1 + 4 + 1 + 6 + 1

// AppendControlBatch appends a marker batch of type kind (ControlAbort or ControlCommit) for
// producerID at epoch, stamped ts (unix ms), with base offset 0 and leader epoch -1 (the
// committer patches both as for any batch).
func AppendControlBatch(dst []byte, producerID int64, epoch int16, kind int16, coordinatorEpoch int32, ts int64) []byte {
	be := binary.BigEndian
	start := len(dst)
	dst = be.AppendUint64(dst, 0)                                     // base offset
	dst = be.AppendUint32(dst, uint32(ControlBatchSize-logOverhead))  // length
	dst = be.AppendUint32(dst, 0xffffffff)                            // partition leader epoch
	dst = append(dst, 2)                                              // magic
	dst = be.AppendUint32(dst, 0)                                     // CRC, below
	dst = be.AppendUint16(dst, uint16(attrControl|attrTransactional)) // attributes
	dst = be.AppendUint32(dst, 0)                                     // last offset delta
	dst = be.AppendUint64(dst, uint64(ts))
	dst = be.AppendUint64(dst, uint64(ts))
	dst = be.AppendUint64(dst, uint64(producerID))
	dst = be.AppendUint16(dst, uint16(epoch))
	dst = be.AppendUint32(dst, 0xffffffff) // base sequence -1
	dst = be.AppendUint32(dst, 1)          // one record
	// The record, its varints written directly: each value fits one zig-zag byte.
	dst = append(dst, 2*(ControlBatchSize-RecordBatchOverhead-1)) // length
	dst = append(dst, 0, 0, 0)                                    // attributes, timestamp delta, offset delta
	dst = append(dst, 2*4)                                        // key length
	dst = be.AppendUint16(dst, 0)                                 // key version
	dst = be.AppendUint16(dst, uint16(kind))
	dst = append(dst, 2*6)        // value length
	dst = be.AppendUint16(dst, 0) // value version
	dst = be.AppendUint32(dst, uint32(coordinatorEpoch))
	dst = append(dst, 0) // no headers
	b := dst[start:]
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return dst
}

var errControlRecord = errors.New("wire: control batch: malformed control record")

// ControlBatchType returns the type of a control batch's marker (ControlAbort or
// ControlCommit), reading the key of its first record. The batch must be a whole, uncompressed
// control batch (as AppendControlBatch writes it, or any broker's).
func ControlBatchType(batch []byte) (int16, error) {
	var kind int16 = -1
	_, err := ForEachRecord(batch, nil, func(r Record) error {
		if kind >= 0 {
			return nil
		}
		if len(r.Key) < 4 {
			return errControlRecord
		}
		kind = int16(binary.BigEndian.Uint16(r.Key[2:]))
		return nil
	})
	if err != nil {
		return -1, err
	}
	if kind != ControlAbort && kind != ControlCommit {
		return -1, errControlRecord
	}
	return kind, nil
}

// AppendRebuiltBatch appends a batch with orig's header (base offset, leader epoch,
// attributes other than compression, last offset delta, first timestamp, producer id, epoch
// and base sequence) holding recs, records of orig as ForEachRecord gave them (their Raw
// bytes are copied), uncompressed. Compaction writes what it keeps this way: the offsets and
// the sequence range of the batch stay what they were, only records go. The max timestamp is
// that of the records kept (LogAppendTime batches keep theirs: it is the append time).
func AppendRebuiltBatch(dst, orig []byte, recs []Record) []byte {
	be := binary.BigEndian
	start := len(dst)
	dst = append(dst, orig[:RecordBatchOverhead]...)
	var maxDelta int64
	for i, r := range recs {
		dst = append(dst, r.Raw...)
		if i == 0 || r.TimestampDelta > maxDelta {
			maxDelta = r.TimestampDelta
		}
	}
	b := dst[start:]
	attrs := be.Uint16(b[offAttributes:])
	if attrs&attrLogAppendTime == 0 && len(recs) > 0 {
		be.PutUint64(b[offMaxTimestamp:], uint64(int64(be.Uint64(b[offFirstTimestamp:]))+maxDelta))
	}
	be.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	be.PutUint16(b[offAttributes:], attrs&^attrCompressionMask)
	be.PutUint32(b[offNumRecords:], uint32(len(recs)))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return dst
}
