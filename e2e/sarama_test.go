package e2e

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSaramaRoundTripLosesNoBytes guards compatibility with sarama, which picks request
// versions from its configured Kafka version rather than from ApiVersions alone: a
// SyncProducer's records (record batches v2, so Kafka >= 2.1) come back unchanged through
// ConsumePartition at the offsets the producer was told.
func TestSaramaRoundTripLosesNoBytes(t *testing.T) {
	b := startBroker(t, nil)
	cases := []struct {
		name       string
		version    sarama.KafkaVersion
		idempotent bool
		codec      sarama.CompressionCodec
	}{
		{"2.1/idempotent", sarama.V2_1_0_0, true, sarama.CompressionNone},
		{"3.6/idempotent/zstd", sarama.V3_6_0_0, true, sarama.CompressionZSTD},
		{"3.6/plain/snappy", sarama.V3_6_0_0, false, sarama.CompressionSnappy},
	}
	const (
		partitions = 3
		n          = 150
	)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := fmt.Sprintf("sarama-%d", i)
			b.createTopic(topic, partitions)
			cfg := sarama.NewConfig()
			cfg.Version = c.version
			cfg.ClientID = "inlet-e2e"
			cfg.Net.DialTimeout = 5 * time.Second
			cfg.Net.ReadTimeout = 10 * time.Second
			cfg.Net.WriteTimeout = 10 * time.Second
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Partitioner = sarama.NewManualPartitioner
			cfg.Producer.Compression = c.codec
			if c.idempotent {
				cfg.Producer.Idempotent = true
				cfg.Net.MaxOpenRequests = 1
			}
			cfg.Consumer.Return.Errors = true
			cfg.Consumer.MaxWaitTime = 200 * time.Millisecond

			prod, err := sarama.NewSyncProducer([]string{b.addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			recs := makeRecords(n, partitions, c.name)
			msgs := make([]*sarama.ProducerMessage, n)
			for i, r := range recs {
				m := &sarama.ProducerMessage{Topic: topic, Partition: r.partition, Value: sarama.ByteEncoder(r.value)}
				if r.key != nil {
					m.Key = sarama.ByteEncoder(r.key)
				}
				for _, h := range r.headers {
					m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.key), Value: []byte(h.value)})
				}
				msgs[i] = m
			}
			// Half one at a time, half as one SendMessages call (several records per batch).
			for i, m := range msgs[:n/2] {
				p, off, err := prod.SendMessage(m)
				if err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				if p != recs[i].partition {
					t.Fatalf("record %d went to partition %d", i, p)
				}
				recs[i].offset = off
			}
			if err := prod.SendMessages(msgs[n/2:]); err != nil {
				t.Fatalf("send messages: %v", err)
			}
			for i, m := range msgs[n/2:] {
				recs[n/2+i].offset = m.Offset
			}

			cons, err := sarama.NewConsumer([]string{b.addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			var consumed []got
			deadline := time.After(30 * time.Second)
			for p := int32(0); p < partitions; p++ {
				pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
				if err != nil {
					t.Fatal(err)
				}
				want := 0
				for _, r := range recs {
					if r.partition == p {
						want++
					}
				}
				for have := 0; have < want; have++ {
					select {
					case m := <-pc.Messages():
						g := got{partition: m.Partition, offset: m.Offset, key: m.Key, value: m.Value}
						for _, h := range m.Headers {
							g.headers = append(g.headers, header{string(h.Key), string(h.Value)})
						}
						consumed = append(consumed, g)
					case err := <-pc.Errors():
						t.Fatalf("consume partition %d: %v", p, err)
					case <-deadline:
						t.Fatalf("partition %d: %d of %d records before the deadline", p, have, want)
					}
				}
				if err := pc.Close(); err != nil && err != io.EOF {
					t.Errorf("close partition consumer: %v", err)
				}
			}
			checkRecords(t, recs, consumed)
		})
	}
}
