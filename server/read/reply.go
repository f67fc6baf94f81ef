package read

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/transport"
	"inlet/wire"
)

// The reply a Fetch is answered with: Reader.Fetch locates each partition's batches (plan)
// and Encode reads them into the reply frame.

// Reply is a Fetch response (Resp) whose record batches are located (batchlog.PlanRead)
// when Reader.Fetch builds it and read when it is encoded (Encode): it is the
// wire.FetchRecords that wire.AppendFetchResponse takes the batches of each planned partition
// from, copied into the response frame (from the log's tail cache, or from the segment
// files in aligned direct reads, several in flight). The data is copied once, and the frame
// is grown once, to its final size. It is not a kmsg.Response: the Fetch API serves it on a
// path of its own (package server's serveFetch).
//
// Every Reply made is encoded once (which releases its plans) or released (Release).
type Reply struct {
	// Resp is the response; its authorization refusals and metrics are the caller's.
	Resp  *kmsg.FetchResponse
	blog  *batchlog.Log
	log   *slog.Logger
	plans []fetchPlan // in the order the partitions are encoded
	next  int         // the plan the encoder reaches next
}

type fetchPlan struct {
	t, p int
	plan batchlog.ReadPlan
}

var replies = sync.Pool{New: func() any { return new(Reply) }}

// NewReply is a Reply of resp with no batches planned: an answer without records (a
// throttled fetch).
func (rd *Reader) NewReply(resp *kmsg.FetchResponse) *Reply {
	r := replies.Get().(*Reply)
	r.Resp, r.blog, r.log = resp, rd.Log, rd.Logger
	return r
}

// plan returns the empty plan of partition p of topic t, which must come after every partition
// planned before it in encoding order.
func (r *Reply) plan(t, p int) *batchlog.ReadPlan {
	r.plans = slices.Grow(r.plans, 1)[:len(r.plans)+1]
	fp := &r.plans[len(r.plans)-1]
	fp.t, fp.p = t, p
	return &fp.plan
}

// Release lets go of the plans' segments and puts r back in the pool.
func (r *Reply) Release() {
	for i := range r.plans {
		r.plans[i].plan.Release()
	}
	r.plans = r.plans[:0]
	r.next = 0
	r.Resp, r.blog, r.log = nil, nil, nil
	replies.Put(r)
}

// Encode is the reply frame of r, answering the request of hdr, with the planned batches read
// into it; it releases r.
func (r *Reply) Encode(hdr wire.RequestHeader) *transport.Out {
	r.Resp.SetVersion(hdr.APIVersion)
	// A large reply takes its frame at its final size, from the transport's free list of
	// large buffers; a smaller one grows a pooled frame (appendTo), the growth rounding its
	// capacity up so that the frame, pooled again, fits the next reply of nearly that size.
	size := r.size()
	hint := 4096
	if size+64 > transport.MaxPooledReply {
		hint = size + 64
	}
	out := transport.GetOut(hint)
	out.B = wire.AppendResponseHeader(out.B, hdr.CorrelationID, r.Resp.IsFlexible())
	out.B = r.appendTo(out.B, size)
	wire.PatchFrameLength(out.B)
	return out
}

// appendTo encodes the response, reading the planned batches into dst grown by size (r.size),
// and releases r.
func (r *Reply) appendTo(dst []byte, size int) []byte {
	defer r.Release()
	dst = slices.Grow(dst, size)
	return wire.AppendFetchResponse(dst, r.Resp, r, r.readFailed)
}

// size is at least the encoded length of the response: the planned batches and an allowance
// for each topic's and partition's fields (64 bytes, against about 42 for the fixed ones) and
// each aborted transaction a read_committed answer lists (17 bytes: producer id, first
// offset and a flexible version's tag count), so the encoding never grows a frame of this size.
func (r *Reply) size() int {
	size := 64
	for i := range r.Resp.Topics {
		t := &r.Resp.Topics[i]
		size += 8 + len(t.Topic) + 64*len(t.Partitions)
		for j := range t.Partitions {
			size += 5 + 17*len(t.Partitions[j].AbortedTransactions)
		}
	}
	for i := range r.plans {
		size += r.plans[i].plan.Bytes
	}
	return size
}

// readFailed logs a partition whose batches could not be read; it is answered
// UNKNOWN_SERVER_ERROR.
func (r *Reply) readFailed(t, p int, err error) {
	r.log.Error("fetch read", "topic", r.Resp.Topics[t].Topic, "partition", r.Resp.Topics[t].Partitions[p].Partition, "err", err)
}

// Size is wire.FetchRecords': the planned bytes of the partition, or -1 if it has no plan.
func (r *Reply) Size(t, p int) int {
	if r.next < len(r.plans) && r.plans[r.next].t == t && r.plans[r.next].p == p {
		return r.plans[r.next].plan.Bytes
	}
	return -1
}

// Append is wire.FetchRecords': it reads the planned batches of the partition Size just named.
func (r *Reply) Append(dst []byte, t, p int) ([]byte, error) {
	fp := &r.plans[r.next]
	r.next++
	return r.blog.AppendPlanned(dst, &fp.plan)
}
