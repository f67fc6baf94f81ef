package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKgoRoundTripLosesNoBytes guards the produce and fetch paths against any change to what a
// franz-go producer sends: for every codec, idempotent or not, the records read back (under
// both isolation levels) are the ones produced, byte for byte, at dense offsets from 0, and
// at the offsets the producer was told.
func TestKgoRoundTripLosesNoBytes(t *testing.T) {
	b := startBroker(t, nil)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	const (
		partitions = 3
		n          = 300
	)
	for _, c := range codecs {
		for _, idempotent := range []bool{true, false} {
			name := fmt.Sprintf("%s/idempotent=%v", c.name, idempotent)
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				topic := fmt.Sprintf("kgo-%s-%v", c.name, idempotent)
				// Auto-created by the producer's metadata request, with the broker's default
				// partition count (4); the test writes only to the first three.
				opts := []kgo.Opt{
					kgo.SeedBrokers(b.addr),
					kgo.AllowAutoTopicCreation(),
					kgo.ProducerBatchCompression(c.codec),
					kgo.RecordPartitioner(kgo.ManualPartitioner()),
					kgo.ProducerLinger(5 * time.Millisecond),
					// Several batches per partition, so batch boundaries are exercised.
					kgo.ProducerBatchMaxBytes(16 << 10),
				}
				if !idempotent {
					opts = append(opts, kgo.DisableIdempotentWrite())
				}
				cl, err := kgo.NewClient(opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				recs := makeRecords(n, partitions, name)
				kgoProduce(ctx, t, cl, topic, recs)
				for _, iso := range []struct {
					name  string
					level kgo.IsolationLevel
				}{{"read_uncommitted", kgo.ReadUncommitted()}, {"read_committed", kgo.ReadCommitted()}} {
					consumed := kgoConsume(ctx, t, b.addr, topic, partitions, n, kgo.FetchIsolationLevel(iso.level))
					t.Run(iso.name, func(t *testing.T) { checkRecords(t, recs, consumed) })
				}
				if tp, ok := b.blog.Topic(topic); !ok || len(tp.Partitions) != 4 {
					t.Errorf("auto-created topic: exists=%v; want 4 partitions", ok)
				}
			})
		}
	}
}
