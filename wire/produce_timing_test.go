package wire

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchProduceBody is a v9 Produce request of 16 partitions, each one
// uncompressed batch of about 16 KiB (16 records of 1 KiB random values).
func benchProduceBody(b *testing.B, codec uint8) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench"
	for p := range 16 {
		recs := make([]kmsg.Record, 16)
		for i := range recs {
			recs[i].OffsetDelta = int32(i)
			recs[i].Key = fmt.Appendf(nil, "key-%d", i)
			recs[i].Value = make([]byte, 1<<10)
			for j := range recs[i].Value {
				recs[i].Value[j] = byte('a' + rng.IntN(8)) // compressible, not trivially
			}
		}
		t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{
			Partition: int32(p),
			Records:   buildBatch(b, codec, recs, nil),
		})
	}
	req.Topics = append(req.Topics, t)
	return req.AppendTo(nil)
}

// BenchmarkDecodeValidate is the broker's per-request hot path: decode the
// request and validate every partition's batch (including its CRC).
func BenchmarkDecodeValidate(b *testing.B) {
	body := benchProduceBody(b, CompressionNone)
	var r ProduceRequest
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Decode(body, 9); err != nil {
			b.Fatal(err)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if _, code, msg := ValidateProduceBatch(p.Records, 1<<20); code != ErrNone {
					b.Fatal(code, msg)
				}
			}
		}
	}
}

// BenchmarkForEachRecord iterates every record of the same request, per
// codec, reusing one scratch buffer.
func BenchmarkForEachRecord(b *testing.B) {
	for _, codec := range []uint8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		b.Run(codecName(codec), func(b *testing.B) {
			body := benchProduceBody(b, codec)
			var r ProduceRequest
			if err := r.Decode(body, 9); err != nil {
				b.Fatal(err)
			}
			var scratch []byte
			n := 0
			b.SetBytes(16 * 16 << 10) // uncompressed record bytes, roughly
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range r.Topics[0].Partitions {
					var err error
					scratch, err = ForEachRecord(p.Records, scratch, func(rec Record) error {
						n += len(rec.Value)
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func BenchmarkProduceResponseAppendTo(b *testing.B) {
	var r ProduceResponse
	t := r.AppendTopic([]byte("bench"))
	for p := range 16 {
		t.AppendPartition(int32(p)).BaseOffset = int64(p) << 20
	}
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		dst = r.AppendTo(dst[:0], 9)
	}
	b.SetBytes(int64(len(dst)))
}

// BenchmarkValidateRecords is the record walk the produce path adds after
// ValidateProduceBatch, per codec: 16 batches of 150 records, reusing one
// scratch buffer. "uniform" batches are the server's BenchmarkProducePath
// shape (100-byte values, no key, no headers, as a load generator sends);
// "mixed" ones are testRecords' (null, empty and set keys, tombstones,
// headers on every other record).
func BenchmarkValidateRecords(b *testing.B) {
	uniform := make([]kmsg.Record, 150)
	for i := range uniform {
		uniform[i] = kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Value: make([]byte, 100)}
	}
	for _, shape := range []struct {
		name string
		recs []kmsg.Record
	}{{"uniform", uniform}, {"mixed", testRecords(150, 100)}} {
		for _, codec := range []uint8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
			b.Run(shape.name+"/"+codecName(codec), func(b *testing.B) { benchValidateRecords(b, codec, shape.recs) })
		}
	}
}

func benchValidateRecords(b *testing.B, codec uint8, recs []kmsg.Record) {
	var batches [][]byte
	var headers []BatchHeader
	for range 16 {
		bb := buildBatch(b, codec, recs, nil)
		h, code, msg := ValidateProduceBatch(bb, 1<<20)
		if code != ErrNone {
			b.Fatal(code, msg)
		}
		batches, headers = append(batches, bb), append(headers, h)
	}
	var scratch []byte
	b.SetBytes(int64(16 * len(recs) * 100)) // record values, roughly
	b.ReportAllocs()
	for b.Loop() {
		for i := range batches {
			var code int16
			if scratch, code, _ = ValidateRecords(batches[i], &headers[i], scratch); code != ErrNone {
				b.Fatal(code)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16*len(recs)), "ns/record")
}
