package e2e

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestConfluentIdempotentRoundTrip guards librdkafka compatibility: an idempotent
// (enable.idempotence=true, acks=all) producer's records come back unchanged to a librdkafka
// consumer assigned to the partitions from the beginning. librdkafka is strict about
// ApiVersions ranges, null record sets and response layouts, and disables idempotence or
// fails the producer fatally where the broker gets them wrong.
func TestConfluentIdempotentRoundTrip(t *testing.T) {
	b := startBroker(t, nil)
	const (
		topic      = "confluent"
		partitions = 3
		n          = 300
	)
	b.createTopic(topic, partitions)
	deadline := time.Now().Add(45 * time.Second)

	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":  b.addr,
		"enable.idempotence": true,
		"acks":               "all",
		"linger.ms":          5,
		"batch.size":         16 << 10,
		"compression.codec":  "lz4",
		"log_level":          3,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Fatal producer errors (for example an idempotence violation) arrive as events.
	fatal := make(chan error, 1)
	go func() {
		for e := range p.Events() {
			if ke, ok := e.(kafka.Error); ok && ke.IsFatal() {
				select {
				case fatal <- ke:
				default:
				}
			}
		}
	}()

	recs := makeRecords(n, partitions, "confluent")
	dr := make(chan kafka.Event, n)
	tpc := topic
	for _, r := range recs {
		m := &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &tpc, Partition: r.partition},
			Key:            r.key,
			Value:          r.value,
			Opaque:         r,
		}
		for _, h := range r.headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.key, Value: []byte(h.value)})
		}
		if err := p.Produce(m, dr); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	for i := 0; i < n; i++ {
		select {
		case e := <-dr:
			m := e.(*kafka.Message)
			if m.TopicPartition.Error != nil {
				t.Fatalf("delivery: %v", m.TopicPartition.Error)
			}
			m.Opaque.(*rec).offset = int64(m.TopicPartition.Offset)
		case err := <-fatal:
			t.Fatalf("fatal producer error: %v", err)
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%d of %d delivery reports before the deadline", i, n)
		}
	}

	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":  b.addr,
		"group.id":           "inlet-e2e-unused", // required by the Go binding; no group APIs are used
		"enable.auto.commit": false,
		"auto.offset.reset":  "earliest",
		"log_level":          3,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tps []kafka.TopicPartition
	for i := int32(0); i < partitions; i++ {
		tps = append(tps, kafka.TopicPartition{Topic: &tpc, Partition: i, Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(tps); err != nil {
		t.Fatal(err)
	}
	var consumed []got
	for len(consumed) < n {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d of %d records before the deadline", len(consumed), n)
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				t.Fatalf("consume: %v", e.TopicPartition.Error)
			}
			g := got{partition: e.TopicPartition.Partition, offset: int64(e.TopicPartition.Offset), key: e.Key, value: e.Value}
			for _, h := range e.Headers {
				g.headers = append(g.headers, header{h.Key, string(h.Value)})
			}
			consumed = append(consumed, g)
		case kafka.Error:
			if e.IsFatal() {
				t.Fatalf("consumer: %v", e)
			}
			t.Logf("consumer: %v", e)
		}
	}
	checkRecords(t, recs, consumed)
}
