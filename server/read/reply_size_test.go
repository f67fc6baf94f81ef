package read

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchReplySizeBoundsItsEncoding: the frame a fetch reply is given (size) holds its
// encoding at every version, aborted transactions of read_committed answers included, so a
// large reply never leaves the buffer it took from the transport's list.
func TestFetchReplySizeBoundsItsEncoding(t *testing.T) {
	for _, aborted := range []int{0, 1, 3, 50} {
		for v := int16(4); v <= 12; v++ { // the versions served
			resp := kmsg.NewPtrFetchResponse()
			for ti := range 3 {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = "topic-with-a-longish-name"
				rt.TopicID[0] = byte(ti + 1)
				for p := range 8 {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition = int32(p)
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 1<<40, 1<<40, 1<<39
					for a := range aborted {
						at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
						at.ProducerID, at.FirstOffset = 1<<50+int64(a), 1<<41+int64(a)
						rp.AbortedTransactions = append(rp.AbortedTransactions, at)
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			resp.SetVersion(v)
			r := &Reply{Resp: resp}
			size := r.size()
			if n := len(r.appendTo(nil, size)); n > size {
				t.Fatalf("v%d, %d aborted transactions a partition: encoded %d bytes, size said %d", v, aborted, n, size)
			}
		}
	}
}
