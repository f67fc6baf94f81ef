package server

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// compressedTestBatch is testBatch's batch (n records of size-byte values) with its records
// compressed by codec (1 gzip, 2 snappy, 3 lz4, 4 zstd), as a producer sends it.
func compressedTestBatch(tb testing.TB, codec int16, n, size int) []byte {
	tb.Helper()
	var raw []byte
	value := bytes.Repeat([]byte("inlet "), size/6+1)[:size]
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: value}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	var payload []byte
	switch codec {
	case 1:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		payload = buf.Bytes()
	case 2:
		payload = s2.EncodeSnappy(nil, raw)
	case 3:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		payload = buf.Bytes()
	case 4:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			tb.Fatal(err)
		}
		payload = enc.EncodeAll(raw, nil)
		enc.Close()
	default:
		tb.Fatalf("codec %d", codec)
	}
	rb := kmsg.RecordBatch{Magic: 2, Attributes: codec, LastOffsetDelta: int32(n - 1), FirstTimestamp: 1700000000000,
		MaxTimestamp: 1700000000000, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n),
		PartitionLeaderEpoch: -1, Records: payload}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
