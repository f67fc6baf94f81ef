package server

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/batchlog"
	"inlet/quota"
	"inlet/server/authz"
	"inlet/tier"
	"inlet/wire"
)

// Fetch v4-v12. v4 brings isolation levels and the last stable offset, v5 the log start
// offset, v7 fetch sessions (KIP-227: refused cleanly by always answering session id 0, which
// clients take as "no session" and keep sending full requests), v11 rack ids (ignored: one
// broker), v12 the flexible encoding. v13+ addresses topics by id and is not advertised.
//
// A fetch returns whole stored batches, starting with the batch that contains the fetch
// offset (below a tiered partition's local log start, from the remote tier: RemoteTier),
// bounded by the high watermark (or the last stable offset for read_committed, with the
// aborted transactions that meet the returned range, so the consumer can drop their
// records). It waits up to MaxWaitMillis for MinBytes, woken by the high-watermark advances
// of the partitions it reads (batchlog.Waiter), holding no iterator while it waits, and no
// in-flight budget: its frame is given back before the first wait (Request.Shed), and its
// connection is not read meanwhile (conn.Handler.Holds).
//
// The record bytes of an answer are at most the request's MaxBytes, the broker's
// fetch.max.bytes (Kafka's ReplicaManager caps a fetch the same way) and what of half the
// in-flight budget unwritten replies leave (transport.Conn.ReplyRoom); the first batch is
// returned even when it is larger (KIP-74).
const fetchKey = 1

func init() {
	register(api{key: fetchKey, min: 4, max: 12, serve: serveFetch,
		authz: before(authorizeFetch, onTopics(acl.Read))})
}

// serveFetch serves a Fetch as dispatch serves a kmsg API (decode, the authorization filter,
// the handler, metrics), except that the answer is a fetchReply, encoded by itself.
func serveFetch(s *Server, r *request, a *api) {
	kreq, ok := s.decode(r)
	if !ok {
		return
	}
	deny, answered := s.filter(r, a, kreq)
	if answered {
		return
	}
	reply := handleFetch(s, r, kreq.(*kmsg.FetchRequest))
	if deny != nil {
		deny(reply.resp)
	}
	if m := s.m; m != nil {
		m.ResponseErrors(fetchKey, reply.resp)
	}
	s.respond(r, reply.encode(r.hdr))
}

func handleFetch(s *Server, r *request, req *kmsg.FetchRequest) *fetchReply {
	if ms := r.c.Throttled(quota.Fetch, r.hdr.ClientID); ms > 0 {
		// Its user is over the consumer_byte_rate (other connections took it there): answered
		// empty, as Kafka answers a throttled fetch.
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ThrottleMillis = ms
		return newFetchReply(s, resp)
	}
	reply, bytes := s.fetchWait(r, req)
	reply.resp.ThrottleMillis = r.c.Throttle(quota.Fetch, r.hdr.ClientID, bytes)
	return reply
}

// fetchWait answers req once MinBytes are there, or MaxWaitMillis has passed; bytes is the
// size of the record batches in the answer.
//
// A fetch that waits watches the partitions it reads (batchlog.Waiter): an advance of one of
// them wakes it as the completer publishes the advance, before the produce that made it is
// answered; writes to other partitions do not. The partitions are watched after the first
// answer was built, and one whose high watermark (or last stable offset) moved in between is
// read again at once, so no advance is missed.
func (s *Server) fetchWait(r *request, req *kmsg.FetchRequest) (resp *fetchReply, bytes int) {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	resp, bytes, stop := s.fetchOnce(r, req)
	if stop || bytes >= int(req.MinBytes) || req.MaxWaitMillis <= 0 || s.net.Draining() {
		return resp, bytes
	}
	w := batchlog.GetWaiter()
	defer batchlog.PutWaiter(w)
	if s.watch(w, req, resp) {
		resp.release()
		resp, bytes, stop = s.fetchOnce(r, req)
		if stop || bytes >= int(req.MinBytes) || s.net.Draining() {
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
		s.shed(r)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-w.C():
			resp.release()
			if m := s.m; m != nil {
				m.FetchWoken()
			}
		case <-s.net.DrainStarted():
			resp.release()
		case <-r.c.Done():
			return resp, bytes // the connection is gone: the reply will be dropped
		case <-timer.C:
			resp.release()
			resp, bytes, _ = s.fetchOnce(r, req)
			return resp, bytes
		}
		resp, bytes, stop = s.fetchOnce(r, req)
		if stop || bytes >= int(req.MinBytes) || s.net.Draining() {
			return resp, bytes
		}
	}
}

// watch registers w on every partition req reads and reports whether one of them has
// advanced since resp was built (its high watermark or last stable offset differs from what
// resp tells): then resp is out of date. resp's topics and partitions are req's, in order
// (fetchOnce; refused topics are added after the wait).
func (s *Server) watch(w *batchlog.Waiter, req *kmsg.FetchRequest, resp *fetchReply) (moved bool) {
	for ti, rt := range req.Topics {
		t, _ := s.blog.Topic(rt.Topic)
		if t == nil || ti >= len(resp.resp.Topics) {
			continue
		}
		ot := &resp.resp.Topics[ti]
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
// but not read (fetchReply). stop is set when a partition reports an error, which Kafka
// answers at once instead of waiting out MaxWaitMillis.
func (s *Server) fetchOnce(r *request, req *kmsg.FetchRequest) (resp *fetchReply, total int, stop bool) {
	resp = newFetchReply(s, req.ResponseKind().(*kmsg.FetchResponse))
	resp.resp.SessionID = 0
	maxBytes := int(req.MaxBytes)
	if req.Version < 3 || maxBytes <= 0 {
		maxBytes = int(^uint32(0) >> 1)
	}
	maxBytes = min(maxBytes, s.cfg.FetchMaxBytes, max(1, int(r.t.Conn().ReplyRoom())))
	for ti, rt := range req.Topics {
		ot := kmsg.NewFetchResponseTopic()
		ot.Topic = rt.Topic
		ot.TopicID = rt.TopicID
		t, _ := s.blog.Topic(rt.Topic)
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
			p := t.Partitions[rp.Partition]
			hw := p.HighWatermark()
			stable := min(p.LastStableOffset(), hw)
			op.HighWatermark, op.LastStableOffset, op.LogStartOffset = hw, stable, p.LogStartOffset()
			limit := hw
			if req.IsolationLevel == readCommitted {
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
				err := s.planRead(p, rp.FetchOffset, limit, partMax, includeFirst, plan)
				switch {
				case errors.Is(err, batchlog.ErrOffsetOutOfRange):
					// Retention moved the log start past the offset while it was read.
					op.ErrorCode, stop = wire.ErrOffsetOutOfRange, true
					op.LogStartOffset = p.LogStartOffset()
				case errors.Is(err, tier.ErrRemote):
					// The bucket failed: consumers retry KAFKA_STORAGE_ERROR.
					s.log.Warn("fetch remote read", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					op.ErrorCode, stop = wire.ErrKafkaStorageError, true
				case err != nil:
					s.log.Error("fetch read", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					op.ErrorCode = wire.ErrUnknownServerError
					stop = true
				}
				total += plan.Bytes
				if req.IsolationLevel == readCommitted && plan.Bytes > 0 {
					for _, a := range p.AbortedTxns(rp.FetchOffset, plan.End) {
						at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
						at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
						op.AbortedTransactions = append(op.AbortedTransactions, at)
					}
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.resp.Topics = append(resp.resp.Topics, ot)
	}
	return resp, total, stop
}

// planRead plans a fetch of p from offset: from the local log at or past its local log start,
// from the remote tier below it. An offset the local log start passes while it is planned is
// planned again from the remote tier.
func (s *Server) planRead(p *batchlog.Partition, offset, limit int64, maxBytes int, includeFirst bool, plan *batchlog.ReadPlan) error {
	if s.remote != nil && offset < p.LocalLogStartOffset() {
		return s.remote.PlanRead(p, offset, limit, maxBytes, includeFirst, plan)
	}
	err := s.blog.PlanRead(p, offset, limit, maxBytes, includeFirst, plan)
	if s.remote != nil && errors.Is(err, batchlog.ErrOffsetOutOfRange) && offset >= p.LogStartOffset() {
		plan.Release()
		return s.remote.PlanRead(p, offset, limit, maxBytes, includeFirst, plan)
	}
	return err
}

// authorizeFetch: READ on each topic (KafkaApis.handleFetchRequest); refused partitions are
// answered without records.
func authorizeFetch(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FetchRequest)
	var denied []kmsg.FetchRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.FetchRequestTopic) bool { return p.Topic(acl.Read, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.FetchResponse) // serveFetch passes its reply's
		for _, t := range denied {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = t.Topic
			for _, pt := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
				rp.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null set
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
