package e2e

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

// TestOffsetsTopicIsInternal: __consumer_offsets appears once a group coordinator has been
// looked up, as Kafka creates it (50 partitions, compacted), marked internal in Metadata; a
// Metadata request that auto-creates the name makes it the same way, never as a plain topic;
// clients can neither append to it nor delete it (INVALID_TOPIC_EXCEPTION).
func TestOffsetsTopicIsInternal(t *testing.T) {
	t.Run("created by FindCoordinator", func(t *testing.T) {
		b := startBroker(t, nil)
		b.createTopic("plain", 1)
		rc := dialRaw(t, b.addr)
		if got := topicNames(rc.roundTrip(metadataReq(12, false)).(*kmsg.MetadataResponse)); len(got) != 1 {
			t.Fatalf("before any group: topics %v, want only plain", got)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version = 4
		fc.CoordinatorKeys = []string{"g"}
		rc.roundTrip(fc)
		checkOffsetsTopic(t, rc.roundTrip(metadataReq(12, false)).(*kmsg.MetadataResponse))

		batch := plainBatch(1, 1000, "x").encode()
		if p := rc.produceOne(9, "__consumer_offsets", 0, batch); p.ErrorCode != wire.ErrInvalidTopic {
			t.Errorf("produce to the internal topic answered %d, want INVALID_TOPIC_EXCEPTION (17)", p.ErrorCode)
		}
		dt := kmsg.NewPtrDeleteTopicsRequest()
		dt.Version = 6
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr("__consumer_offsets")
		dt.Topics = append(dt.Topics, rt)
		if resp := rc.roundTrip(dt).(*kmsg.DeleteTopicsResponse); resp.Topics[0].ErrorCode != wire.ErrInvalidTopic {
			t.Errorf("delete of the internal topic answered %d, want INVALID_TOPIC_EXCEPTION (17)", resp.Topics[0].ErrorCode)
		}
		checkOffsetsTopic(t, rc.roundTrip(metadataReq(12, false)).(*kmsg.MetadataResponse))
		if ot, ok := b.blog.Topic("__consumer_offsets"); !ok || ot.Partitions[0].HighWatermark() != 0 {
			t.Error("a record reached the internal topic")
		}
	})
	t.Run("created by an auto-creating Metadata request", func(t *testing.T) {
		b := startBroker(t, nil)
		rc := dialRaw(t, b.addr)
		checkOffsetsTopic(t, rc.roundTrip(metadataReq(12, true, "__consumer_offsets")).(*kmsg.MetadataResponse))
	})
}

func checkOffsetsTopic(t *testing.T, resp *kmsg.MetadataResponse) {
	t.Helper()
	for _, mt := range resp.Topics {
		if mt.Topic == nil || *mt.Topic != "__consumer_offsets" {
			if mt.IsInternal {
				t.Errorf("%v is marked internal", mt.Topic)
			}
			continue
		}
		if mt.ErrorCode != 0 || !mt.IsInternal || len(mt.Partitions) != 50 {
			t.Fatalf("__consumer_offsets: error %d, internal %v, %d partitions; want an internal topic of 50", mt.ErrorCode, mt.IsInternal, len(mt.Partitions))
		}
		return
	}
	t.Fatalf("__consumer_offsets is not in Metadata: %v", topicNames(resp))
}
