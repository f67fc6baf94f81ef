package e2e

import (
	"strings"
	"testing"

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
