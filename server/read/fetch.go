package read

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/tier"
	"inlet/wire"
)

// A Fetch's answer, on its connection's worker: Fetch builds it from what is committed now
// (fetchOnce), and while it holds fewer than MinBytes waits for the partitions it reads to
// advance (a long poll), building it again after each; package server encodes it (Reply).
//
// A fetch returns whole stored batches, starting with the batch that contains the fetch
// offset (below a tiered partition's local log start, from the remote tier: RemoteTier),
// bounded by the high watermark (or the last stable offset for read_committed, with the
// aborted transactions that meet the returned range, so the consumer can drop their
// records). The record bytes of an answer are at most the request's MaxBytes, the broker's
// fetch.max.bytes (Kafka's ReplicaManager caps a fetch the same way) and what of half the
// in-flight budget unwritten replies leave (Poll.ReplyRoom); the first batch is returned even
// when it is larger (KIP-74).

// Poll is the request a Fetch answers, as its long poll sees it (package server's request).
type Poll interface {
	// ReplyRoom is what of half the in-flight budget the connection's unwritten replies leave
	// (transport.Conn.ReplyRoom).
	ReplyRoom() int64
	// Shed gives back the request's frame and budget; it is called before each wait
	// (transport.Request.Shed), so a long poll holds neither.
	Shed()
	// Gone is closed once the request's connection is gone.
	Gone() <-chan struct{}
}

// Fetch answers req once MinBytes are there, or MaxWaitMillis has passed; bytes is the
// size of the record batches in the answer.
//
// A fetch that waits watches the partitions it reads (batchlog.Waiter): an advance of one of
// them wakes it as the completer publishes the advance, before the produce that made it is
// answered; writes to other partitions do not. The partitions are watched after the first
// answer was built, and one whose high watermark (or last stable offset) moved in between is
// read again at once, so no advance is missed. It holds no iterator while it waits.
func (rd *Reader) Fetch(req *kmsg.FetchRequest, r Poll) (resp *Reply, bytes int) {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	resp, bytes, stop := rd.fetchOnce(req, r)
	if stop || bytes >= int(req.MinBytes) || req.MaxWaitMillis <= 0 || rd.Node.Draining() {
		return resp, bytes
	}
	w := batchlog.GetWaiter()
	defer batchlog.PutWaiter(w)
	if rd.watch(w, req, resp) {
		resp.Release()
		resp, bytes, stop = rd.fetchOnce(req, r)
		if stop || bytes >= int(req.MinBytes) || rd.Node.Draining() {
			return resp, bytes
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		wait := time.Until(deadline)
		if wait <= 0 {
			return resp, bytes
		}
		r.Shed()
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-w.C():
			resp.Release()
			if rd.Woken != nil {
				rd.Woken()
			}
		case <-rd.Node.DrainStarted():
			resp.Release()
		case <-r.Gone():
			return resp, bytes // the connection is gone: the reply will be dropped
		case <-timer.C:
			resp.Release()
			resp, bytes, _ = rd.fetchOnce(req, r)
			return resp, bytes
		}
		resp, bytes, stop = rd.fetchOnce(req, r)
		if stop || bytes >= int(req.MinBytes) || rd.Node.Draining() {
			return resp, bytes
		}
	}
}

// watch registers w on every partition req reads and reports whether one of them has
// advanced since resp was built (its high watermark or last stable offset differs from what
// resp tells): then resp is out of date. resp's topics and partitions are req's, in order
// (fetchOnce; refused topics are added after the wait).
func (rd *Reader) watch(w *batchlog.Waiter, req *kmsg.FetchRequest, resp *Reply) (moved bool) {
	for ti, rt := range req.Topics {
		t, _ := rd.Log.Topic(rt.Topic)
		if t == nil || ti >= len(resp.Resp.Topics) {
			continue
		}
		ot := &resp.Resp.Topics[ti]
		for pi, rp := range rt.Partitions {
			if rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) || pi >= len(ot.Partitions) {
				continue
			}
			p := t.Partitions[rp.Partition]
			w.Watch(p)
			op := &ot.Partitions[pi]
			hw := p.HighWatermark()
			if op.HighWatermark != hw || op.LastStableOffset != min(p.LastStableOffset(), hw) {
				moved = true
			}
		}
	}
	return moved
}

// fetchOnce builds a response from what is committed now, with the record batches located
// but not read (Reply). stop is set when a partition reports an error, which Kafka
// answers at once instead of waiting out MaxWaitMillis.
func (rd *Reader) fetchOnce(req *kmsg.FetchRequest, r Poll) (resp *Reply, total int, stop bool) {
	resp = rd.NewReply(req.ResponseKind().(*kmsg.FetchResponse))
	resp.Resp.SessionID = 0
	maxBytes := int(req.MaxBytes)
	if req.Version < 3 || maxBytes <= 0 {
		maxBytes = int(^uint32(0) >> 1)
	}
	maxBytes = min(maxBytes, rd.FetchMaxBytes, max(1, int(r.ReplyRoom())))
	epoch := int32(0)
	if rd.LeaderEpoch != nil {
		epoch = rd.LeaderEpoch()
	}
	for ti, rt := range req.Topics {
		ot := kmsg.NewFetchResponseTopic()
		ot.Topic = rt.Topic
		ot.TopicID = rt.TopicID
		t, _ := rd.Log.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewFetchResponseTopicPartition()
			op.Partition = rp.Partition
			op.HighWatermark, op.LastStableOffset, op.LogStartOffset = -1, -1, -1
			op.PreferredReadReplica = -1
			// Records is nullable on the wire, but Kafka always sends an empty (not null) set
			// and librdkafka rejects a null one as a bad MessageSetSize.
			op.RecordBatches = []byte{}
			if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
				ot.Partitions = append(ot.Partitions, op)
				stop = true
				continue
			}
			if req.Version >= 9 { // KIP-320: CurrentLeaderEpoch
				if code := CheckLeaderEpoch(rp.CurrentLeaderEpoch, epoch); code != 0 {
					op.ErrorCode, stop = code, true
					ot.Partitions = append(ot.Partitions, op)
					continue
				}
			}
			p := t.Partitions[rp.Partition]
			hw := p.HighWatermark()
			stable := min(p.LastStableOffset(), hw)
			op.HighWatermark, op.LastStableOffset, op.LogStartOffset = hw, stable, p.LogStartOffset()
			limit := hw
			if req.IsolationLevel == ReadCommitted {
				limit = stable
			}
			switch {
			case rp.FetchOffset < p.LogStartOffset() || rp.FetchOffset > hw:
				op.ErrorCode = wire.ErrOffsetOutOfRange
				stop = true
			case rp.FetchOffset < limit && total < maxBytes:
				partMax := int(rp.PartitionMaxBytes)
				if room := maxBytes - total; partMax > room {
					partMax = room
				}
				// KIP-74: the first batch of the first partition with data is returned even
				// when it is larger than the limits, so a consumer always makes progress.
				includeFirst := total == 0
				plan := resp.plan(ti, len(ot.Partitions))
				err := rd.planRead(p, rp.FetchOffset, limit, partMax, includeFirst, plan)
				switch {
				case errors.Is(err, batchlog.ErrOffsetOutOfRange):
					// Retention moved the log start past the offset while it was read.
					op.ErrorCode, stop = wire.ErrOffsetOutOfRange, true
					op.LogStartOffset = p.LogStartOffset()
				case errors.Is(err, tier.ErrRemote):
					// The bucket failed: consumers retry KAFKA_STORAGE_ERROR.
					rd.Logger.Warn("fetch remote read", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					op.ErrorCode, stop = wire.ErrKafkaStorageError, true
				case err != nil:
					rd.Logger.Error("fetch read", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					op.ErrorCode = wire.ErrUnknownServerError
					stop = true
				}
				total += plan.Bytes
				if req.IsolationLevel == ReadCommitted && plan.Bytes > 0 {
					for _, a := range p.AbortedTxns(rp.FetchOffset, plan.End) {
						at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
						at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
						op.AbortedTransactions = append(op.AbortedTransactions, at)
					}
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Resp.Topics = append(resp.Resp.Topics, ot)
	}
	return resp, total, stop
}
