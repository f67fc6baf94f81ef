package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchTestResponse has every shape of partition the encoder distinguishes: records and none,
// null and empty record sets, no, empty and some aborted transactions.
func fetchTestResponse(version int16) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	resp.ThrottleMillis, resp.ErrorCode, resp.SessionID = 7, 0, 0
	for ti, name := range []string{"orders", "a-topic-with-a-longer-name"} {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = name
		for pi := range 4 {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = int32(pi)
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = int64(1000*ti+pi), int64(900+pi), int64(pi)
			p.PreferredReadReplica = -1
			switch pi {
			case 0:
				p.RecordBatches = bytes.Repeat([]byte{byte(ti + 1)}, 300) // past a one-byte uvarint
			case 1:
				p.RecordBatches = []byte{}
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			case 2:
				p.RecordBatches = nil
				p.ErrorCode = ErrOffsetOutOfRange
			case 3:
				p.RecordBatches = []byte("batch")
				for i := range 3 {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = int64(i+10), int64(i*100)
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// fieldRecords supplies each partition's RecordBatches field through FetchRecords, or fails
// the one named by fail.
type fieldRecords struct {
	resp *kmsg.FetchResponse
	fail [2]int // topic and partition index; {-1, -1}: none
}

func (r fieldRecords) Size(t, p int) int {
	if b := r.resp.Topics[t].Partitions[p].RecordBatches; b != nil {
		return len(b)
	}
	return -1
}

func (r fieldRecords) Append(dst []byte, t, p int) ([]byte, error) {
	if r.fail == [2]int{t, p} {
		return dst, errors.New("read failed")
	}
	return append(dst, r.resp.Topics[t].Partitions[p].RecordBatches...), nil
}

// The encoder writes what kmsg writes, byte for byte, at every version served, whether the
// records come from the fields or from FetchRecords.
func TestAppendFetchResponseMatchesKmsg(t *testing.T) {
	for v := int16(4); v <= 12; v++ {
		resp := fetchTestResponse(v)
		want := resp.AppendTo(nil)
		if got := AppendFetchResponse(nil, resp, nil, nil); !bytes.Equal(got, want) {
			t.Fatalf("v%d from the fields:\n got %x\nwant %x", v, got, want)
		}
		prefix := []byte("header")
		got := AppendFetchResponse(prefix, resp, fieldRecords{resp: resp, fail: [2]int{-1, -1}}, nil)
		if !bytes.Equal(got[len(prefix):], want) || !bytes.Equal(got[:len(prefix)], prefix) {
			t.Fatalf("v%d from FetchRecords:\n got %x\nwant %x", v, got[len(prefix):], want)
		}
		var back kmsg.FetchResponse
		back.Version = v
		if err := back.ReadFrom(got[len(prefix):]); err != nil {
			t.Fatalf("v%d: kmsg cannot read it back: %v", v, err)
		}
	}
}

// A partition whose records fail is answered UNKNOWN_SERVER_ERROR with an empty record set,
// and the rest of the response is whole.
func TestAppendFetchResponseFailedRecords(t *testing.T) {
	for v := int16(4); v <= 12; v++ {
		resp := fetchTestResponse(v)
		var failed []int
		got := AppendFetchResponse(nil, resp, fieldRecords{resp: resp, fail: [2]int{1, 0}}, func(t, p int, err error) { failed = append(failed, t, p) })
		if len(failed) != 2 || failed[0] != 1 || failed[1] != 0 {
			t.Fatalf("v%d: failed partitions %v, want [1 0]", v, failed)
		}
		resp.Topics[1].Partitions[0].ErrorCode = ErrUnknownServerError
		resp.Topics[1].Partitions[0].RecordBatches = []byte{}
		if want := resp.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatalf("v%d:\n got %x\nwant %x", v, got, want)
		}
	}
}
