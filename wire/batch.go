package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record batch (magic 2) layout, from DefaultRecordBatch.java:
//
//	 0 BaseOffset           int64
//	 8 Length               int32  bytes after this field: batch size - 12
//	12 PartitionLeaderEpoch int32
//	16 Magic                int8
//	17 CRC                  uint32 CRC-32C of bytes 21..end
//	21 Attributes           int16
//	23 LastOffsetDelta      int32
//	27 BaseTimestamp        int64
//	35 MaxTimestamp         int64
//	43 ProducerId           int64
//	51 ProducerEpoch        int16
//	53 BaseSequence         int32
//	57 RecordsCount         int32
//	61 Records
//
// BaseOffset and PartitionLeaderEpoch lie before the CRC'd range so that the
// broker can assign them without recomputing the checksum.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// RecordBatchOverhead is the size of a magic 2 batch header, and the
	// size of a batch with no records (RECORD_BATCH_OVERHEAD).
	RecordBatchOverhead = 61

	// logOverhead is the BaseOffset and Length prefix common to every
	// magic (Records.LOG_OVERHEAD): Length counts the bytes after it.
	logOverhead = 12

	// headerSizeUpToMagic is what ByteBufferLogInputStream needs before
	// it can tell a batch's magic (Records.HEADER_SIZE_UP_TO_MAGIC).
	headerSizeUpToMagic = 17

	// legacyRecordOverheadV0 is the smallest Length any magic allows
	// (LegacyRecord.RECORD_OVERHEAD_V0); Kafka calls a smaller one corrupt
	// before even looking at the magic.
	legacyRecordOverheadV0 = 14
)

// Attribute bits (DefaultRecordBatch: COMPRESSION_CODEC_MASK,
// TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK, CONTROL_FLAG_MASK).
const (
	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

// Compression codecs (CompressionType ids).
const (
	CompressionNone   = 0
	CompressionGzip   = 1
	CompressionSnappy = 2
	CompressionLZ4    = 3
	CompressionZstd   = 4
)

// castagnoli is the CRC-32C table. crc32.MakeTable returns the package's
// shared table for Castagnoli, which crc32.Update recognises and computes
// with the SSE4.2/ARMv8 instruction.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the 61-byte header of a magic 2 record batch.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Compression returns the compression codec, attributes & 7 (see the
// Compression constants; 5..7 are not codecs).
func (h *BatchHeader) Compression() uint8 { return uint8(h.Attributes & attrCompressionMask) }

// TimestampType returns 0 for CreateTime, 1 for LogAppendTime (bit 3).
func (h *BatchHeader) TimestampType() int { return int(h.Attributes>>3) & 1 }

// IsTransactional reports bit 4.
func (h *BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports bit 5: a control batch (transaction marker).
func (h *BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

var errShortBatch = errors.New("wire: record batch shorter than its 61-byte header")

// ParseBatchHeader reads the first 61 bytes of b; it errors if b is shorter.
// It checks nothing else: ValidateProduceBatch does that.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < RecordBatchOverhead {
		return BatchHeader{}, errShortBatch
	}
	return parseBatchHeader(b[:RecordBatchOverhead]), nil
}

func parseBatchHeader(b []byte) BatchHeader {
	be := binary.BigEndian
	_ = b[RecordBatchOverhead-1]
	return BatchHeader{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(be.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[offNumRecords:])),
	}
}

// ValidateProduceBatch checks a partition's records field from a Produce
// request of version >= 3, in the order Kafka checks it, and returns the
// parsed header, an error code (ErrNone when valid) and a short message for
// the response's ErrorMessage. It allocates nothing on success; failures
// format their message.
//
// Kafka's checks come from three places, and each failure below answers
// with the code that Errors.forException gives the exception Kafka throws:
//
//  1. ProduceRequest.validateRecords, through the batch iterator of
//     ByteBufferLogInputStream.nextBatch: a Length under 14 or a magic
//     outside 0..2 is a CorruptRecordException; no complete batch, a magic
//     other than 2, or more than one batch is an InvalidRecordException.
//     Kafka tolerates a trailing partial batch here and silently trims it
//     later (UnifiedLog.trimInvalidBytes); Inlet requires the field to be
//     exactly one batch, 12+Length == len(records), because it stores the
//     bytes as they are.
//  2. UnifiedLog.analyzeAndValidateRecords: BaseOffset must be 0 (clients
//     leave offset assignment to the broker), the batch size must not exceed
//     max.message.bytes (RecordTooLargeException), and the batch must be at
//     least 61 bytes with a matching CRC-32C (DefaultRecordBatch.isValid,
//     CorruptRecordException). Decoding the codec id comes right after.
//  3. LogValidator.validateBatch: the offset range implied by
//     LastOffsetDelta must match a positive record count, clients may not
//     write control batches, and a batch with a producer id needs a
//     sequence.
//
// The one ProduceRequest.validateRecords check that needs the request
// version is left to the caller: a zstd batch (Compression() == 4) in a
// Produce request below v7 is UNSUPPORTED_COMPRESSION_TYPE (KIP-110).
//
// Records themselves are not looked at; see ForEachRecord.
func ValidateProduceBatch(records []byte, maxMessageBytes int) (BatchHeader, int16, string) {
	var h BatchHeader
	be := binary.BigEndian

	// 1. ProduceRequest.validateRecords / ByteBufferLogInputStream.
	if len(records) < logOverhead {
		return h, ErrInvalidRecord, "produce requests with version >= 3 must have at least one record batch per partition"
	}
	h.BaseOffset = int64(be.Uint64(records[offBaseOffset:]))
	h.BatchLength = int32(be.Uint32(records[offLength:]))
	if h.BatchLength < legacyRecordOverheadV0 {
		return h, ErrCorruptMessage, fmt.Sprintf("record size %d is less than the minimum record overhead (%d)", h.BatchLength, legacyRecordOverheadV0)
	}
	if len(records) < headerSizeUpToMagic {
		return h, ErrInvalidRecord, "produce requests with version >= 3 must have at least one record batch per partition"
	}
	h.Magic = int8(records[offMagic])
	if h.Magic < 0 || h.Magic > 2 {
		return h, ErrCorruptMessage, fmt.Sprintf("invalid magic found in record: %d", h.Magic)
	}
	size := logOverhead + int64(h.BatchLength)
	if int64(len(records)) < size {
		return h, ErrInvalidRecord, "produce requests with version >= 3 must have at least one record batch per partition"
	}
	if h.Magic != 2 {
		return h, ErrInvalidRecord, "produce requests with version >= 3 are only allowed to contain record batches with magic version 2"
	}
	if int64(len(records)) > size {
		return h, ErrInvalidRecord, "produce requests with version >= 3 are only allowed to contain exactly one record batch per partition"
	}

	// 2. UnifiedLog.analyzeAndValidateRecords.
	if h.BaseOffset != 0 {
		return h, ErrInvalidRecord, fmt.Sprintf("the baseOffset of the record batch should be 0, but it is %d", h.BaseOffset)
	}
	if len(records) > maxMessageBytes {
		return h, ErrMessageTooLarge, fmt.Sprintf("the record batch size is %d bytes which exceeds the maximum configured value of %d", len(records), maxMessageBytes)
	}
	if len(records) < RecordBatchOverhead {
		return h, ErrCorruptMessage, fmt.Sprintf("record batch of %d bytes is shorter than the %d-byte header", len(records), RecordBatchOverhead)
	}
	h = parseBatchHeader(records[:RecordBatchOverhead])
	if crc := crc32.Checksum(records[offAttributes:], castagnoli); crc != h.CRC {
		return h, ErrCorruptMessage, fmt.Sprintf("record is corrupt (stored crc = %d, computed crc = %d)", h.CRC, crc)
	}
	if c := h.Compression(); c > CompressionZstd {
		return h, ErrUnsupportedCompressionType, fmt.Sprintf("unknown compression type id: %d", c)
	}

	// 3. LogValidator.validateBatch; BaseOffset is 0 here, so the offset
	// range [0, LastOffsetDelta] holds LastOffsetDelta+1 offsets.
	countFromOffsets := int64(h.LastOffsetDelta) + 1
	if countFromOffsets <= 0 {
		return h, ErrInvalidRecord, fmt.Sprintf("batch has an invalid offset range: [0, %d]", h.LastOffsetDelta)
	}
	if h.NumRecords <= 0 {
		return h, ErrInvalidRecord, fmt.Sprintf("invalid reported count for record batch: %d", h.NumRecords)
	}
	if countFromOffsets != int64(h.NumRecords) {
		return h, ErrInvalidRecord, fmt.Sprintf("inconsistent batch offset range [0, %d] and count of records %d", h.LastOffsetDelta, h.NumRecords)
	}
	if h.IsControl() {
		return h, ErrInvalidRecord, "clients are not allowed to write control records"
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return h, ErrInvalidRecord, fmt.Sprintf("invalid sequence number %d in record batch with producerId %d", h.BaseSequence, h.ProducerID)
	}
	return h, ErrNone, ""
}

// SetBaseOffset writes baseOffset into bytes 0..7 of batch in place. The
// field lies outside the CRC, so the checksum stays valid. batch must hold at
// least 8 bytes (a batch that passed ValidateProduceBatch does).
func SetBaseOffset(batch []byte, baseOffset int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(baseOffset))
}

// SetPartitionLeaderEpoch writes the leader epoch into bytes 12..15 of batch in place, as
// Kafka's broker does for every batch it appends (MemoryRecordsBuilder, LogValidator). The
// field lies outside the CRC, so the checksum stays valid. batch must hold at least 16 bytes
// (a batch that passed ValidateProduceBatch does).
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime stamps a batch for a topic with
// message.timestamp.type=LogAppendTime, as DefaultRecordBatch.setMaxTimestamp
// does: it sets the timestamp-type attribute (bit 3), writes ts as
// MaxTimestamp and recomputes the CRC over bytes 21..len(batch). Consumers
// then read ts as every record's timestamp; FirstTimestamp and the records
// stay as the producer wrote them. Like Java it skips the CRC when nothing
// changes. batch must be exactly one whole batch, as ValidateProduceBatch
// guarantees; a shorter slice is a caller bug and panics.
func SetLogAppendTime(batch []byte, ts int64) {
	if len(batch) < RecordBatchOverhead {
		panic(fmt.Sprintf("wire: BUG: SetLogAppendTime on %d bytes, shorter than a batch header", len(batch)))
	}
	be := binary.BigEndian
	attrs := be.Uint16(batch[offAttributes:])
	if attrs&attrLogAppendTime != 0 && int64(be.Uint64(batch[offMaxTimestamp:])) == ts {
		return
	}
	be.PutUint16(batch[offAttributes:], attrs|attrLogAppendTime)
	be.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
}

// errBatchTruncated: a stored batch's Length runs past the bytes read.
var errBatchTruncated = errors.New("wire: stored batch truncated")

// NextBatch splits the first batch off b, stored batches back to back as a read of the log
// returns them (each sized by its Length field). batch is nil when b holds no further batch
// header; err is set when the first batch runs past the end of b.
func NextBatch(b []byte) (batch, rest []byte, err error) {
	if len(b) < RecordBatchOverhead {
		return nil, nil, nil
	}
	n := logOverhead + int(binary.BigEndian.Uint32(b[offLength:]))
	if n > len(b) {
		return nil, nil, errBatchTruncated
	}
	return b[:n], b[n:], nil
}

// BatchLastOffset returns the offset of the last record of a stored batch: its base offset
// plus its last offset delta. batch must hold a whole batch header; a shorter slice panics.
func BatchLastOffset(batch []byte) int64 {
	_ = batch[RecordBatchOverhead-1]
	be := binary.BigEndian
	return int64(be.Uint64(batch[offBaseOffset:])) + int64(int32(be.Uint32(batch[offLastOffsetDelta:])))
}

// BatchMaxTimestamp returns a batch's max timestamp (its LogAppendTime when the batch
// carries one). batch must hold a whole batch header; a shorter slice panics.
func BatchMaxTimestamp(batch []byte) int64 {
	_ = batch[RecordBatchOverhead-1]
	return int64(binary.BigEndian.Uint64(batch[offMaxTimestamp:]))
}

// BatchCRCValid reports whether a whole batch's CRC-32C (over bytes 21 to its end) matches the
// one it carries. batch must hold a whole batch header.
func BatchCRCValid(batch []byte) bool {
	_ = batch[RecordBatchOverhead-1]
	return crc32.Checksum(batch[offAttributes:], castagnoli) == binary.BigEndian.Uint32(batch[offCRC:])
}
