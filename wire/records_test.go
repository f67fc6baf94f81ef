package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allCodecs = []uint8{CompressionNone, CompressionGzip, CompressionSnappy, snappyXerial, CompressionLZ4, CompressionZstd}

func codecName(c uint8) string {
	return map[uint8]string{CompressionNone: "none", CompressionGzip: "gzip", CompressionSnappy: "snappy",
		snappyXerial: "snappy-xerial", CompressionLZ4: "lz4", CompressionZstd: "zstd"}[c]
}

func collect(t *testing.T, batch, scratch []byte) ([]Record, []byte, error) {
	t.Helper()
	var got []Record
	scratch, err := ForEachRecord(batch, scratch, func(r Record) error {
		got = append(got, r)
		return nil
	})
	return got, scratch, err
}

// TestForEachRecordCodecs decodes batches of every codec, small and large
// (the large ones span several xerial blocks), reusing one scratch.
func TestForEachRecordCodecs(t *testing.T) {
	var scratch []byte
	for _, codec := range allCodecs {
		for _, n := range []int{1, 10, 600} {
			recs := testRecords(n, 200)
			b := buildBatch(t, codec, recs, nil)
			var got []Record
			var err error
			got, scratch, err = collect(t, b, scratch)
			if err != nil {
				t.Fatalf("%s/%d: %v", codecName(codec), n, err)
			}
			if len(got) != n {
				t.Fatalf("%s/%d: %d records", codecName(codec), n, len(got))
			}
			home := b
			if codec != CompressionNone {
				home = scratch
			}
			for i, r := range got {
				w := recs[i]
				if r.OffsetDelta != w.OffsetDelta || r.TimestampDelta != w.TimestampDelta64 || r.Headers != len(w.Headers) ||
					!bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) ||
					!bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) {
					t.Fatalf("%s/%d record %d: got %+v, want %+v", codecName(codec), n, i, r, w)
				}
				if !within(r.Key, home) || !within(r.Value, home) {
					t.Fatalf("%s/%d record %d: key/value outside the batch or scratch", codecName(codec), n, i)
				}
			}
		}
	}
}

func TestForEachRecordStopsAtFnError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	_, err := ForEachRecord(validBatch(t), nil, func(Record) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	if RecordsErrorCode(err) != ErrNone {
		t.Fatal("fn's error mapped to a Kafka code")
	}
}

// rawBatch builds a batch around hand-made record bytes.
func rawBatch(numRecords int32, raw []byte) []byte {
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: numRecords - 1, ProducerID: -1, FirstSequence: -1, NumRecords: numRecords, Records: raw}
	return finishBatch(&b)
}

func TestForEachRecordMalformed(t *testing.T) {
	one := encodeRecords(testRecords(1, 4))
	two := encodeRecords(testRecords(2, 4))
	// A record of size 7: attributes, ts 0, delta 0, null key, value "",
	// then a header count, with room to tamper.
	rec := func(body ...byte) []byte { return append([]byte{byte(len(body) << 1)}, body...) }
	for _, tc := range []struct {
		name  string
		batch []byte
	}{
		{"ShortBatch", validBatch(t)[:60]},
		{"LengthPastBuffer", validBatch(t)[:70]},
		{"NegativeNumRecords", rawBatch(-1, one)},
		{"MoreRecordsDeclared", rawBatch(2, one)},
		{"FewerRecordsDeclared", rawBatch(1, two)},
		{"LengthVarintOverflow", rawBatch(1, []byte{0xff, 0xff, 0xff, 0xff, 0x7f, 0})},
		{"LengthVarintTooLong", rawBatch(1, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01})},
		{"LengthPastEnd", rawBatch(1, append([]byte{100}, one[1:]...))},
		{"NegativeLength", rawBatch(1, []byte{0x01, 0, 0, 0})},
		{"EmptyRecord", rawBatch(1, rec())},
		{"TimestampVarlongTooLong", rawBatch(1, rec(0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01))},
		{"KeyPastRecord", rawBatch(1, rec(0, 0, 0, 20, 0, 0))},
		{"ValuePastRecord", rawBatch(1, rec(0, 0, 0, 1, 40, 0))},
		{"MissingHeaderCount", rawBatch(1, rec(0, 0, 0, 1, 0))},
		{"NegativeHeaderCount", rawBatch(1, rec(0, 0, 0, 1, 0, 1))},
		{"HeaderCountPastEnd", rawBatch(1, rec(0, 0, 0, 1, 0, 20))},
		{"NegativeHeaderKey", rawBatch(1, rec(0, 0, 0, 1, 0, 2, 1, 0))},
		{"HeaderKeyPastRecord", rawBatch(1, rec(0, 0, 0, 1, 0, 2, 10, 0))},
		{"HeaderValuePastRecord", rawBatch(1, rec(0, 0, 0, 1, 0, 2, 0, 10))},
		{"RecordLongerThanFields", rawBatch(1, rec(0, 0, 0, 1, 0, 0, 0))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := collect(t, tc.batch, nil)
			if err == nil {
				t.Fatalf("accepted, %d records", len(got))
			}
			if code := RecordsErrorCode(err); code != ErrInvalidRecord {
				t.Fatalf("%v mapped to %d", err, code)
			}
		})
	}
	// The tampering base is itself valid.
	if got, _, err := collect(t, rawBatch(1, rec(0, 0, 0, 1, 0, 0)), nil); err != nil || len(got) != 1 || got[0].Key != nil || got[0].Value == nil {
		t.Fatalf("base record: %+v %v", got, err)
	}
	// Negative lengths other than -1 are null, as in Java.
	if got, _, err := collect(t, rawBatch(1, rec(0, 0, 0, 5, 9, 0)), nil); err != nil || got[0].Key != nil || got[0].Value != nil {
		t.Fatalf("negative lengths: %+v %v", got, err)
	}
}

func TestForEachRecordCorruptCompressed(t *testing.T) {
	for _, codec := range allCodecs[1:] {
		b := buildBatch(t, codec, testRecords(20, 50), func(b *kmsg.RecordBatch) {
			b.Records = b.Records[:len(b.Records)/2]
		})
		_, _, err := collect(t, b, nil)
		if err == nil {
			t.Fatalf("%s: truncated payload accepted", codecName(codec))
		}
		if code := RecordsErrorCode(err); code == ErrNone {
			t.Fatalf("%s: %v has no Kafka code", codecName(codec), err)
		}
	}
	b := buildBatch(t, CompressionNone, testRecords(1, 1), func(b *kmsg.RecordBatch) { b.Attributes = 6 })
	if _, _, err := collect(t, b, nil); RecordsErrorCode(err) != ErrCorruptMessage {
		t.Fatalf("unknown codec: %v", err)
	}
}

// compressedBatch wraps an arbitrary compressed payload in a batch.
func compressedBatch(codec uint8, payload []byte) []byte {
	b := kmsg.RecordBatch{Magic: 2, Attributes: int16(codec), ProducerID: -1, FirstSequence: -1, NumRecords: 1, Records: payload}
	return finishBatch(&b)
}

// TestForEachRecordDecompressionBomb guards memory: a payload that
// decompresses past MaxDecompressedBytes is rejected with
// MESSAGE_TOO_LARGE, having allocated a small multiple of the bound.
func TestForEachRecordDecompressionBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 65 MiB")
	}
	zeros := make([]byte, MaxDecompressedBytes+1<<20)

	var gz bytes.Buffer // gzip members concatenate; 1 MiB of zeros is ~1 KiB
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	w.Write(zeros[:1<<20])
	w.Close()
	member := gz.Bytes()
	gzipBomb := bytes.Repeat(member, MaxDecompressedBytes>>20+1)

	snappyClaim := binary.AppendUvarint(nil, 100<<20) // claims 100 MiB
	snappyClaim = append(snappyClaim, 0, 0, 0, 0)
	xerialBomb := append([]byte{}, xerialEncode(nil, 1)...)
	for range 7 { // seven blocks of 10 MiB each
		blk := append(binary.AppendUvarint(nil, 10<<20), 0, 0)
		xerialBomb = binary.BigEndian.AppendUint32(xerialBomb, uint32(len(blk)))
		xerialBomb = append(xerialBomb, blk...)
	}

	for _, tc := range []struct {
		name    string
		codec   uint8
		payload []byte
	}{
		{"gzip", CompressionGzip, gzipBomb},
		{"snappy", CompressionSnappy, snappyClaim},
		{"snappy-xerial", CompressionSnappy, xerialBomb},
		{"lz4", CompressionLZ4, compress(t, CompressionLZ4, zeros)},
		{"zstd", CompressionZstd, compress(t, CompressionZstd, zeros)},
		// 4 MiB from a few hundred bytes breaks the ratio, not the size.
		{"zstd-ratio", CompressionZstd, compress(t, CompressionZstd, zeros[:4<<20])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := compressedBatch(tc.codec, tc.payload)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			scratch := make([]byte, 0, 16)
			got, err := ForEachRecord(batch, scratch, func(Record) error { return nil })
			runtime.ReadMemStats(&after)
			if cap(got) != cap(scratch) {
				t.Fatalf("scratch of cap %d came back with cap %d", cap(scratch), cap(got))
			}
			if code := RecordsErrorCode(err); code != ErrMessageTooLarge {
				t.Fatalf("%v mapped to %d, want MESSAGE_TOO_LARGE", err, code)
			}
			// Growing by doubling allocates about twice the bound in
			// all (1.5x live at the peak), plus the codec's buffers.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 3*MaxDecompressedBytes {
				t.Fatalf("allocated %d MiB rejecting it", grew>>20)
			}
		})
	}

	// At the floor, a high ratio is fine: 1 MiB of zeros decompresses
	// and fails only as records.
	_, err := ForEachRecord(compressedBatch(CompressionZstd, compress(t, CompressionZstd, zeros[:1<<20])), nil, func(Record) error { return nil })
	if code := RecordsErrorCode(err); code != ErrInvalidRecord {
		t.Fatalf("1 MiB zstd: %v mapped to %d", err, code)
	}
}

func TestForEachRecordUncompressedZeroAllocs(t *testing.T) {
	b := buildBatch(t, CompressionNone, testRecords(50, 100), nil)
	total := 0
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ForEachRecord(b, nil, func(r Record) error {
			total += len(r.Value)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ForEachRecord allocates %v times", n)
	}
}

func TestDecompressLimit(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{0, decompressFloor},
		{1000, decompressFloor},
		{2000, 2000 * MaxCompressionRatio},
		{1 << 20, MaxDecompressedBytes},
	} {
		if got := decompressLimit(make([]byte, tc.in)); got != tc.want {
			t.Errorf("limit(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestForEachRecordConcurrent guards the shared decoders (the pools and the
// one zstd decoder): run it with -race.
func TestForEachRecordConcurrent(t *testing.T) {
	batches := make([][]byte, len(allCodecs))
	for i, c := range allCodecs {
		batches[i] = buildBatch(t, c, testRecords(50, 100), nil)
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var scratch []byte
			var err error
			for i := range 20 {
				n := 0
				scratch, err = ForEachRecord(batches[(g+i)%len(batches)], scratch, func(Record) error { n++; return nil })
				if err == nil && n != 50 {
					err = errors.New("wrong record count")
				}
				if err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
