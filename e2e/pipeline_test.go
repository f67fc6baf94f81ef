package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPipelinedRepliesKeepRequestOrder guards the ordered reply queue: Kafka clients match
// responses to requests by position, so when many requests of different kinds (produce waits
// for an fsync, metadata does not) are in flight on one connection, replies must leave in
// request order, and an acks=0 produce must leave no reply at all.
func TestPipelinedRepliesKeepRequestOrder(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "pipeline"
	b.createTopic(topic, 2)
	rc := dialRaw(t, b.addr)

	type sent struct {
		req  kmsg.Request
		corr int32
	}
	var (
		out     []byte
		expect  []sent
		records = map[int32]int64{}
	)
	for i := 0; i < 50; i++ {
		var req kmsg.Request
		reply := true
		switch i % 5 {
		case 0:
			p := int32(i/5) % 2
			req = produceReq(int16(3+i%10), 1, topic, p, plainBatch(2, int64(i), fmt.Sprint(i)).encode())
			records[p] += 2
		case 1:
			m := kmsg.NewPtrMetadataRequest()
			m.Version = int16(i % 13)
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(topic)
			m.Topics = append(m.Topics, t)
			req = m
		case 2:
			a := kmsg.NewPtrApiVersionsRequest()
			a.Version = int16(i % 5)
			a.ClientSoftwareName, a.ClientSoftwareVersion = "inlet-e2e", "1"
			req = a
		case 3:
			p := int32(i/5+1) % 2
			req = produceReq(12, 0, topic, p, plainBatch(3, int64(i), fmt.Sprint(i)).encode())
			records[p] += 3
			reply = false
		case 4:
			req = listOffsetsReq(int16(i%7), topic, 0, -1)
		}
		f, corr := rc.frame(req)
		out = append(out, f...)
		if reply {
			expect = append(expect, sent{req, corr})
		}
	}
	rc.write(out) // all 50 back to back, nothing read yet

	for _, e := range expect {
		gotCorr, body, err := rc.readFrame(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the reply to correlation id %d: %v", e.corr, err)
		}
		if gotCorr != e.corr {
			t.Fatalf("reply with correlation id %d where %d (%s) was next", gotCorr, e.corr, kmsg.NameForKey(e.req.Key()))
		}
		resp, err := decodeResponse(e.req, body)
		if err != nil {
			t.Fatalf("correlation id %d: %v", e.corr, err)
		}
		if p, ok := resp.(*kmsg.ProduceResponse); ok {
			if code := p.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Errorf("produce %d: error %d", e.corr, code)
			}
		}
	}
	// The next reply is the answer to the next request: the acks=0 produces left nothing.
	rc.alive()

	// acks=0 produces are stored too; their commit may trail the replies that follow them.
	for p, n := range records {
		b.waitHighWatermark(topic, p, n)
	}
}
