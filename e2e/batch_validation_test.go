package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// compressBatch returns b (an uncompressed batch from batchSpec.encode) with its records
// compressed by codec (1 gzip, 2 snappy, 3 lz4, 4 zstd) and its length, attributes and CRC
// set to match.
func compressBatch(t testing.TB, b []byte, codec int16) []byte {
	t.Helper()
	raw := b[batchHeaderLen:]
	var payload []byte
	switch codec {
	case 1:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		payload = buf.Bytes()
	case 2:
		payload = s2.EncodeSnappy(nil, raw)
	case 3:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		payload = buf.Bytes()
	case 4:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		payload = enc.EncodeAll(raw, nil)
		enc.Close()
	default:
		t.Fatalf("codec %d", codec)
	}
	out := append(append([]byte{}, b[:batchHeaderLen]...), payload...)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-12))
	attrs := binary.BigEndian.Uint16(out[offAttributes:])
	binary.BigEndian.PutUint16(out[offAttributes:], attrs&^7|uint16(codec))
	fixCRC(out)
	return out
}

// claimRecords rewrites a batch's header to claim n records (record count and last offset
// delta agreeing, so every header check passes) and fixes its CRC.
func claimRecords(b []byte, n int32) []byte {
	b = append([]byte{}, b...)
	binary.BigEndian.PutUint32(b[offNumRecords:], uint32(n))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(n-1))
	fixCRC(b)
	return b
}

// TestProduceTwoBillionRecordClaimIsRefused guards against trusted batch headers: a CRC-valid
// batch whose header claims 2,000,000,000 records, with the last offset delta to match, holding
// one record, used to be accepted and move the high watermark by two billion. Kafka walks the
// records (DefaultRecordBatch's iterator: "premature EOF"): INVALID_RECORD, with the message
// from v8, the high watermark unchanged, and the connection still serving. So for the other
// lies the header checks cannot see, compressed or not, over raw Produce requests.
func TestProduceTwoBillionRecordClaimIsRefused(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "batch-lies"
	b.createTopic(topic, 1)
	rc := dialRaw(t, b.addr)

	// A valid batch first, so that the high watermark to keep is not 0.
	if p := rc.produceOne(9, topic, 0, plainBatch(2, 1000, "before").encode()); p.ErrorCode != 0 {
		t.Fatalf("valid batch: error %d", p.ErrorCode)
	}
	const hw = 2
	if got := b.highWatermark(topic, 0); got != hw {
		t.Fatalf("high watermark %d after one batch of 2, want %d", got, hw)
	}

	cases := []struct {
		name  string
		batch []byte
	}{
		{"count 2,000,000,000 holding one record", claimRecords(plainBatch(1, 1000, "one").encode(), 2_000_000_000)},
		{"count one too high", claimRecords(plainBatch(3, 1000, "three").encode(), 4)},
		{"count too low", claimRecords(plainBatch(3, 1000, "three").encode(), 2)},
		{"offset delta gap", offsetDeltaGapBatch(t)},
		{"trailing bytes", func() []byte {
			bb := append(plainBatch(2, 1000, "trail").encode(), 0, 0, 0, 0)
			binary.BigEndian.PutUint32(bb[offLength:], uint32(len(bb)-12))
			fixCRC(bb)
			return bb
		}()},
		{"record length lie", func() []byte {
			bb := plainBatch(2, 1000, "len").encode()
			bb[batchHeaderLen] += 2 // the first record's length varint (zigzag: one more byte)
			fixCRC(bb)
			return bb
		}()},
	}
	for codec := int16(1); codec <= 4; codec++ {
		cases = append(cases,
			struct {
				name  string
				batch []byte
			}{"compressed (" + []string{"", "gzip", "snappy", "lz4", "zstd"}[codec] + ") count 2,000,000,000",
				compressBatch(t, claimRecords(plainBatch(1, 1000, "one").encode(), 2_000_000_000), codec)},
			struct {
				name  string
				batch []byte
			}{"compressed (" + []string{"", "gzip", "snappy", "lz4", "zstd"}[codec] + ") bad inner record",
				compressBatch(t, func() []byte {
					bb := plainBatch(2, 1000, "inner").encode()
					bb[batchHeaderLen] += 2
					return bb
				}(), codec)})
	}
	for _, c := range cases {
		for _, version := range []int16{3, 8, 12} {
			req := produceReq(version, -1, topic, 0, c.batch)
			resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
			p := resp.Topics[0].Partitions[0]
			want := int16(87) // INVALID_RECORD
			if binary.BigEndian.Uint16(c.batch[offAttributes:])&7 == 4 && version < 7 {
				want = 76 // UNSUPPORTED_COMPRESSION_TYPE: zstd needs v7 (KIP-110), checked first
			}
			if p.ErrorCode != want {
				msg := "<nil>"
				if p.ErrorMessage != nil {
					msg = *p.ErrorMessage
				}
				t.Errorf("%s, v%d: error %d (%s), want %d", c.name, version, p.ErrorCode, msg, want)
			}
			if version >= 8 && (p.ErrorMessage == nil || *p.ErrorMessage == "") {
				t.Errorf("%s, v%d: no error message", c.name, version)
			}
			if p.BaseOffset != -1 {
				t.Errorf("%s, v%d: base offset %d on an error", c.name, version, p.BaseOffset)
			}
		}
	}
	rc.alive()
	if got := b.highWatermark(topic, 0); got != hw {
		t.Fatalf("high watermark %d after the refused batches, want %d", got, hw)
	}
	// The connection and the partition go on: a valid batch lands right after the first.
	if p := rc.produceOne(9, topic, 0, plainBatch(1, 1000, "after").encode()); p.ErrorCode != 0 || p.BaseOffset != hw {
		t.Fatalf("valid batch after the refused ones: error %d, base offset %d, want 0 at %d", p.ErrorCode, p.BaseOffset, hw)
	}
}

// offsetDeltaGapBatch is a batch of three records whose offset deltas are 0, 1, 3: the header
// agrees with three records, so only the walk sees it.
func offsetDeltaGapBatch(t testing.TB) []byte {
	t.Helper()
	var recs []byte
	for i, delta := range []int64{0, 1, 3} {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, delta)
		body = binary.AppendVarint(body, -1)
		body = binary.AppendVarint(body, 1)
		body = append(body, 'v')
		body = binary.AppendVarint(body, 0)
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	s := plainBatch(3, 1000, "gap").encode()
	out := append(append([]byte{}, s[:batchHeaderLen]...), recs...)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-12))
	fixCRC(out)
	return out
}

// TestProduceCompressedBatchesFromKgoAreAccepted: the record walk decompresses every
// compressed batch, so each codec a real client writes must still go through and read back.
func TestProduceCompressedBatchesFromKgoAreAccepted(t *testing.T) {
	b := startBroker(t, nil)
	for name, codec := range map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()} {
		topic := "kgo-compressed-" + name
		b.createTopic(topic, 2)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ProducerBatchCompression(codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		recs := makeRecords(500, 2, topic)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		kgoProduce(ctx, t, cl, topic, recs)
		cl.Close()
		got := kgoConsume(ctx, t, b.addr, topic, 2, len(recs))
		cancel()
		checkRecords(t, recs, got)
	}
}
