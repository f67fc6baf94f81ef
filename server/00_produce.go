package server

import (
	"inlet/acl"
	"inlet/batchlog"
	"inlet/quota"
	"inlet/schema"
	"inlet/wire"
)

// Produce v3-v12: magic-2 record batches only (v3+), acks 0, 1 and -1. On a single node acks=1
// and acks=-1 both answer after the batch is fsynced; acks=0 answers nothing but is still
// committed. v13 addresses topics by id and is not advertised.
//
// The path allocates nothing in steady state: the request is decoded by the hand-written
// wire decoder into the pooled request's reused structs, batches stay slices of the frame
// buffer until the committer copies them into the segment staging buffer (or, with --storage
// pebble, the Pebble batch), and the response is encoded
// into a pooled buffer (BenchmarkProducePath pins it).
const produceKey = 0

func init() {
	register(api{key: produceKey, min: 3, max: 12, serve: serveProduce,
		authz: inHandler(onTopics(acl.Write), onTxnIDs(acl.Write))})
}

// produceState is the reusable part of a request for the produce path.
type produceState struct {
	req   wire.ProduceRequest
	resp  wire.ProduceResponse
	log   batchlog.Request
	where []respRef // where[i]: the response partition of log.Appends[i]
	acks  int16

	// Schema validation (validate.go): the failing records.
	recErrs []schema.RecordError
}

// respRef is where an append's answer goes in the response; bucket marks a topic kept in
// the bucket, refused at the reply if the lease ran out meanwhile.
type respRef struct {
	topic, partition int32
	bucket           bool
}

// serveProduce decodes r into its pooled state, checks each batch (checkBatch) and submits
// those that pass to the batch log; Completed answers once they are durable.
func serveProduce(s *Server, r *request, _ *api) {
	ps := &r.produce
	frame := r.frame()
	if err := ps.req.Decode(frame[r.hdr.BodyOffset:], r.hdr.APIVersion); err != nil {
		s.protocolError(r, "bad produce request", err)
		return
	}
	ps.resp.Reset()
	ps.log.Appends = ps.log.Appends[:0]
	ps.log.TransactionalID = ""
	ps.where = ps.where[:0]
	ps.acks = ps.req.Acks
	validAcks := ps.acks == -1 || ps.acks == 0 || ps.acks == 1
	sub := s.subjectOf(r) // the zero subject (no principal) checks nothing (server/authz/subject.go)
	txnID := ""           // the request's transactional id, made a string once if a batch needs it
	writable := s.cfg.Writable == nil || s.cfg.Writable()
	fenced := s.cfg.Fenced != nil && s.cfg.Fenced()
	for ti := range ps.req.Topics {
		rt := &ps.req.Topics[ti]
		ot := ps.resp.AppendTopic(rt.Name)
		var (
			topic *batchlog.Topic
			code  int16
			bound *schema.Topic // nil for topics without a schema: they pay this nil check only
		)
		switch {
		case !validAcks:
		case fenced:
			// Another node took the bucket prefix (lease): Kafka's answer of a broker that
			// is no longer the partition's leader; the client refreshes its metadata and
			// retries.
			code = wire.ErrNotLeaderOrFollower
		case sub.Restricted() && !sub.TopicBytes(acl.Write, rt.Name):
			// Checked before the lookup, so an unauthorized topic is never auto-created.
			code = wire.ErrTopicAuthorizationFailed
		case sub.Restricted() && ps.req.TransactionalID != nil && !sub.TxnID(acl.Write, string(ps.req.TransactionalID)):
			code = wire.ErrTransactionalIDAuthorizationFailed
		default:
			topic, code, _ = s.topicFor(r, rt.Name, true)
			if topic != nil && topic.Internal() {
				// ReplicaManager.appendToLocalLog: "Cannot append to internal topic".
				topic, code = nil, wire.ErrInvalidTopic
			}
			if topic != nil && !writable && inBucket(topic) {
				// The lease lapsed (the bucket slow or unreachable, or this process
				// paused): another node may already serve this topic from the bucket.
				topic, code = nil, wire.ErrNotLeaderOrFollower
			}
			bound = s.cfg.Schemas.Topic(rt.Name)
		}
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			op := ot.AppendPartition(rp.Index)
			switch {
			case !validAcks:
				// ProduceRequest.validate: any acks other than -1, 0, 1 fails every partition.
				op.ErrorCode = wire.ErrInvalidRequiredAcks
				continue
			case code != 0:
				op.ErrorCode = code
				continue
			case rp.Index < 0 || int(rp.Index) >= len(topic.Partitions):
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
				continue
			}
			h, vcode, msg := s.checkBatch(r, op, topic, bound, rt.Name, rp)
			if vcode == wire.ErrNone && h.IsTransactional() {
				if ps.req.TransactionalID == nil {
					// KafkaApis.handleProduceRequest: transactional records need an
					// authorized transactional id, and a null one is not.
					vcode, msg = wire.ErrTransactionalIDAuthorizationFailed, "transactional records without a transactional id"
				} else if txnID == "" {
					txnID = string(ps.req.TransactionalID)
				}
			}
			if vcode != wire.ErrNone {
				op.ErrorCode = vcode
				op.ErrorMessage, op.HasErrorMessage = msg, true
				continue
			}
			ps.log.Appends = append(ps.log.Appends, batchlog.Append{
				Partition:     topic.Partitions[rp.Index],
				Batch:         rp.Records,
				ProducerID:    h.ProducerID,
				ProducerEpoch: h.ProducerEpoch,
				BaseSequence:  h.BaseSequence,
				NumRecords:    h.NumRecords,
				LogAppendTime: topic.Settings.LogAppendTime,
				// The log opens the producer's transaction on the partition only if the
				// transaction coordinator added it (batchlog's txn.go).
				Transactional: h.IsTransactional(),
			})
			ps.where = append(ps.where, respRef{int32(ti), int32(len(ot.Partitions) - 1), inBucket(topic)})
		}
	}
	// Counted whatever became of the batches, as Kafka counts the request's size.
	ps.resp.ThrottleMs = r.c.Throttle(quota.Produce, r.hdr.ClientID, len(frame))
	if ps.acks == 0 {
		// No reply is ever written, but the slot must be passed so later replies can go.
		r.t.Skip()
	}
	if len(ps.log.Appends) == 0 {
		r.Completed(&ps.log)
		return
	}
	ps.log.TransactionalID = txnID
	ps.log.Principal = r.c.User()
	s.blog.Submit(&ps.log)
}

// checkBatch checks one partition's batch of a produce request before it may reach the log:
// its header and size (wire.ValidateProduceBatch), the version it needs, its records, and the
// topic's schema and compaction rules. A failing batch's record errors go into op.
func (s *Server) checkBatch(r *request, op *wire.ProduceRespPartition, topic *batchlog.Topic, bound *schema.Topic, name []byte, rp *wire.ProducePartition) (h wire.BatchHeader, vcode int16, msg string) {
	// max.message.bytes is per topic, falling back to the broker's message.max.bytes.
	maxMessage := s.cfg.MaxMessageBytes
	if mm := topic.Settings.MaxMessageBytes; mm != 0 {
		maxMessage = max(mm, 0)
	}
	h, vcode, msg = wire.ValidateProduceBatch(rp.Records, maxMessage)
	if vcode == wire.ErrNone && h.Compression() == wire.CompressionZstd && r.hdr.APIVersion < 7 {
		// KIP-110 (ProduceRequest.validateRecords): zstd needs Produce v7+, the one
		// version-dependent check ValidateProduceBatch leaves to its caller.
		vcode, msg = wire.ErrUnsupportedCompressionType, "produce requests with version < 7 are not allowed to use ZStandard compression"
	}
	if vcode == wire.ErrNone {
		// LogValidator's walk of the records (validate.go): a header that claims more
		// records, or other offsets, than the batch holds never reaches the log.
		vcode, msg = wire.ValidateBatchRecords(rp.Records, &h)
	}
	if vcode == wire.ErrNone && bound != nil {
		// Decompresses and decodes every record, here on the connection's worker (off
		// the event loop); a failing batch never reaches the batch log, so nothing of
		// it is stored and the producer's idempotence state is unchanged.
		vcode, msg = s.validateRecords(&r.produce, op, bound, rp.Records)
	}
	if vcode == wire.ErrNone && topic.Settings.Diskless && s.cfg.Diskless != nil {
		vcode, msg = s.cfg.Diskless.Admit()
	}
	if vcode == wire.ErrNone && topic.Settings.Compact {
		vcode, msg = s.validateKeys(&r.produce, op, name, rp.Index, rp.Records)
	}
	return h, vcode, msg
}

// Completed is r's batchlog.Completion (set once per pooled request): the log's completer
// goroutine calls it after the group holding the request is durable, and it fills in the
// offsets, encodes the reply and releases r.
func (r *request) Completed(lr *batchlog.Request) {
	ps := &r.produce
	s := r.s
	// Checked again at the reply: the lease may have run out while the batches were written
	// (a paused process resumes here); what is not acknowledged is retried by the client.
	writable := s.cfg.Writable == nil || s.cfg.Writable()
	fenced := s.cfg.Fenced != nil && s.cfg.Fenced()
	for i := range lr.Appends {
		a := &lr.Appends[i]
		ref := ps.where[i]
		op := &ps.resp.Topics[ref.topic].Partitions[ref.partition]
		op.LogStartOffset = a.LogStartOffset
		if a.Err != wire.ErrNone {
			op.ErrorCode = a.Err
			continue
		}
		if fenced || (!writable && ref.bucket) {
			op.ErrorCode = wire.ErrNotLeaderOrFollower
			continue
		}
		op.BaseOffset = a.BaseOffset
		if a.LogAppendTime {
			op.LogAppendTime = a.AppendTime
		}
	}
	if m := s.m; m != nil {
		// Every partition's code, those refused before the commit included.
		for ti := range ps.resp.Topics {
			ops := ps.resp.Topics[ti].Partitions
			for pi := range ops {
				m.Error(produceKey, ops[pi].ErrorCode)
			}
		}
	}
	if ps.acks == 0 {
		s.release(r)
		return
	}
	out := newReply(r.hdr.CorrelationID, r.hdr.APIVersion >= 9, 64+32*len(lr.Appends))
	out.B = ps.resp.AppendTo(out.B, r.hdr.APIVersion)
	wire.PatchFrameLength(out.B)
	s.finish(r, out)
}

// inBucket says whether t's batches are kept in the bucket (tiered or diskless), so that a
// node that does not hold the bucket prefix's lease may not acknowledge them.
func inBucket(t *batchlog.Topic) bool {
	return t.Settings.RemoteStorage || t.Settings.Diskless
}
