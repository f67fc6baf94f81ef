package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fuzz targets. Without -fuzz they run their seeds only: valid encodings of
// every version and codec that the tests build, so they double as
// regression tests. Run one with, e.g.:
//
//	go test -fuzz=FuzzProduceDecode -fuzztime=20s ./wire/
//
// Every target checks the decoder's contract with hostile input: it never
// panics (a read past the input would be a bounds-check panic), and what a
// successful decode returns lies inside the input.

// fuzzVersion maps any int16 onto 3..12, keeping in-range values as they
// are so that the seeds decode at their own version.
func fuzzVersion(v int16) int16 {
	if v >= MinProduceVersion && v <= MaxProduceVersion {
		return v
	}
	return MinProduceVersion + int16(uint16(v)%(MaxProduceVersion-MinProduceVersion+1))
}

// FuzzProduceDecode: Decode never panics and never reads past body. On
// success: every slice it returns lies inside body; kmsg, the reference
// decoder, accepts the same body and reads the same values; decoding again
// into the warm struct gives the same result; and no strict prefix of body
// decodes (a partial frame is always an error), checked at a split point
// chosen from the input.
func FuzzProduceDecode(f *testing.F) {
	for v := int16(MinProduceVersion); v <= MaxProduceVersion; v++ {
		f.Add(testProduceRequest(f, v).AppendTo(nil), v)
		empty := kmsg.NewPtrProduceRequest()
		empty.Version = v
		f.Add(empty.AppendTo(nil), v)
	}
	var r ProduceRequest // warm across inputs, as on a connection
	f.Fuzz(func(t *testing.T, body []byte, v int16) {
		v = fuzzVersion(v)
		if err := r.Decode(body, v); err != nil {
			return
		}
		if !within(r.TransactionalID, body) {
			t.Fatal("TransactionalID outside body")
		}
		for _, tp := range r.Topics {
			if !within(tp.Name, body) {
				t.Fatal("Name outside body")
			}
			for _, p := range tp.Partitions {
				if !within(p.Records, body) {
					t.Fatal("Records outside body")
				}
			}
		}
		k := kmsg.NewPtrProduceRequest()
		k.Version = v
		if err := k.ReadFrom(body); err != nil {
			t.Fatalf("wire accepted what kmsg rejects: %v", err)
		}
		checkDecoded(t, &r, k)

		var again ProduceRequest
		if err := again.Decode(body, v); err != nil {
			t.Fatalf("fresh decode failed: %v", err)
		}
		checkDecoded(t, &again, k)

		if len(body) > 0 {
			split := int(binary.BigEndian.Uint16(append(body[:0:0], body[0], body[len(body)-1]))) % len(body)
			if err := again.Decode(body[:split:split], v); err == nil {
				t.Fatalf("prefix of %d/%d bytes decoded", split, len(body))
			}
		}
	})
}

// FuzzParseRequestHeader: ParseRequestHeader never panics; on success
// BodyOffset lies in 8..len(frame), ClientID lies inside the header bytes
// frame[8:BodyOffset], and the header alone (frame[:BodyOffset]) parses to
// the same header: the body is never needed to find where it starts.
func FuzzParseRequestHeader(f *testing.F) {
	for _, id := range []string{"", "inlet"} {
		fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))
		for v := int16(3); v <= 12; v++ {
			f.Add(fm.AppendRequest(nil, testProduceRequest(f, v), int32(v))[4:])
		}
		for v := int16(0); v <= 4; v++ {
			r := kmsg.NewPtrApiVersionsRequest()
			r.Version = v
			f.Add(fm.AppendRequest(nil, r, 1)[4:])
		}
	}
	f.Add(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 9)[4:])
	f.Add(hdr(0, 9, 42, []byte("cli"), []byte{2, 0, 3, 'a', 'b', 'c', 0x80, 0x01, 0}))
	f.Add(hdr(7, 0, 1, nil, nil)[:8])
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, err := ParseRequestHeader(frame)
		if err != nil {
			return
		}
		if h.BodyOffset < 8 || h.BodyOffset > len(frame) {
			t.Fatalf("BodyOffset %d outside 8..%d", h.BodyOffset, len(frame))
		}
		if !within(h.ClientID, frame[8:h.BodyOffset]) {
			t.Fatal("ClientID outside the header")
		}
		h2, err := ParseRequestHeader(frame[:h.BodyOffset])
		if err != nil || h2.APIKey != h.APIKey || h2.APIVersion != h.APIVersion ||
			h2.CorrelationID != h.CorrelationID || h2.BodyOffset != h.BodyOffset || !bytes.Equal(h2.ClientID, h.ClientID) {
			t.Fatalf("header alone parses as %+v, %v; with body %+v", h2, err, h)
		}
	})
}

// FuzzValidateProduceBatch: ValidateProduceBatch never panics; it accepts
// only a buffer that is exactly one batch, no larger than the limit, with
// a matching CRC-32C and a header that agrees with ParseBatchHeader and
// with kmsg; a rejection always carries a message. When fixCRC is set the
// target rewrites the CRC first, so that the fuzzer reaches the checks
// behind it (codec, offsets, control, sequence) instead of stopping at a
// CRC it cannot guess.
//
// Behind the header, the records (ValidateRecords, which the produce path
// runs on every batch the header checks accept): it never panics, never
// decompresses past MaxDecompressedBytes, and accepts exactly when the
// independent decoder ForEachRecord reads the batch whole with offset
// deltas 0, 1, 2, ...; what it accepts holds exactly NumRecords records, the
// last with offset delta LastOffsetDelta, so the offsets a batch is given
// are the offsets its records have.
func FuzzValidateProduceBatch(f *testing.F) {
	for _, codec := range allCodecs {
		f.Add(buildBatch(f, codec, testRecords(3, 10), nil), 1<<20, false)
	}
	f.Add(buildBatch(f, CompressionNone, testRecords(2, 5), func(b *kmsg.RecordBatch) {
		b.ProducerID, b.FirstSequence = 7, 0
	}), 1<<20, true)
	f.Add(buildBatch(f, CompressionNone, testRecords(1, 5), func(b *kmsg.RecordBatch) { b.Attributes = attrControl }), 1<<20, true)
	// Headers that lie about the records behind them (the walk refuses each).
	one := encodeRecords(testRecords(1, 8))
	f.Add(headerBatch(f, 2_000_000_000, CompressionNone, one), 1<<20, true)
	f.Add(headerBatch(f, 2_000_000_000, CompressionZstd, one), 1<<20, true)
	f.Add(headerBatch(f, 1, CompressionNone, append(append([]byte{}, one...), 0)), 1<<20, true)
	f.Add(headerBatch(f, 2, CompressionLZ4, encodeRecords(testRecords(3, 8))), 1<<20, true)
	gap := testRecords(2, 8)
	gap[1].OffsetDelta = 2
	f.Add(headerBatch(f, 2, CompressionNone, encodeRecords(gap)), 1<<20, true)
	var scratch []byte
	f.Fuzz(func(t *testing.T, records []byte, maxBytes int, fixCRC bool) {
		if fixCRC && len(records) >= RecordBatchOverhead {
			records = append([]byte(nil), records...)
			binary.BigEndian.PutUint32(records[offCRC:], crc32.Checksum(records[offAttributes:], testCastagnoli))
		}
		h, code, msg := ValidateProduceBatch(records, maxBytes)
		if code != ErrNone {
			if msg == "" {
				t.Fatalf("code %d without a message", code)
			}
			return
		}
		if msg != "" {
			t.Fatalf("accepted with message %q", msg)
		}
		if int64(len(records)) != logOverhead+int64(h.BatchLength) || len(records) > maxBytes || len(records) < RecordBatchOverhead {
			t.Fatalf("accepted %d bytes, length %d, max %d", len(records), h.BatchLength, maxBytes)
		}
		if crc32.Checksum(records[offAttributes:], testCastagnoli) != h.CRC {
			t.Fatal("accepted a bad CRC")
		}
		if h2, err := ParseBatchHeader(records); err != nil || h2 != h {
			t.Fatalf("ParseBatchHeader disagrees: %+v %v", h2, err)
		}
		var k kmsg.RecordBatch
		if err := k.ReadFrom(records); err != nil || k.NumRecords != h.NumRecords || k.ProducerID != h.ProducerID {
			t.Fatalf("kmsg disagrees: %v", err)
		}
		if h.BaseOffset != 0 || h.Magic != 2 || h.Compression() > CompressionZstd || h.IsControl() ||
			int64(h.LastOffsetDelta)+1 != int64(h.NumRecords) || h.NumRecords <= 0 ||
			(h.ProducerID >= 0 && h.BaseSequence < 0) {
			t.Fatalf("accepted header %+v", h)
		}

		var rcode int16
		scratch, rcode, msg = ValidateRecords(records, &h, scratch)
		if len(scratch) > MaxDecompressedBytes {
			t.Fatalf("decompressed to %d bytes", len(scratch))
		}
		if (rcode == ErrNone) != (msg == "") {
			t.Fatalf("records: code %d with message %q", rcode, msg)
		}
		var n int32
		consecutive := true
		_, ferr := ForEachRecord(records, nil, func(r Record) error {
			if r.OffsetDelta != n {
				consecutive = false
			}
			n++
			return nil
		})
		if ok := ferr == nil && consecutive; ok != (rcode == ErrNone) {
			t.Fatalf("ValidateRecords says %d (%s); ForEachRecord says %v, offset deltas consecutive %v", rcode, msg, ferr, consecutive)
		}
		if rcode == ErrNone && (n != h.NumRecords || n-1 != h.LastOffsetDelta) {
			t.Fatalf("accepted %d records under a header of %d, last offset delta %d", n, h.NumRecords, h.LastOffsetDelta)
		}
	})
}

// FuzzForEachRecord: ForEachRecord never panics, never returns more
// records than the header declares, and on success returns exactly
// NumRecords; every Key and Value lies inside the batch (uncompressed) or
// inside the returned scratch (compressed); decompression never produces
// more than MaxDecompressedBytes.
func FuzzForEachRecord(f *testing.F) {
	for _, codec := range allCodecs {
		f.Add(buildBatch(f, codec, testRecords(4, 20), nil))
	}
	f.Add(rawBatch(1, []byte{16, 0, 0, 0, 1, 0, 2, 0, 1})) // one header
	var scratch []byte
	f.Fuzz(func(t *testing.T, batch []byte) {
		h, herr := ParseBatchHeader(batch)
		var keys, values [][]byte
		var err error
		scratch, err = ForEachRecord(batch, scratch, func(r Record) error {
			keys = append(keys, r.Key)
			values = append(values, r.Value)
			return nil
		})
		if len(scratch) > MaxDecompressedBytes {
			t.Fatalf("decompressed to %d bytes", len(scratch))
		}
		if herr != nil {
			if err == nil || len(keys) != 0 {
				t.Fatal("records from a batch without a header")
			}
			return
		}
		if int64(len(keys)) > int64(max(h.NumRecords, 0)) {
			t.Fatalf("%d records, header says %d", len(keys), h.NumRecords)
		}
		if err != nil {
			return
		}
		if int64(len(keys)) != int64(h.NumRecords) {
			t.Fatalf("%d records, header says %d", len(keys), h.NumRecords)
		}
		home := batch
		if h.Compression() != CompressionNone {
			home = scratch
		}
		for i := range keys {
			if !within(keys[i], home) || !within(values[i], home) {
				t.Fatalf("record %d outside its buffer", i)
			}
		}
	})
}
