package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRestartKeepsRecordsAndOffsets guards recovery: after a clean Shutdown and Close, a node
// reopened on the same directory serves every acknowledged record, the same high
// watermarks, and continues offsets where they stopped, both for the idempotent producer
// that was connected across the restart (its sequence state must have survived, or it sees
// OUT_OF_ORDER_SEQUENCE_NUMBER) and for a new one.
func TestRestartKeepsRecordsAndOffsets(t *testing.T) {
	b := startBroker(t, nil)
	const (
		topic      = "restart"
		partitions = 3
	)
	b.createTopic(topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	prod, err := kgo.NewClient(
		kgo.SeedBrokers(b.addr),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerBatchMaxBytes(8<<10),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	first := makeRecords(240, partitions, "before")
	kgoProduce(ctx, t, prod, topic, first)
	hws := make([]int64, partitions)
	for p := range hws {
		hws[p] = b.highWatermark(topic, int32(p))
	}

	b.restart()

	for p, want := range hws {
		if hw := b.highWatermark(topic, int32(p)); hw != want {
			t.Errorf("partition %d high watermark %d after restart, was %d", p, hw, want)
		}
	}
	// ListOffsets over the wire agrees.
	rc := dialRaw(t, b.addr)
	for p, want := range hws {
		resp := rc.roundTrip(listOffsetsReq(6, topic, int32(p), -1)).(*kmsg.ListOffsetsResponse)
		if got := resp.Topics[0].Partitions[0].Offset; got != want {
			t.Errorf("partition %d: ListOffsets latest %d after restart, want %d", p, got, want)
		}
	}
	checkRecords(t, first, kgoConsume(ctx, t, b.addr, topic, partitions, len(first)))

	// The producer that saw the restart keeps going; its offsets continue the old ones.
	second := makeRecords(120, partitions, "after")
	kgoProduce(ctx, t, prod, topic, second)
	// And a producer that starts now gets a fresh producer id and follows on.
	fresh, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	third := makeRecords(60, partitions, "fresh")
	kgoProduce(ctx, t, fresh, topic, third)

	all := append(append(append([]*rec(nil), first...), second...), third...)
	// Restart once more, then everything reads back in order at dense offsets.
	b.restart()
	checkRecords(t, all, kgoConsume(ctx, t, b.addr, topic, partitions, len(all)))
	for p := int32(0); p < partitions; p++ {
		if hw, want := b.highWatermark(topic, p), int64(len(all)/partitions); hw != want {
			t.Errorf("partition %d high watermark %d, want %d", p, hw, want)
		}
	}
}
