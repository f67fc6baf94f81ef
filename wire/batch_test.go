package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const testMaxMessageBytes = 1 << 20

func validBatch(t testing.TB) []byte { return buildBatch(t, CompressionNone, testRecords(5, 30), nil) }

// expectReject runs ValidateProduceBatch and checks the code.
func expectReject(t *testing.T, records []byte, maxBytes int, want int16) {
	t.Helper()
	_, code, msg := ValidateProduceBatch(records, maxBytes)
	if code != want {
		t.Fatalf("code %d (%q), want %d", code, msg, want)
	}
	if want != ErrNone && msg == "" {
		t.Fatal("rejection without a message")
	}
}

func TestValidateProduceBatchValid(t *testing.T) {
	for _, codec := range []uint8{CompressionNone, CompressionGzip, CompressionSnappy, snappyXerial, CompressionLZ4, CompressionZstd} {
		b := buildBatch(t, codec, testRecords(7, 100), func(b *kmsg.RecordBatch) {
			b.ProducerID, b.ProducerEpoch, b.FirstSequence = 4000, 2, 17
		})
		h, code, msg := ValidateProduceBatch(b, testMaxMessageBytes)
		if code != ErrNone || msg != "" {
			t.Fatalf("codec %d: %d %q", codec, code, msg)
		}
		var k kmsg.RecordBatch
		if err := k.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		want := BatchHeader{
			BaseOffset: k.FirstOffset, BatchLength: k.Length, PartitionLeaderEpoch: k.PartitionLeaderEpoch,
			Magic: k.Magic, CRC: uint32(k.CRC), Attributes: k.Attributes, LastOffsetDelta: k.LastOffsetDelta,
			FirstTimestamp: k.FirstTimestamp, MaxTimestamp: k.MaxTimestamp, ProducerID: k.ProducerID,
			ProducerEpoch: k.ProducerEpoch, BaseSequence: k.FirstSequence, NumRecords: k.NumRecords,
		}
		if h != want {
			t.Fatalf("codec %d: header %+v, kmsg %+v", codec, h, want)
		}
	}
}

// The tests below are named for the failure they guard. Where the input has
// no valid CRC, it is because Kafka rejects it before looking at the CRC.

func TestValidateProduceBatchNoBatch(t *testing.T) {
	expectReject(t, nil, testMaxMessageBytes, ErrInvalidRecord)
	expectReject(t, []byte{}, testMaxMessageBytes, ErrInvalidRecord)
}

func TestValidateProduceBatchShortFrame(t *testing.T) {
	b := validBatch(t)
	expectReject(t, b[:11], testMaxMessageBytes, ErrInvalidRecord) // not even a length
	expectReject(t, b[:16], testMaxMessageBytes, ErrInvalidRecord) // no magic yet
	expectReject(t, b[:60], testMaxMessageBytes, ErrInvalidRecord) // shorter than its length
	expectReject(t, b[:len(b)-1], testMaxMessageBytes, ErrInvalidRecord)
}

// TestValidateProduceBatchLengthUnderOverhead: ByteBufferLogInputStream
// calls a length under 14 corrupt before it reads the magic.
func TestValidateProduceBatchLengthUnderOverhead(t *testing.T) {
	b := validBatch(t)
	binary.BigEndian.PutUint32(b[offLength:], 13)
	expectReject(t, b, testMaxMessageBytes, ErrCorruptMessage)
	expectReject(t, b[:12], testMaxMessageBytes, ErrCorruptMessage)
	binary.BigEndian.PutUint32(b[offLength:], 0x80000000)
	expectReject(t, b, testMaxMessageBytes, ErrCorruptMessage)
}

func TestValidateProduceBatchInvalidMagic(t *testing.T) {
	for _, m := range []byte{3, 0x7f, 0x80, 0xff} {
		b := validBatch(t)
		b[offMagic] = m
		expectReject(t, b, testMaxMessageBytes, ErrCorruptMessage)
	}
}

func TestValidateProduceBatchWrongMagic(t *testing.T) {
	for _, m := range []byte{0, 1} {
		b := validBatch(t)
		b[offMagic] = m
		expectReject(t, b, testMaxMessageBytes, ErrInvalidRecord)
	}
}

func TestValidateProduceBatchTwoBatches(t *testing.T) {
	b := validBatch(t)
	expectReject(t, append(b[:len(b):len(b)], b...), testMaxMessageBytes, ErrInvalidRecord)
}

func TestValidateProduceBatchTrailingBytes(t *testing.T) {
	b := validBatch(t)
	expectReject(t, append(b[:len(b):len(b)], 0), testMaxMessageBytes, ErrInvalidRecord)
}

func TestValidateProduceBatchNonZeroBaseOffset(t *testing.T) {
	b := validBatch(t)
	SetBaseOffset(b, 42) // outside the CRC: the batch is otherwise valid
	expectReject(t, b, testMaxMessageBytes, ErrInvalidRecord)
}

func TestValidateProduceBatchTooLarge(t *testing.T) {
	b := validBatch(t)
	expectReject(t, b, len(b)-1, ErrMessageTooLarge)
	expectReject(t, b, len(b), ErrNone)
}

func TestValidateProduceBatchBadCRC(t *testing.T) {
	b := validBatch(t)
	b[len(b)-1] ^= 1
	expectReject(t, b, testMaxMessageBytes, ErrCorruptMessage)
	b = validBatch(t)
	b[offCRC] ^= 0x80
	expectReject(t, b, testMaxMessageBytes, ErrCorruptMessage)
}

// TestValidateProduceBatchShorterThanHeader: a whole "batch" of 14..60
// bytes passes the iterator but fails DefaultRecordBatch.isValid.
func TestValidateProduceBatchShorterThanHeader(t *testing.T) {
	b := validBatch(t)[:40]
	binary.BigEndian.PutUint32(b[offLength:], 40-12)
	expectReject(t, b, testMaxMessageBytes, ErrCorruptMessage)
}

func TestValidateProduceBatchUnknownCompression(t *testing.T) {
	for _, c := range []int16{5, 6, 7} {
		b := buildBatch(t, CompressionNone, testRecords(2, 5), func(b *kmsg.RecordBatch) { b.Attributes |= c })
		expectReject(t, b, testMaxMessageBytes, ErrUnsupportedCompressionType)
	}
}

func TestValidateProduceBatchLastOffsetDeltaMismatch(t *testing.T) {
	b := buildBatch(t, CompressionNone, testRecords(3, 5), func(b *kmsg.RecordBatch) { b.LastOffsetDelta = 5 })
	expectReject(t, b, testMaxMessageBytes, ErrInvalidRecord)
	b = buildBatch(t, CompressionNone, testRecords(3, 5), func(b *kmsg.RecordBatch) { b.NumRecords = 2 })
	expectReject(t, b, testMaxMessageBytes, ErrInvalidRecord)
}

// TestValidateProduceBatchInvalidOffsetRange guards LastOffsetDelta < 0,
// including the int32 overflow of MaxInt32+1 (computed in int64).
func TestValidateProduceBatchInvalidOffsetRange(t *testing.T) {
	for _, d := range []int32{-1, -5, -2147483648} {
		b := buildBatch(t, CompressionNone, testRecords(1, 5), func(b *kmsg.RecordBatch) { b.LastOffsetDelta = d })
		expectReject(t, b, testMaxMessageBytes, ErrInvalidRecord)
	}
	b := buildBatch(t, CompressionNone, testRecords(1, 5), func(b *kmsg.RecordBatch) {
		b.LastOffsetDelta, b.NumRecords = 2147483647, -2147483648
	})
	expectReject(t, b, testMaxMessageBytes, ErrInvalidRecord)
}

func TestValidateProduceBatchNoRecords(t *testing.T) {
	b := buildBatch(t, CompressionNone, nil, nil) // LastOffsetDelta -1, NumRecords 0
	expectReject(t, b, testMaxMessageBytes, ErrInvalidRecord)
}

func TestValidateProduceBatchClientControlBatch(t *testing.T) {
	b := buildBatch(t, CompressionNone, testRecords(1, 5), func(b *kmsg.RecordBatch) {
		b.Attributes |= attrControl | attrTransactional
		b.ProducerID, b.FirstSequence = 1, 0
	})
	_, code, msg := ValidateProduceBatch(b, testMaxMessageBytes)
	if code != ErrInvalidRecord || msg != "clients are not allowed to write control records" {
		t.Fatalf("%d %q", code, msg)
	}
}

// TestValidateProduceBatchProducerIDWithoutSequence guards
// LogValidator.validateBatch: hasProducerId implies baseSequence >= 0.
func TestValidateProduceBatchProducerIDWithoutSequence(t *testing.T) {
	b := buildBatch(t, CompressionNone, testRecords(2, 5), func(b *kmsg.RecordBatch) {
		b.ProducerID, b.ProducerEpoch, b.FirstSequence = 0, 0, -1
	})
	expectReject(t, b, testMaxMessageBytes, ErrInvalidRecord)
}

// TestValidateProduceBatchSequenceWithoutProducer pins Kafka's behaviour
// for the converse: a sequence without a producer id is not checked there
// (the idempotence layer ignores it), so it is accepted.
func TestValidateProduceBatchSequenceWithoutProducer(t *testing.T) {
	b := buildBatch(t, CompressionNone, testRecords(2, 5), func(b *kmsg.RecordBatch) {
		b.ProducerID, b.FirstSequence = -1, 5
	})
	expectReject(t, b, testMaxMessageBytes, ErrNone)
}

// TestValidateProduceBatchOrder guards the order of checks: with two faults
// the one Kafka checks first decides the code.
func TestValidateProduceBatchOrder(t *testing.T) {
	corruptCRC := func(b []byte) []byte { b[len(b)-1] ^= 1; return b }
	for _, tc := range []struct {
		name string
		b    []byte
		max  int
		want int16
	}{
		{"WrongMagicBeforeTwoBatches", func() []byte {
			b := validBatch(t)
			b[offMagic] = 1
			return append(b, b...)
		}(), testMaxMessageBytes, ErrInvalidRecord},
		{"BaseOffsetBeforeTooLarge", func() []byte { b := validBatch(t); SetBaseOffset(b, 1); return b }(), 10, ErrInvalidRecord},
		{"TooLargeBeforeCRC", corruptCRC(validBatch(t)), 10, ErrMessageTooLarge},
		{"CRCBeforeCompression", corruptCRC(buildBatch(t, CompressionNone, testRecords(1, 1), func(b *kmsg.RecordBatch) { b.Attributes = 7 })), testMaxMessageBytes, ErrCorruptMessage},
		{"CompressionBeforeOffsets", buildBatch(t, CompressionNone, testRecords(1, 1), func(b *kmsg.RecordBatch) { b.Attributes, b.NumRecords = 6, 9 }), testMaxMessageBytes, ErrUnsupportedCompressionType},
		{"CRCBeforeControl", corruptCRC(buildBatch(t, CompressionNone, testRecords(1, 1), func(b *kmsg.RecordBatch) { b.Attributes = attrControl })), testMaxMessageBytes, ErrCorruptMessage},
	} {
		t.Run(tc.name, func(t *testing.T) { expectReject(t, tc.b, tc.max, tc.want) })
	}
}

func TestValidateProduceBatchZeroAllocs(t *testing.T) {
	b := buildBatch(t, CompressionNone, testRecords(50, 100), nil)
	if n := testing.AllocsPerRun(100, func() {
		if _, code, _ := ValidateProduceBatch(b, testMaxMessageBytes); code != ErrNone {
			t.Fatal(code)
		}
	}); n != 0 {
		t.Fatalf("ValidateProduceBatch allocates %v times", n)
	}
}

func TestParseBatchHeaderShort(t *testing.T) {
	b := validBatch(t)
	if _, err := ParseBatchHeader(b[:60]); err == nil {
		t.Fatal("parsed 60 bytes")
	}
	h, err := ParseBatchHeader(b[:61])
	if err != nil || h.NumRecords != 5 || h.Magic != 2 {
		t.Fatalf("%+v %v", h, err)
	}
}

func TestBatchHeaderAttributes(t *testing.T) {
	h := BatchHeader{Attributes: 0x3b} // lz4, LogAppendTime, transactional, control
	if h.Compression() != 3 || h.TimestampType() != 1 || !h.IsTransactional() || !h.IsControl() {
		t.Fatalf("%d %d %v %v", h.Compression(), h.TimestampType(), h.IsTransactional(), h.IsControl())
	}
	h = BatchHeader{Attributes: 0x04}
	if h.Compression() != 4 || h.TimestampType() != 0 || h.IsTransactional() || h.IsControl() {
		t.Fatal("zstd create-time batch misread")
	}
}

// TestSetBaseOffsetKeepsCRC guards that assigning offsets leaves the CRC
// valid, as Kafka relies on for in-place assignment.
func TestSetBaseOffsetKeepsCRC(t *testing.T) {
	b := validBatch(t)
	SetBaseOffset(b, 123456789012)
	var k kmsg.RecordBatch
	if err := k.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if k.FirstOffset != 123456789012 {
		t.Fatalf("base offset %d", k.FirstOffset)
	}
	if crc32.Checksum(b[offAttributes:], testCastagnoli) != uint32(k.CRC) {
		t.Fatal("CRC broken by SetBaseOffset")
	}
}

func TestSetLogAppendTime(t *testing.T) {
	b := buildBatch(t, CompressionLZ4, testRecords(4, 10), func(b *kmsg.RecordBatch) {
		b.Attributes |= attrTransactional
		b.ProducerID, b.FirstSequence = 9, 0
	})
	orig := append([]byte(nil), b...)
	SetLogAppendTime(b, 1800000000000)
	h, code, msg := ValidateProduceBatch(b, testMaxMessageBytes)
	if code != ErrNone {
		t.Fatalf("stamped batch invalid: %d %q", code, msg)
	}
	if h.TimestampType() != 1 || h.MaxTimestamp != 1800000000000 || h.Compression() != CompressionLZ4 || !h.IsTransactional() {
		t.Fatalf("header %+v", h)
	}
	if !bytes.Equal(b[offFirstTimestamp:offMaxTimestamp], orig[offFirstTimestamp:offMaxTimestamp]) ||
		!bytes.Equal(b[offProducerID:], orig[offProducerID:]) {
		t.Fatal("SetLogAppendTime touched more than attributes, max timestamp and CRC")
	}
	stamped := append([]byte(nil), b...)
	SetLogAppendTime(b, 1800000000000)
	if !bytes.Equal(b, stamped) {
		t.Fatal("restamping with the same time changed the batch")
	}
}

// TestNextBatchSplitsStoredBatches: batches back to back come apart at their Length fields; a
// short tail is the end, a Length past the bytes an error.
func TestNextBatchSplitsStoredBatches(t *testing.T) {
	a, b := validBatch(t), buildBatch(t, CompressionNone, testRecords(2, 7), nil)
	batch, rest, err := NextBatch(append(append([]byte(nil), a...), b...))
	if err != nil || !bytes.Equal(batch, a) || !bytes.Equal(rest, b) {
		t.Fatalf("first: %d bytes, rest %d, %v", len(batch), len(rest), err)
	}
	if batch, _, err = NextBatch(rest); err != nil || !bytes.Equal(batch, b) {
		t.Fatalf("second: %d bytes, %v", len(batch), err)
	}
	if batch, _, err = NextBatch(a[:RecordBatchOverhead-1]); batch != nil || err != nil {
		t.Fatalf("a short tail: %d bytes, %v", len(batch), err)
	}
	if _, _, err = NextBatch(a[:len(a)-1]); err == nil {
		t.Fatal("a truncated batch split without an error")
	}
}
