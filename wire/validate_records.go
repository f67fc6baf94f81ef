package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ValidateRecords walks the records of a batch that ValidateProduceBatch accepted and checks
// that they are what its header says, as Kafka's broker does by iterating every batch it
// appends (LogValidator.validateMessagesAndAssignOffsets, through DefaultRecordBatch's record
// iterator and DefaultRecord.readFrom). Without it a CRC-valid header claiming two billion
// records over one record would move the high watermark by two billion.
//
//   - Exactly NumRecords records, then nothing: fewer is "premature EOF", more is "records
//     still remaining" (DefaultRecordBatch.RecordIterator), both INVALID_RECORD.
//   - Each record's length varint covers exactly its fields: attributes, timestamp delta
//     (varlong), offset delta, key, value and headers (DefaultRecord.readFrom; a negative
//     header count or header key length is invalid, a negative key or value length is null),
//     INVALID_RECORD.
//   - Record i carries offset delta i. Kafka does not reject other deltas: it rewrites a
//     compressed batch whose inner offsets are not consecutive (LogValidator's
//     inPlaceAssignment) and ignores them in an uncompressed one. Inlet stores the producer's
//     bytes as they are, so a consumer would read the record at baseOffset+delta, outside the
//     offsets the batch was given: INVALID_RECORD instead (every client writes 0, 1, 2, ...).
//   - A compressed batch is checked as it inflates (inflate.go): gzip, lz4 and zstd through
//     a window of 64 KiB, keys and values skipped, so its decompressed records are never held
//     whole; snappy, which has no stream decoder, is decoded whole within the decompression
//     budget. A payload that does not decompress is CORRUPT_MESSAGE, one past the bounds
//     (decompressLimit) MESSAGE_TOO_LARGE at the byte past them (RecordsErrorCode).
//
// It returns scratch, the window of a streamed batch or the buffer of a snappy one (an
// uncompressed batch leaves it alone; it grows to 64 KiB, or to a snappy batch's decoded
// size), the error code and a message for the response. It allocates nothing on success once
// scratch is large enough (and the pooled decoders warm); failures format their message.
func ValidateRecords(batch []byte, h *BatchHeader, scratch []byte) ([]byte, int16, string) {
	return checkRecords(batch, h, scratch, nil)
}

// KeylessRecords validates a batch as ValidateRecords does and calls keyless with the index of
// each record whose key is null (Kafka's compacted topics refuse them), streaming a compressed
// batch the same way. keyless(-1) means start over: the batch is being read again (a zstd
// frame needed a larger decoder), and the indexes told so far do not count.
func KeylessRecords(batch []byte, h *BatchHeader, scratch []byte, keyless func(int32)) ([]byte, int16, string) {
	return checkRecords(batch, h, scratch, keyless)
}

func checkRecords(batch []byte, h *BatchHeader, scratch []byte, keyless func(int32)) ([]byte, int16, string) {
	end := logOverhead + int64(h.BatchLength)
	if end < RecordBatchOverhead || end > int64(len(batch)) || h.NumRecords < 0 {
		// ValidateProduceBatch rules these out; checked so that a caller that skipped it
		// gets an answer rather than a panic.
		return scratch, ErrCorruptMessage, "record batch length or count disagrees with the buffer"
	}
	data := batch[RecordBatchOverhead:end]
	n := h.NumRecords
	var (
		i, delta int32
		p        int
		err      error
	)
	switch c := h.Compression(); c {
	case CompressionNone:
		i, p, delta, err = walkRecords(data, n, keyless)
		if err == nil && p != len(data) {
			return scratch, ErrInvalidRecord, fmt.Sprintf("incorrect declared batch size, records still remaining: %d bytes after the %d records the batch declares", len(data)-p, n)
		}
	case CompressionSnappy:
		var out []byte
		var held int64
		out, held, err = decompressHeld(c, data, scratch[:0])
		if err == nil {
			scratch = out
			i, p, delta, err = walkRecords(out, n, keyless)
			if err == nil && p != len(out) {
				err = fmt.Errorf("%w: %d bytes after the %d records the batch declares", errRecordsTrailing, len(out)-p, n)
			}
		}
		inflateBudget.release(held)
	default:
		scratch, i, delta, err = streamRecords(c, data, n, scratch, keyless)
	}
	switch {
	case err == nil:
		return scratch, ErrNone, ""
	case err == errPrematureEOF:
		return scratch, ErrInvalidRecord, fmt.Sprintf("incorrect declared batch size, premature EOF reached: the batch declares %d records and holds %d", n, i)
	case err == errOffsetDelta:
		return scratch, ErrInvalidRecord, fmt.Sprintf("record %d has offset delta %d: a batch's records must have offset deltas 0, 1, 2, ...", i, delta)
	case errors.Is(err, errRecordsTrailing):
		return scratch, ErrInvalidRecord, fmt.Sprintf("incorrect declared batch size, records still remaining after the %d records the batch declares", n)
	}
	code := RecordsErrorCode(err)
	if code == ErrNone {
		code = ErrCorruptMessage
	}
	if code == ErrInvalidRecord {
		return scratch, code, fmt.Sprintf("record %d: %v", i, err)
	}
	return scratch, code, err.Error()
}

var (
	errPrematureEOF = errors.New("premature EOF")
	errOffsetDelta  = errors.New("offset delta out of sequence")
)

// walkRecords checks n records at the front of d as nextRecord reads them, without building
// a Record, and that record i has offset delta i. It returns the offset after the last, or
// the index of the record that failed and why (errPrematureEOF: d ended first;
// errOffsetDelta: delta is what it had). It is the produce path's loop over every record
// (Kafka's LogValidator walks them too), so it is one loop over offsets into d, and every
// varint's one- and two-byte forms (every length under 8 KiB) decode in line: fastVarint
// inlines, and calls cost more than the decoding. Longer forms go to readVarint.
//
// keyless, when set, is called with the index of each record whose key is null.
func walkRecords(d []byte, n int32, keyless func(int32)) (i int32, p int, delta int32, err error) {
	for ; i < n; i++ {
		if p >= len(d) {
			return i, p, 0, errPrematureEOF
		}
		size, k := fastVarint(d, p)
		if k != 0 {
			p += k
		} else if size, p = readVarint(d, p); p < 0 {
			return i, p, 0, errRecordsVarint
		}
		if size < 0 || int64(size) > int64(len(d)-p) {
			return i, p, 0, fmt.Errorf("%w: %d bytes declared, %d left", errRecordsTruncated, size, len(d)-p)
		}
		end := p + int(size)
		b := d[:end:end] // this record's fields are b[p:]
		if p >= end {
			return i, p, 0, errRecordSize
		}
		p++ // attributes
		// Timestamp delta, a varlong: only its length matters here.
		switch {
		case p < end && b[p] < 0x80:
			p++
		case p+1 < end && b[p+1] < 0x80:
			p += 2
		default:
			_, k := binary.Varint(b[p:])
			if k <= 0 {
				return i, p, 0, errRecordsVarint
			}
			p += k
		}
		if delta, k = fastVarint(b, p); k != 0 {
			p += k
		} else if delta, p = readVarint(b, p); p < 0 {
			return i, p, 0, errRecordsVarint
		}
		if delta != i {
			return i, p, delta, errOffsetDelta
		}
		// Key and value: a length (negative: null) and that many bytes.
		for f := range 2 {
			var l int32
			if l, k = fastVarint(b, p); k != 0 {
				p += k
			} else if l, p = readVarint(b, p); p < 0 {
				return i, p, 0, errRecordsVarint
			}
			if l < 0 && f == 0 && keyless != nil {
				keyless(i)
			}
			if l > 0 {
				if int(l) > end-p {
					return i, p, 0, errRecordSize
				}
				p += int(l)
			}
		}
		var nh int32
		if nh, k = fastVarint(b, p); k != 0 {
			p += k
		} else if nh, p = readVarint(b, p); p < 0 {
			return i, p, 0, errRecordsVarint
		}
		if nh == 0 && p == end {
			continue
		}
		// Each header takes at least two bytes (nextRecord).
		if nh < 0 || int(nh) > end-p {
			return i, p, 0, errRecordHeaders
		}
		for range nh {
			var kl, vl int32
			if kl, p = readVarint(b, p); p < 0 {
				return i, p, 0, errRecordsVarint
			}
			if kl < 0 {
				return i, p, 0, errRecordHeaderKey
			}
			if int(kl) > end-p {
				return i, p, 0, errRecordSize
			}
			p += int(kl)
			if vl, p = readVarint(b, p); p < 0 {
				return i, p, 0, errRecordsVarint
			}
			if vl > 0 {
				if int(vl) > end-p {
					return i, p, 0, errRecordSize
				}
				p += int(vl)
			}
		}
		if p != end {
			return i, p, 0, errRecordSize
		}
	}
	return n, p, 0, nil
}

// fastVarint decodes the zigzag varint at b[p:] if it takes one or two bytes (every length
// under 8 KiB) and returns it with its size, or a size of 0 for anything else (longer,
// truncated, p out of range). It is small enough for the compiler to inline.
func fastVarint(b []byte, p int) (int32, int) {
	if uint(p) < uint(len(b)) {
		x := uint32(b[p])
		if x < 0x80 {
			return int32(x>>1) ^ -int32(x&1), 1
		}
		if uint(p+1) < uint(len(b)) {
			if y := uint32(b[p+1]); y < 0x80 {
				x = x&0x7f | y<<7
				return int32(x>>1) ^ -int32(x&1), 2
			}
		}
	}
	return 0, 0
}

// readVarint decodes the zigzag int32 at b[p:] (ByteUtils.readVarint: at most five bytes) and
// returns it with the offset after it, or p < 0 when it is truncated or too long.
func readVarint(b []byte, p int) (int32, int) {
	if uint(p) >= uint(len(b)) {
		return 0, -1
	}
	v, n := varint(b[p:])
	if n <= 0 {
		return 0, -1
	}
	return v, p + n
}
