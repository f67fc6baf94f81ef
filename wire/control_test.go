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
