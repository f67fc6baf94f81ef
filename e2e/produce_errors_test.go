package e2e

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

// TestProduceBadBatchAnswersKafkaCodeAndKeepsConnection guards the second tier of errors: a
// semantically bad produce is answered with the per-partition code Kafka gives (and, from v8,
// an error message), nothing of it is stored, and the connection keeps serving.
func TestProduceBadBatchAnswersKafkaCodeAndKeepsConnection(t *testing.T) {
	const maxMessage = 8 << 10
	b := startBroker(t, func(c *server.Config) { c.MaxMessageBytes = maxMessage })
	const topic = "produce-errors"
	b.createTopic(topic, 2)

	good := func() []byte { return plainBatch(3, 1000, "good").encode() }
	cases := []struct {
		name      string
		acks      int16
		topic     string
		partition int32
		batch     func() []byte
		want      int16
	}{
		{name: "bad CRC", batch: func() []byte {
			bb := good()
			bb[len(bb)-1] ^= 0xff
			return bb
		}, want: 2}, // CORRUPT_MESSAGE
		{name: "magic 1", batch: func() []byte {
			bb := good()
			bb[offMagic] = 1
			return bb
		}, want: 87}, // INVALID_RECORD: v3+ only carries magic 2
		{name: "magic 3", batch: func() []byte {
			bb := good()
			bb[offMagic] = 3
			return bb
		}, want: 2}, // CORRUPT_MESSAGE: not a magic at all
		{name: "lastOffsetDelta does not match the record count", batch: func() []byte {
			bb := good()
			binary.BigEndian.PutUint32(bb[offLastOffsetDelta:], 5)
			fixCRC(bb)
			return bb
		}, want: 87},
		{name: "record count zero", batch: func() []byte {
			bb := good()
			binary.BigEndian.PutUint32(bb[offNumRecords:], 0)
			fixCRC(bb)
			return bb
		}, want: 87},
		{name: "client control batch", batch: func() []byte {
			s := plainBatch(1, 1000, "ctl")
			s.attributes = 0x20
			return s.encode()
		}, want: 87},
		{name: "non-zero base offset", batch: func() []byte {
			bb := good()
			binary.BigEndian.PutUint64(bb, 42) // outside the CRC
			return bb
		}, want: 87},
		{name: "producer id without a sequence", batch: func() []byte {
			return plainBatch(1, 1000, "seq").idempotent(7, 0, -1).encode()
		}, want: 87},
		{name: "two batches in one partition", batch: func() []byte {
			return append(good(), good()...)
		}, want: 87},
		{name: "truncated batch", batch: func() []byte {
			bb := good()
			return bb[:len(bb)-3]
		}, want: 87},
		{name: "no records", batch: func() []byte { return nil }, want: 87},
		{name: "length under the minimum record overhead", batch: func() []byte {
			bb := good()
			binary.BigEndian.PutUint32(bb[offLength:], 13)
			return bb
		}, want: 2},
		{name: "unknown compression codec", batch: func() []byte {
			s := plainBatch(1, 1000, "codec")
			s.attributes = 6
			return s.encode()
		}, want: 76}, // UNSUPPORTED_COMPRESSION_TYPE
		{name: "batch larger than max message bytes", batch: func() []byte {
			s := plainBatch(1, 1000, "big")
			s.records[0].value = make([]byte, maxMessage)
			return s.encode()
		}, want: 10}, // MESSAGE_TOO_LARGE
		{name: "acks 2", acks: 2, batch: good, want: 21},   // INVALID_REQUIRED_ACKS
		{name: "acks -2", acks: -2, batch: good, want: 21}, // INVALID_REQUIRED_ACKS
		{name: "unknown partition", partition: 99, batch: good, want: 3},
		{name: "negative partition", partition: -1, batch: good, want: 3},
		{name: "invalid topic name", topic: "bad/name", batch: good, want: 17}, // INVALID_TOPIC_EXCEPTION
	}
	rc := dialRaw(t, b.addr)
	for _, version := range []int16{3, 7, 8, 9, 12} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("v%d/%s", version, c.name), func(t *testing.T) {
				acks := c.acks
				if acks == 0 {
					acks = -1
				}
				tp := c.topic
				if tp == "" {
					tp = topic
				}
				req := produceReq(version, acks, tp, c.partition, c.batch())
				resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Fatalf("response has %d topics; want the one asked about", len(resp.Topics))
				}
				p := resp.Topics[0].Partitions[0]
				if p.Partition != c.partition || resp.Topics[0].Topic != tp {
					t.Errorf("response names %s/%d, want %s/%d", resp.Topics[0].Topic, p.Partition, tp, c.partition)
				}
				if p.ErrorCode != c.want {
					msg := "<nil>"
					if p.ErrorMessage != nil {
						msg = *p.ErrorMessage
					}
					t.Errorf("error code %d (%s), want %d", p.ErrorCode, msg, c.want)
				}
				if p.BaseOffset != -1 {
					t.Errorf("base offset %d on an error, want -1", p.BaseOffset)
				}
				// Kafka fills ErrorMessage from v8 (KIP-467); INVALID_REQUIRED_ACKS and
				// unknown-partition answers carry no message there either.
				if version >= 8 && (c.want == 2 || c.want == 87 || c.want == 10 || c.want == 76) {
					if p.ErrorMessage == nil || *p.ErrorMessage == "" {
						t.Errorf("v%d answer carries no error message", version)
					}
				}
				// The connection still serves, and still takes a valid produce.
				rc.alive()
				if ok := rc.produceOne(version, topic, 1, good()); ok.ErrorCode != 0 {
					t.Errorf("valid produce after the bad one: error %d", ok.ErrorCode)
				}
			})
		}
	}
	// Nothing of a refused batch was stored: partition 0 received only refused batches, and
	// partition 1 exactly the valid ones (3 records each).
	if hw := b.highWatermark(topic, 0); hw != 0 {
		t.Errorf("partition 0 high watermark %d after only refused batches, want 0", hw)
	}
	if hw, want := b.highWatermark(topic, 1), int64(3*5*len(cases)); hw != want {
		t.Errorf("partition 1 high watermark %d, want %d", hw, want)
	}
	if _, ok := b.blog.Topic("bad/name"); ok {
		t.Errorf("a topic with an invalid name was created")
	}
}

// TestProduceZstdNeedsV7 guards KIP-110: zstd batches may only arrive in Produce v7+, since
// an older client could not read them back; below v7 the answer is
// UNSUPPORTED_COMPRESSION_TYPE (ProduceRequest.validateRecords) and nothing is stored.
func TestProduceZstdNeedsV7(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "zstd-versions"
	b.createTopic(topic, 1)
	rc := dialRaw(t, b.addr)
	// A real zstd batch: the broker decompresses every batch to walk its records.
	zstd := func() []byte { return compressBatch(t, plainBatch(1, 1000, "z").encode(), 4) }
	stored := int64(0)
	for v := int16(3); v <= 12; v++ {
		p := rc.produceOne(v, topic, 0, zstd())
		want := int16(0)
		if v < 7 {
			want = 76
		}
		if p.ErrorCode != want {
			t.Errorf("v%d: error %d, want %d", v, p.ErrorCode, want)
		}
		if p.ErrorCode == 0 {
			stored++
		}
	}
	if hw := b.highWatermark(topic, 0); hw != stored || hw != 6 {
		t.Errorf("high watermark %d; want 6 (v7-v12 only)", hw)
	}
}

// TestProduceBadPartitionDoesNotFailOthers guards per-partition results: in one request, a
// refused batch for one partition leaves the other partitions' valid batches stored and
// answered with their offsets.
func TestProduceBadPartitionDoesNotFailOthers(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("mixed-a", 3)
	b.createTopic("mixed-b", 1)
	rc := dialRaw(t, b.addr)
	bad := plainBatch(2, 1000, "bad").encode()
	bad[len(bad)-1] ^= 1
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 12, -1, 10000
	add := func(topic string, parts map[int32][]byte, order ...int32) {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for _, p := range order {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, parts[p]
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	add("mixed-a", map[int32][]byte{0: plainBatch(2, 1000, "a0").encode(), 1: bad, 2: plainBatch(3, 1000, "a2").encode(), 5: plainBatch(1, 1000, "a5").encode()}, 0, 1, 2, 5)
	add("mixed-b", map[int32][]byte{0: plainBatch(4, 1000, "b0").encode()}, 0)
	resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
	want := map[string]map[int32][2]int64{ // code, base offset
		"mixed-a": {0: {0, 0}, 1: {2, -1}, 2: {0, 0}, 5: {3, -1}},
		"mixed-b": {0: {0, 0}},
	}
	n := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			n++
			w, ok := want[rt.Topic][rp.Partition]
			if !ok {
				t.Errorf("answer for %s/%d, which was not asked about", rt.Topic, rp.Partition)
				continue
			}
			if int64(rp.ErrorCode) != w[0] || rp.BaseOffset != w[1] {
				t.Errorf("%s/%d: error %d base %d, want error %d base %d", rt.Topic, rp.Partition, rp.ErrorCode, rp.BaseOffset, w[0], w[1])
			}
		}
	}
	if n != 5 {
		t.Errorf("%d partition results, want 5", n)
	}
	for _, c := range []struct {
		topic string
		p     int32
		hw    int64
	}{{"mixed-a", 0, 2}, {"mixed-a", 1, 0}, {"mixed-a", 2, 3}, {"mixed-b", 0, 4}} {
		if hw := b.highWatermark(c.topic, c.p); hw != c.hw {
			t.Errorf("%s/%d high watermark %d, want %d", c.topic, c.p, hw, c.hw)
		}
	}
}
