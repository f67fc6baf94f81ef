package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/wire"
)

// TestCompactedTopicRefusesKeylessRecords: on a topic with cleanup.policy=compact a batch with
// a record without a key is rejected whole, as Kafka's LogValidator.validateKey does:
// INVALID_RECORD, a RecordErrors entry per keyless record, and Kafka's message. An empty key
// is a key. A topic without compaction takes keyless records.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	b := startBroker(t, nil)
	if _, err := b.blog.CreateTopic("progress", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.blog.CreateTopic("both", 1, map[string]string{"cleanup.policy": "compact,delete"}); err != nil {
		t.Fatal(err)
	}
	b.createTopic("plain", 1)
	rc := dialRaw(t, b.addr)

	keyless := plainBatch(4, 1000, "v")
	keyless.records[1].key = nil
	keyless.records[3].key = nil
	for _, topic := range []string{"progress", "both"} {
		p := rc.produceOne(9, topic, 0, keyless.encode())
		if p.ErrorCode != wire.ErrInvalidRecord {
			t.Fatalf("%s: keyless records answered %d, want INVALID_RECORD (87)", topic, p.ErrorCode)
		}
		if len(p.ErrorRecords) != 2 || p.ErrorRecords[0].RelativeOffset != 1 || p.ErrorRecords[1].RelativeOffset != 3 {
			t.Fatalf("%s: record errors %+v, want records 1 and 3", topic, p.ErrorRecords)
		}
		if want := "Compacted topic cannot accept message without key in topic partition " + topic + "-0."; p.ErrorRecords[0].ErrorMessage == nil || *p.ErrorRecords[0].ErrorMessage != want {
			t.Errorf("%s: record error message %v, want %q", topic, p.ErrorRecords[0].ErrorMessage, want)
		}
		if p.ErrorMessage == nil || !strings.HasPrefix(*p.ErrorMessage, "One or more records have been rejected due to 2 record errors") {
			t.Errorf("%s: message %v", topic, p.ErrorMessage)
		}
		if hw := b.highWatermark(topic, 0); hw != 0 {
			t.Fatalf("%s: a rejected batch was stored (high watermark %d)", topic, hw)
		}
	}

	emptyKey := plainBatch(2, 1000, "v")
	emptyKey.records[0].key = []byte{}
	if p := rc.produceOne(9, "progress", 0, emptyKey.encode()); p.ErrorCode != 0 {
		t.Fatalf("an empty key answered %d, want it taken", p.ErrorCode)
	}
	if p := rc.produceOne(9, "plain", 0, keyless.encode()); p.ErrorCode != 0 {
		t.Fatalf("keyless records on a topic without compaction answered %d", p.ErrorCode)
	}
}

// TestCompactionWithAnIdempotentProducer: an idempotent kgo producer writes rounds of the same
// keys to a compacted topic (zstd batches) while compaction passes run between rounds. No
// produce fails (a window lost to compaction would be OUT_OF_ORDER_SEQUENCE_NUMBER); then a
// consumer from the start finds every record at the offset it was acknowledged at, each key
// once below the active segment, and each key's last value.
func TestCompactionWithAnIdempotentProducer(t *testing.T) {
	b := startBroker(t, nil)
	cfg := map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
	if _, err := b.blog.CreateTopic("state", 2, cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const keys, rounds = 40, 12
	type at struct {
		p   int32
		off int64
	}
	acked := map[at]string{} // partition and offset -> value
	last := map[string]string{}
	for round := range rounds {
		var recs []*kgo.Record
		for k := range keys {
			key := fmt.Sprintf("key-%02d", k)
			recs = append(recs, &kgo.Record{Topic: "state", Key: []byte(key), Value: []byte(fmt.Sprintf("%s@%d", key, round))})
		}
		for _, r := range prod.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				t.Fatalf("round %d: produce: %v", round, r.Err)
			}
			acked[at{r.Record.Partition, r.Record.Offset}] = string(r.Record.Value)
			last[string(r.Record.Key)] = string(r.Record.Value)
		}
		time.Sleep(150 * time.Millisecond) // past segment.ms: the round's batches roll
		if err := b.upkeep.EnforceRetention(time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics("state"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]string{}
	perKey := map[string]int{}
	read := 0
	for ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		if fs.Empty() {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if want := acked[at{r.Partition, r.Offset}]; want != string(r.Value) {
				t.Fatalf("partition %d offset %d holds %q, acknowledged %q there", r.Partition, r.Offset, r.Value, want)
			}
			got[string(r.Key)] = string(r.Value)
			perKey[string(r.Key)]++
		})
	}
	for k, v := range last {
		if got[k] != v {
			t.Fatalf("key %s: last value read %q, want %q", k, got[k], v)
		}
	}
	for k, n := range perKey {
		if n > 2 { // once below the active segment, once in it (the last round)
			t.Fatalf("key %s read %d times after compaction", k, n)
		}
	}
	if read >= keys*rounds {
		t.Fatalf("read %d records of %d written: nothing was compacted", read, keys*rounds)
	}
	t.Logf("%d of %d records left after compaction", read, keys*rounds)
}
