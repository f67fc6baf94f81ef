package server

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/schema"
)

const benchAvro = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"amount","type":"double"},{"name":"note","type":"string"}]}`

// avroBatch is an uncompressed batch of n records, each an Order in Confluent wire format
// with schema id id (about 100 bytes per value).
func avroBatch(n, id int) []byte {
	s := avro.MustParse(benchAvro)
	rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000000,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), PartitionLeaderEpoch: -1}
	for i := 0; i < n; i++ {
		payload, err := avro.Marshal(s, map[string]any{"id": int64(i), "amount": 1.5, "note": strings.Repeat("n", 80)})
		if err != nil {
			panic(err)
		}
		v := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(v[1:], uint32(id))
		v = append(v, payload...)
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		rb.Records = r.AppendTo(rb.Records)
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// BenchmarkProduceValidation is the cost of Avro validation on the produce path: the same
// request (16 partitions x 150 Avro records of ~100 bytes) through decode, validation, a
// discard log and the reply, with the topic bound to the schema ("avro") and not ("off").
// ns/op divided by 2400 records is the per-record cost; the difference between the two is
// what validation adds.
func BenchmarkProduceValidation(b *testing.B) {
	reg, err := schema.New([]schema.Def{{Subject: "bench-value", Text: benchAvro}}, []schema.Binding{{Topic: "bench", ValueSubject: "bench-value"}})
	if err != nil {
		b.Fatal(err)
	}
	sub, _ := reg.Subject("bench-value")
	frame := produceFrame("bench", 16, avroBatch(150, sub.Latest().ID))
	for _, mode := range []struct {
		name string
		reg  *schema.Registry
	}{{"off", nil}, {"avro", reg}} {
		b.Run(mode.name, func(b *testing.B) {
			blog, err := batchlog.Open(batchlog.Options{Dir: b.TempDir(), Discard: true})
			if err != nil {
				b.Fatal(err)
			}
			defer blog.Close()
			s := &Server{cfg: Config{AutoCreateTopics: true, Schemas: mode.reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
			s.cfg.setDefaults()
			s.log, s.blog = s.cfg.Logger, blog
			c, rc := benchConn(b, s)
			var errCode bool
			run := func() {
				inject(s, c, frame)
				<-rc.written
			}
			for i := 0; i < 20; i++ {
				run()
			}
			if t, ok := blog.Topic("bench"); !ok || t.Partitions[0].HighWatermark() == 0 {
				errCode = true
			}
			if errCode {
				b.Fatal("warm-up batches were not accepted")
			}
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2400, "ns/record")
		})
	}
}
