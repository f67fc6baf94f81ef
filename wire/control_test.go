package wire

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControlBatchAsKafkaReadsIt: a marker built here decodes with franz-go's kmsg as a valid
// control batch with one record whose key and value are EndTransactionMarker's.
func TestControlBatchAsKafkaReadsIt(t *testing.T) {
	for _, kind := range []int16{ControlAbort, ControlCommit} {
		b := AppendControlBatch([]byte("xx"), 42, 7, kind, 3, 1234)[2:]
		if len(b) != ControlBatchSize {
			t.Fatalf("size %d, want %d", len(b), ControlBatchSize)
		}
		if !BatchCRCValid(b) {
			t.Fatal("bad CRC")
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.Attributes != 0x30 || rb.ProducerID != 42 || rb.ProducerEpoch != 7 || rb.FirstSequence != -1 || rb.NumRecords != 1 || rb.FirstTimestamp != 1234 || rb.Length != int32(len(b)-12) {
			t.Fatalf("header %+v", rb)
		}
		var r kmsg.Record
		if err := r.ReadFrom(rb.Records); err != nil {
			t.Fatal(err)
		}
		if len(r.Key) != 4 || int16(binary.BigEndian.Uint16(r.Key[2:])) != kind || len(r.Value) != 6 || binary.BigEndian.Uint32(r.Value[2:]) != 3 {
			t.Fatalf("record %+v", r)
		}
		got, err := ControlBatchType(b)
		if err != nil || got != kind {
			t.Fatalf("ControlBatchType = %d, %v", got, err)
		}
		h, err := ParseBatchHeader(b)
		if err != nil || !h.IsControl() || !h.IsTransactional() {
			t.Fatalf("header %+v %v", h, err)
		}
	}
}

func TestControlBatchTypeRefusesOtherRecords(t *testing.T) {
	b := buildBatch(t, CompressionNone, testRecords(1, 1), nil)
	if _, err := ControlBatchType(b); err == nil {
		t.Fatal("a data record read as a marker")
	}
}

func FuzzControlBatchType(f *testing.F) {
	f.Add(AppendControlBatch(nil, 1, 0, ControlCommit, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if kind, err := ControlBatchType(b); err == nil && kind != ControlAbort && kind != ControlCommit {
			t.Fatalf("kind %d", kind)
		}
	})
}

// TestRebuiltBatchKeepsOffsetsAndHeader: records kept from a compressed batch come back,
// uncompressed, at their original offsets, under the original header, with a valid CRC.
func TestRebuiltBatchKeepsOffsetsAndHeader(t *testing.T) {
	for _, codec := range []uint8{CompressionNone, CompressionGzip, CompressionLZ4, CompressionZstd, CompressionSnappy} {
		orig := buildBatch(t, codec, testRecords(6, 20), func(b *kmsg.RecordBatch) {
			b.ProducerID, b.ProducerEpoch, b.FirstSequence = 9, 2, 100
		})
		var kept []Record
		i := 0
		_, err := ForEachRecord(orig, nil, func(r Record) error {
			if i == 1 || i == 4 {
				r.Raw = append([]byte(nil), r.Raw...)
				kept = append(kept, r)
			}
			i++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := AppendRebuiltBatch(nil, orig, kept)
		if !BatchCRCValid(got) {
			t.Fatalf("codec %d: bad CRC", codec)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(got); err != nil {
			t.Fatal(err)
		}
		// testRecords' timestamp deltas are 3 per record: record 4's is 12.
		if rb.Attributes&7 != 0 || rb.NumRecords != 2 || rb.LastOffsetDelta != 5 || rb.ProducerID != 9 || rb.ProducerEpoch != 2 || rb.FirstSequence != 100 || rb.FirstTimestamp != 1700000000000 || rb.MaxTimestamp != 1700000000012 {
			t.Fatalf("codec %d: header %+v", codec, rb)
		}
		var deltas []int32
		if _, err := ForEachRecord(got, nil, func(r Record) error { deltas = append(deltas, r.OffsetDelta); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(deltas) != 2 || deltas[0] != 1 || deltas[1] != 4 {
			t.Fatalf("codec %d: offset deltas %v", codec, deltas)
		}
	}
}
