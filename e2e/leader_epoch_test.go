package e2e

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBatchesCarryTheLeaderEpoch: producers send batches with PartitionLeaderEpoch -1; Kafka
// stamps the partition's leader epoch into every batch it appends (bytes 12..15, outside the
// CRC), and a consumer that validates epochs stops at a batch whose epoch disagrees with
// Metadata. Every stored batch carries the epoch that Metadata, ListOffsets and
// OffsetForLeaderEpoch report on a node without a lease epoch (0; with one, the batches' 0 is
// below it: cluster_view_test.go), and the CRC still holds.
func TestBatchesCarryTheLeaderEpoch(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("epochs", 1)
	rc := dialRaw(t, b.addr)
	for i := range 3 {
		if p := rc.produceOne(9, "epochs", 0, plainBatch(2+i, 1000, "e").encode()); p.ErrorCode != 0 {
			t.Fatalf("produce %d: error %d", i, p.ErrorCode)
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("epochs")
	md.Topics = append(md.Topics, mt)
	epoch := rc.roundTrip(md).(*kmsg.MetadataResponse).Topics[0].Partitions[0].LeaderEpoch

	data := fetchPartition(t, rc.roundTrip(fetchReq(12, "epochs", 0, 0, 100, 1, 1<<20, 1<<20))).RecordBatches
	batches := 0
	for len(data) >= 61 {
		n := 12 + int(binary.BigEndian.Uint32(data[8:]))
		batch := data[:n]
		if got := int32(binary.BigEndian.Uint32(batch[12:])); got != epoch {
			t.Errorf("batch at offset %d: leader epoch %d, Metadata says %d", binary.BigEndian.Uint64(batch), got, epoch)
		}
		if crc := crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)); crc != binary.BigEndian.Uint32(batch[17:]) {
			t.Errorf("batch at offset %d: CRC no longer matches", binary.BigEndian.Uint64(batch))
		}
		batches++
		data = data[n:]
	}
	if batches != 3 {
		t.Fatalf("fetched %d batches, want 3", batches)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 7
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "epochs"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if p := rc.roundTrip(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.LeaderEpoch != epoch || p.Offset != 9 {
		t.Errorf("ListOffsets latest: offset %d epoch %d, want 9 and %d", p.Offset, p.LeaderEpoch, epoch)
	}
	ofe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofe.Version = 4
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "epochs"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.LeaderEpoch, op.CurrentLeaderEpoch = epoch, epoch
	ot.Partitions = append(ot.Partitions, op)
	ofe.Topics = append(ofe.Topics, ot)
	if p := rc.roundTrip(ofe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != epoch || p.EndOffset != 9 {
		t.Errorf("OffsetForLeaderEpoch: error %d, epoch %d, end offset %d; want 0, %d, 9", p.ErrorCode, p.LeaderEpoch, p.EndOffset, epoch)
	}
	// A client that believes in a newer epoch than the leader's: UNKNOWN_LEADER_EPOCH (75).
	ofe.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch + 1
	if p := rc.roundTrip(ofe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("OffsetForLeaderEpoch with a newer current epoch: error %d, want UNKNOWN_LEADER_EPOCH", p.ErrorCode)
	}

	// kgo's consumer reads the epoch of every record from its batch.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"epochs": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for seen := 0; seen < 9; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if r.LeaderEpoch != epoch {
				t.Errorf("record at offset %d: leader epoch %d", r.Offset, r.LeaderEpoch)
			}
		})
	}
}
