package e2e

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsetsFindsOffsetsByTimestamp guards ListOffsets: earliest (-2) and latest (-1),
// and by timestamp the first offset, in offset order, whose record timestamp is >= the
// target (KIP-79), looking inside batches; a target after every record is offset -1.
func TestListOffsetsFindsOffsetsByTimestamp(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "list-offsets"
	b.createTopic(topic, 2)
	rc := dialRaw(t, b.addr)
	// Offsets 0-4 at 1000..1004, 5-9 at 2000..2004, 10-14 at 3000..3004, and 15-17 with
	// timestamps out of order: 5000, 4000, 6000.
	for i, spec := range []batchSpec{plainBatch(5, 1000, "a"), plainBatch(5, 2000, "b"), plainBatch(5, 3000, "c")} {
		if p := rc.produceOne(12, topic, 0, spec.encode()); p.ErrorCode != 0 || p.BaseOffset != int64(5*i) {
			t.Fatalf("produce: error %d base %d", p.ErrorCode, p.BaseOffset)
		}
	}
	skew := plainBatch(3, 5000, "d")
	skew.records[1].tsDelta, skew.records[2].tsDelta = -1000, 1000
	if p := rc.produceOne(12, topic, 0, skew.encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: error %d", p.ErrorCode)
	}

	cases := []struct {
		name      string
		partition int32
		ts        int64
		wantCode  int16
		wantOff   int64
		wantTS    int64
	}{
		{name: "earliest", ts: -2, wantOff: 0, wantTS: -1},
		{name: "latest", ts: -1, wantOff: 18, wantTS: -1},
		{name: "before every record", ts: 0, wantOff: 0, wantTS: 1000},
		{name: "first record's timestamp", ts: 1000, wantOff: 0, wantTS: 1000},
		{name: "inside the first batch", ts: 1003, wantOff: 3, wantTS: 1003},
		{name: "between batches", ts: 1500, wantOff: 5, wantTS: 2000},
		{name: "middle of the second batch", ts: 2002, wantOff: 7, wantTS: 2002},
		{name: "last in-order record", ts: 3004, wantOff: 14, wantTS: 3004},
		{name: "out-of-order batch: first in offset order at or after", ts: 4500, wantOff: 15, wantTS: 5000},
		{name: "out-of-order batch: earlier record qualifies first", ts: 3500, wantOff: 15, wantTS: 5000},
		{name: "out-of-order batch: only the last record", ts: 5500, wantOff: 17, wantTS: 6000},
		{name: "after every record", ts: 6001, wantOff: -1, wantTS: -1},
		{name: "empty partition, latest", partition: 1, ts: -1, wantOff: 0, wantTS: -1},
		{name: "empty partition, earliest", partition: 1, ts: -2, wantOff: 0, wantTS: -1},
		{name: "empty partition, by timestamp", partition: 1, ts: 1000, wantOff: -1, wantTS: -1},
		{name: "unknown partition", partition: 9, ts: -1, wantCode: 3, wantOff: -1, wantTS: -1},
	}
	for _, version := range []int16{0, 1, 4, 6} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("v%d/%s", version, c.name), func(t *testing.T) {
				resp := rc.roundTrip(listOffsetsReq(version, topic, c.partition, c.ts)).(*kmsg.ListOffsetsResponse)
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != c.wantCode {
					t.Fatalf("error %d, want %d", p.ErrorCode, c.wantCode)
				}
				if version == 0 {
					// v0 answers a list of offsets; none when nothing qualifies.
					var want []int64
					if c.wantOff >= 0 {
						want = []int64{c.wantOff}
					}
					if fmt.Sprint(p.OldStyleOffsets) != fmt.Sprint(want) {
						t.Errorf("offsets %v, want %v", p.OldStyleOffsets, want)
					}
					return
				}
				if p.Offset != c.wantOff {
					t.Errorf("offset %d, want %d", p.Offset, c.wantOff)
				}
				if c.ts >= 0 && p.Timestamp != c.wantTS {
					t.Errorf("timestamp %d, want %d", p.Timestamp, c.wantTS)
				}
			})
		}
	}
	// v7's MAX_TIMESTAMP (-3, KIP-734): the record with the largest timestamp, the last of
	// the out-of-order batch; none in an empty partition.
	for partition, want := range [][2]int64{{17, 6000}, {-1, -1}} {
		resp := rc.roundTrip(listOffsetsReq(7, topic, int32(partition), -3)).(*kmsg.ListOffsetsResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != want[0] || p.Timestamp != want[1] {
			t.Errorf("partition %d, max timestamp: error %d, offset %d at %d, want %d at %d", partition, p.ErrorCode, p.Offset, p.Timestamp, want[0], want[1])
		}
	}
}
