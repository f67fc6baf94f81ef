package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"unsafe"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codecs as the tests build them. snappyXerial is not a batch attribute:
// it is snappy (2) framed the way Kafka's Java producer frames it.
const snappyXerial = 0x12

var testCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// testRecords returns n records with a mix of null, empty and set keys,
// values of a few sizes, and headers on some of them.
func testRecords(n, valueSize int) []kmsg.Record {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		r := &recs[i]
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = int64(i * 3)
		switch i % 3 {
		case 0: // null key
		case 1:
			r.Key = []byte{}
		case 2:
			r.Key = []byte(fmt.Sprintf("key-%d", i))
		}
		r.Value = bytes.Repeat([]byte{byte('a' + i%26)}, valueSize+i%7)
		if i%4 == 3 {
			r.Value = nil // tombstone
		}
		if i%2 == 1 {
			r.Headers = []kmsg.Header{{Key: "h1", Value: []byte("v1")}, {Key: "", Value: nil}}
		}
	}
	return recs
}

// encodeRecords appends recs as DefaultRecords, filling in each Length.
func encodeRecords(recs []kmsg.Record) []byte {
	var raw []byte
	for _, r := range recs {
		r.Length = 0
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a zero Length is one varint byte
		raw = r.AppendTo(raw)
	}
	return raw
}

// compress compresses raw with codec the way the clients do.
func compress(tb testing.TB, codec uint8, raw []byte) []byte {
	tb.Helper()
	switch codec {
	case CompressionNone:
		return raw
	case CompressionGzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		return buf.Bytes()
	case CompressionSnappy:
		return s2.EncodeSnappy(nil, raw)
	case snappyXerial:
		return xerialEncode(raw, 32<<10)
	case CompressionLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		return buf.Bytes()
	case CompressionZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			tb.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(raw, nil)
	}
	tb.Fatalf("unknown codec %d", codec)
	return nil
}

// xerialEncode frames raw as snappy-java's SnappyOutputStream does: the
// magic, version 1, compatible version 1, then length-prefixed blocks.
func xerialEncode(raw []byte, block int) []byte {
	out := append([]byte{}, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(raw) > 0 {
		n := min(block, len(raw))
		b := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
		raw = raw[n:]
	}
	return out
}

// buildBatch builds a valid magic 2 batch holding recs compressed with
// codec, as a producer would send it: base offset 0, no producer id. mod,
// when set, edits the header before the length and CRC are computed;
// setting Length or CRC there has no effect.
func buildBatch(tb testing.TB, codec uint8, recs []kmsg.Record, mod func(*kmsg.RecordBatch)) []byte {
	tb.Helper()
	attrs := int16(codec)
	if codec == snappyXerial {
		attrs = CompressionSnappy
	}
	b := kmsg.RecordBatch{
		Magic:           2,
		Attributes:      attrs,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  1700000000000,
		MaxTimestamp:    1700000000000 + int64(3*(len(recs)-1)),
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(recs)),
		Records:         compress(tb, codec, encodeRecords(recs)),
	}
	if mod != nil {
		mod(&b)
	}
	return finishBatch(&b)
}

// finishBatch encodes b with its Length and CRC computed.
func finishBatch(b *kmsg.RecordBatch) []byte {
	b.Length = int32(RecordBatchOverhead - logOverhead + len(b.Records))
	out := b.AppendTo(nil)
	fixCRC(out)
	return out
}

// fixCRC rewrites the CRC of a batch after an edit.
func fixCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], testCastagnoli))
}

// within reports whether sub lies inside whole's memory (len, not cap).
// nil and empty slices are within anything.
func within(sub, whole []byte) bool {
	if len(sub) == 0 {
		return true
	}
	if len(whole) == 0 {
		return false
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	w := uintptr(unsafe.Pointer(unsafe.SliceData(whole)))
	return s >= w && s+uintptr(len(sub)) <= w+uintptr(len(whole))
}

// testProduceRequest builds a kmsg Produce request of version v with
// several topics and partitions, null and empty records, a transactional id
// on odd versions, and unknown tagged fields everywhere when flexible, so
// that the decoder has to skip them.
func testProduceRequest(tb testing.TB, v int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = v
	req.Acks = -1
	req.TimeoutMillis = 30000 + int32(v)
	if v%2 == 1 {
		req.TransactionID = kmsg.StringPtr("txn-" + fmt.Sprint(v))
	}
	flex := v >= firstFlexibleProduce
	if flex {
		req.UnknownTags.Set(7, []byte("top"))
	}
	codecs := []uint8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	for ti := range 3 {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = fmt.Sprintf("topic-%d", ti)
		if ti == 2 {
			t.Topic = "" // empty, not null
		}
		if flex && ti == 1 {
			t.UnknownTags.Set(1, []byte{1, 2, 3})
			t.UnknownTags.Set(300, nil)
		}
		for pi := range 4 {
			p := kmsg.NewProduceRequestTopicPartition()
			p.Partition = int32(pi*10 + ti)
			switch pi {
			case 0, 1:
				p.Records = buildBatch(tb, codecs[(ti+pi)%len(codecs)], testRecords(3+pi, 20), nil)
			case 2:
				p.Records = nil
			case 3:
				p.Records = []byte{}
			}
			if flex && pi == 1 {
				p.UnknownTags.Set(2, bytes.Repeat([]byte{9}, 200))
			}
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}
