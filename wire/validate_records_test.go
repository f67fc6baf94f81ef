package wire

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// validateRecords runs ValidateProduceBatch and then ValidateRecords, as the produce path does.
func validateRecords(t *testing.T, batch []byte) (int16, string) {
	t.Helper()
	h, code, msg := ValidateProduceBatch(batch, 1<<30)
	if code != ErrNone {
		t.Fatalf("ValidateProduceBatch refused the batch: %d %s", code, msg)
	}
	_, code, msg = ValidateRecords(batch, &h, nil)
	if (code == ErrNone) != (msg == "") {
		t.Fatalf("code %d with message %q", code, msg)
	}
	return code, msg
}

// headerBatch builds a batch around raw record bytes whose header claims count records (the
// last offset delta agreeing), so that ValidateProduceBatch accepts it and only the records
// can be wrong.
func headerBatch(t testing.TB, count int32, codec uint8, raw []byte) []byte {
	b := kmsg.RecordBatch{Magic: 2, Attributes: int16(codec), LastOffsetDelta: count - 1, ProducerID: -1,
		ProducerEpoch: -1, FirstSequence: -1, NumRecords: count, Records: raw}
	if codec != CompressionNone {
		b.Records = compress(t, codec, raw)
	}
	return finishBatch(&b)
}

func TestValidateRecordsAcceptsEveryCodec(t *testing.T) {
	for _, codec := range allCodecs {
		for _, n := range []int{1, 7, 300} {
			if code, msg := validateRecords(t, buildBatch(t, codec, testRecords(n, 40), nil)); code != ErrNone {
				t.Errorf("%s, %d records: %d %s", codecName(codec), n, code, msg)
			}
		}
	}
}

// TestValidateRecordsRejects is the table of batches whose header passes every header check
// (CRC included) while the records disagree with it; each is INVALID_RECORD, compressed or not.
func TestValidateRecordsRejects(t *testing.T) {
	one := encodeRecords(testRecords(1, 10))
	three := encodeRecords(testRecords(3, 10))
	gap := testRecords(3, 10)
	gap[2].OffsetDelta = 3
	fromOne := testRecords(2, 10)
	fromOne[0].OffsetDelta, fromOne[1].OffsetDelta = 1, 2
	// lenLie re-encodes the first record's length varint as its real length plus d.
	lenLie := func(raw []byte, d int64) []byte {
		l, n := binary.Varint(raw)
		return append(binary.AppendVarint(nil, l+d), raw[n:]...)
	}
	for _, tc := range []struct {
		name  string
		count int32
		raw   []byte
		want  string
	}{
		{"CountTooHigh", 2_000_000_000, one, "premature EOF"},
		{"CountOneTooHigh", 4, three, "premature EOF"},
		{"CountTooLow", 2, three, "records still remaining"},
		{"OffsetDeltaGap", 3, encodeRecords(gap), "offset delta 3"},
		{"OffsetDeltaNotFromZero", 2, encodeRecords(fromOne), "offset delta 1"},
		{"TrailingBytes", 3, append(append([]byte{}, three...), 0, 0, 0), "records still remaining"},
		{"TrailingByte", 1, append(append([]byte{}, one...), 0), "records still remaining"},
		{"RecordLengthLieLonger", 3, lenLie(three, 1), "record"},
		{"RecordLengthLieShorter", 3, lenLie(three, -1), "record 0"},
		{"RecordLengthPastBatch", 1, lenLie(one, 1000), "record 0"},
		{"RecordLengthNegative", 1, append([]byte{0x01}, one[1:]...), "record 0"},
		{"KeyLengthPastRecord", 1, []byte{12, 0, 0, 0, 40, 0, 0}, "record 0"},
		{"HeaderCountNegative", 1, []byte{12, 0, 0, 0, 1, 0, 1}, "record 0"},
		{"HeaderKeyNegative", 1, []byte{16, 0, 0, 0, 1, 0, 2, 1, 0}, "record 0"},
		{"VarintTooLong", 1, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, "record 0"},
	} {
		for _, codec := range allCodecs {
			if codec == snappyXerial {
				continue // the same snappy attribute as CompressionSnappy
			}
			t.Run(tc.name+"/"+codecName(codec), func(t *testing.T) {
				code, msg := validateRecords(t, headerBatch(t, tc.count, codec, tc.raw))
				if code != ErrInvalidRecord {
					t.Fatalf("code %d (%s), want INVALID_RECORD", code, msg)
				}
				if !strings.Contains(msg, tc.want) {
					t.Errorf("message %q does not say %q", msg, tc.want)
				}
			})
		}
	}
}

// TestValidateRecordsCompressedBadPayload: a payload that does not decompress is
// CORRUPT_MESSAGE, and the scratch passed in comes back as it was or as the stream window,
// never larger; valid records that decompress past the bounds are MESSAGE_TOO_LARGE, refused
// at the bound (within the budget, holding nothing after), whatever the codec; a bomb of
// zeros is refused at its first record, which is not one.
func TestValidateRecordsCompressedBadPayload(t *testing.T) {
	for _, codec := range []uint8{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		b := buildBatch(t, codec, testRecords(20, 50), func(b *kmsg.RecordBatch) { b.Records = b.Records[:len(b.Records)/2] })
		h, _, _ := ValidateProduceBatch(b, 1<<30)
		scratch := make([]byte, 0, 16)
		got, code, msg := ValidateRecords(b, &h, scratch)
		if code != ErrCorruptMessage || msg == "" {
			t.Errorf("%s truncated payload: %d %q, want CORRUPT_MESSAGE", codecName(codec), code, msg)
		}
		if cap(got) != 16 && cap(got) > streamWindow {
			t.Errorf("%s: scratch of cap %d came back with cap %d on failure", codecName(codec), cap(scratch), cap(got))
		}
	}
	// 65 records of 1 MiB of zeros each: valid, and past MaxDecompressedBytes.
	big := make([]kmsg.Record, MaxDecompressedBytes>>20+1)
	for i := range big {
		big[i] = kmsg.Record{OffsetDelta: int32(i), Value: make([]byte, 1<<20)}
	}
	raw := encodeRecords(big)
	for _, codec := range []uint8{CompressionGzip, CompressionLZ4, CompressionZstd} {
		bomb := headerBatch(t, int32(len(big)), codec, raw)
		h, _, _ := ValidateProduceBatch(bomb, 1<<30)
		if _, code, msg := ValidateRecords(bomb, &h, nil); code != ErrMessageTooLarge {
			t.Errorf("%s bomb of valid records: code %d (%s), want MESSAGE_TOO_LARGE", codecName(codec), code, msg)
		}
		if held := InflateBudgetHeld(); held != 0 {
			t.Errorf("%s: %d bytes of the decompression budget still held", codecName(codec), held)
		}
	}
	zeros := compressedBatch(CompressionZstd, compress(t, CompressionZstd, make([]byte, MaxDecompressedBytes+1)))
	h, _, _ := ValidateProduceBatch(zeros, 1<<30)
	if _, code, _ := ValidateRecords(zeros, &h, nil); code == ErrNone {
		t.Error("zstd bomb of zeros accepted")
	}
}

// TestValidateRecordsAgreesWithForEachRecord: every batch ValidateRecords accepts, ForEachRecord
// decodes into exactly NumRecords records with offset deltas 0..n-1.
func TestValidateRecordsAgreesWithForEachRecord(t *testing.T) {
	for _, codec := range allCodecs {
		b := buildBatch(t, codec, testRecords(50, 30), nil)
		if code, msg := validateRecords(t, b); code != ErrNone {
			t.Fatalf("%s: %d %s", codecName(codec), code, msg)
		}
		checkRecordsMatchHeader(t, b)
	}
}

// checkRecordsMatchHeader fails unless ForEachRecord reads exactly the records b's header
// declares, with offset deltas 0, 1, 2, ... up to its last offset delta.
func checkRecordsMatchHeader(t *testing.T, b []byte) {
	t.Helper()
	h, err := ParseBatchHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	if _, err := ForEachRecord(b, nil, func(r Record) error {
		if r.OffsetDelta != n {
			t.Fatalf("record %d has offset delta %d", n, r.OffsetDelta)
		}
		n++
		return nil
	}); err != nil {
		t.Fatalf("ForEachRecord refuses what ValidateRecords accepted: %v", err)
	}
	if n != h.NumRecords || n-1 != h.LastOffsetDelta {
		t.Fatalf("%d records, header: count %d, last offset delta %d", n, h.NumRecords, h.LastOffsetDelta)
	}
}

// TestValidateRecordsZeroAllocs: on the produce path every batch is walked, so it must not
// allocate: uncompressed without scratch, compressed once scratch has grown.
func TestValidateRecordsZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items at random: allocation counts mean nothing under it")
	}
	for _, codec := range allCodecs {
		b := buildBatch(t, codec, testRecords(150, 100), nil)
		h, _, _ := ValidateProduceBatch(b, 1<<30)
		var scratch []byte
		for range 3 { // grow scratch and warm the decoder pools
			scratch, _, _ = ValidateRecords(b, &h, scratch)
		}
		if n := testing.AllocsPerRun(100, func() {
			var code int16
			if scratch, code, _ = ValidateRecords(b, &h, scratch); code != ErrNone {
				t.Fatalf("code %d", code)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per batch", codecName(codec), n)
		}
	}
}

// TestValidateRecordsZstdLaterFrameWithLargerWindow: a batch of two zstd frames whose second
// (not single-segment) needs a 16 MiB window, over the small decoder class the first frame
// chose, is read again with the large class and accepted, not refused as too large; on a
// compacted topic's check the keyless records found before the retry are not reported twice.
func TestValidateRecordsZstdLaterFrameWithLargerWindow(t *testing.T) {
	recs := testRecords(20, 1<<20) // 20 MiB: the second frame holds more than the small window
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range recs {
		if recs[i].Value != nil { // incompressible, so the ratio bound stays out of the way
			for j := range recs[i].Value {
				recs[i].Value[j] = byte(rng.Uint32())
			}
		}
		if i%4 == 0 {
			recs[i].Key = nil // keyless: reported once each
		} else if recs[i].Key == nil {
			recs[i].Key = []byte("k")
		}
	}
	raw := encodeRecords(recs)
	frame := func(p []byte, window int) []byte {
		var buf bytes.Buffer
		enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(window), zstd.WithSingleSegment(false))
		if err != nil {
			t.Fatal(err)
		}
		enc.Write(p)
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	half := len(raw) / 2
	payload := append(frame(raw[:half], 1<<16), frame(raw[half:], 16<<20)...)
	var fh zstd.Header
	if err := fh.Decode(frame(raw[half:], 16<<20)); err != nil || fh.SingleSegment || fh.WindowSize <= zstdSmallWindow {
		t.Fatalf("second frame: window %d, single segment %v, err %v: not the case under test", fh.WindowSize, fh.SingleSegment, err)
	}
	n := int32(len(recs))
	b := finishBatch(&kmsg.RecordBatch{Magic: 2, Attributes: int16(CompressionZstd), LastOffsetDelta: n - 1, ProducerID: -1,
		ProducerEpoch: -1, FirstSequence: -1, NumRecords: n, Records: payload})
	h, code, msg := ValidateProduceBatch(b, 1<<30)
	if code != ErrNone {
		t.Fatalf("header: %d %s", code, msg)
	}
	if _, code, msg := ValidateRecords(b, &h, nil); code != ErrNone {
		t.Fatalf("two frames, the second with a 16 MiB window: %d %s", code, msg)
	}
	var bad []int32
	keyless := func(i int32) {
		if i < 0 {
			bad = bad[:0]
			return
		}
		bad = append(bad, i)
	}
	if _, code, msg := KeylessRecords(b, &h, nil, keyless); code != ErrNone || len(bad) != 5 {
		t.Fatalf("keyless check: code %d (%s), %d keyless records reported %v, want 5", code, msg, len(bad), bad)
	}
	if held := InflateBudgetHeld(); held != 0 {
		t.Errorf("%d bytes of the decompression budget still held", held)
	}
}
