package server

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/batchlog"
	"inlet/server/authz"
	"inlet/wire"
)

// ListOffsets v0-v8: earliest (-2), latest (-1), by timestamp (the first offset whose
// record timestamp is >= the target, KIP-79), v7's max timestamp (-3, KIP-734,
// list_offsets_max.go) and v8's earliest-local (-4, KIP-405: the local log start of a tiered
// partition), with read_committed bounded by the last stable offset. Earliest and by
// timestamp span both tiers: a tiered partition's batches below its local log start are
// searched in the remote tier first. v9's latest-tiered (-5) is not advertised.
const listOffsetsKey = 2

func init() {
	register(api{key: listOffsetsKey, min: 0, max: 8, handle: handleListOffsets,
		authz: before(authorizeListOffsets, onTopics(acl.Describe))})
}

const (
	listLatest        = -1
	listEarliest      = -2
	listEarliestLocal = -4
)

func handleListOffsets(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewListOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, _ := s.blog.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewListOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			op.Timestamp, op.Offset, op.LeaderEpoch = -1, -1, 0
			if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			p := t.Partitions[rp.Partition]
			op.LeaderEpoch = p.LeaderEpoch()
			stable := s.lastStableOffset(p, req.IsolationLevel)
			switch rp.Timestamp {
			case listLatest:
				op.Offset = stable
			case listEarliest:
				op.Offset = p.LogStartOffset()
			case listEarliestLocal:
				op.Offset = p.LocalLogStartOffset()
			case listMaxTimestamp:
				off, ts, err := s.offsetOfMaxTimestamp(p, stable)
				if err != nil {
					s.log.Error("list offsets max timestamp", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					op.ErrorCode = wire.ErrUnknownServerError
				}
				op.Offset, op.Timestamp = off, ts
			default:
				off, ts, err := s.offsetForTimestamp(p, rp.Timestamp, stable)
				if err != nil {
					s.log.Error("list offsets by timestamp", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					op.ErrorCode = wire.ErrUnknownServerError
				}
				op.Offset, op.Timestamp = off, ts
			}
			if req.Version == 0 {
				// v0 answers a list of offsets (MaxNumOffsets of them, newest first); one
				// segment here, so the answer is the single offset found.
				if op.Offset >= 0 && rp.MaxNumOffsets > 0 {
					op.OldStyleOffsets = []int64{op.Offset}
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// lastStableOffset bounds reads: the high watermark for read_uncommitted, the last stable
// offset (below every open transaction) for read_committed.
func (s *Server) lastStableOffset(p *batchlog.Partition, isolation int8) int64 {
	if isolation == readCommitted {
		return p.LastStableOffset()
	}
	return p.HighWatermark()
}

// readCommitted is the IsolationLevel of a read_committed consumer.
const readCommitted = 1

var errStopScan = errors.New("found")

// scanBatches calls fn with each stored batch of p from the local log start below limit, and its
// header, until fn says stop or fails. The batch is valid only during the call: the scan reads
// 4 MiB at a time into one buffer. Retention moving the log start past the scan makes it go on
// from the new log start.
func (s *Server) scanBatches(p *batchlog.Partition, limit int64, fn func(batch []byte, h wire.BatchHeader) (stop bool, err error)) error {
	const chunk = 4 << 20
	var buf []byte
	var err error
	for from := p.LocalLogStartOffset(); from < limit; {
		buf, err = s.blog.ReadBatches(p, from, limit, chunk, true, buf[:0])
		if errors.Is(err, batchlog.ErrOffsetOutOfRange) {
			// The local log start only grows, so the scan ends.
			from = max(from, p.LocalLogStartOffset())
			continue
		}
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return nil
		}
		for b := buf; ; {
			batch, rest, err := wire.NextBatch(b)
			if err != nil {
				return err
			}
			if batch == nil {
				break
			}
			b = rest
			h, err := wire.ParseBatchHeader(batch)
			if err != nil {
				return err
			}
			from = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			if stop, err := fn(batch, h); stop || err != nil {
				return err
			}
		}
	}
	return nil
}

// offsetForTimestamp scans the partition's batches from the log start for the first record
// whose timestamp is >= target. Batches whose max timestamp is below the target are skipped
// without decoding. It answers (-1, -1) when no record qualifies, as Kafka does.
func (s *Server) offsetForTimestamp(p *batchlog.Partition, target, limit int64) (int64, int64, error) {
	var scratch []byte
	foundOff, foundTS := int64(-1), int64(-1)
	if s.remote != nil && p.LogStartOffset() < p.LocalLogStartOffset() {
		batch, err := s.remote.FindTimestamp(p, target)
		if err != nil {
			return -1, -1, err
		}
		if batch != nil {
			h, err := wire.ParseBatchHeader(batch)
			if err != nil {
				return -1, -1, err
			}
			if h.BaseOffset < limit {
				found, err := recordAtOrAfter(batch, h, target, &scratch, &foundOff, &foundTS)
				if found || err != nil {
					return foundOff, foundTS, err
				}
			}
		}
	}
	err := s.scanBatches(p, limit, func(batch []byte, h wire.BatchHeader) (bool, error) {
		if h.MaxTimestamp < target {
			return false, nil
		}
		return recordAtOrAfter(batch, h, target, &scratch, &foundOff, &foundTS)
	})
	if err != nil {
		return -1, -1, err
	}
	return foundOff, foundTS, nil
}

// recordAtOrAfter finds in batch (of header h, max timestamp >= target) the first record whose
// timestamp is >= target, and sets *off and *ts to its offset and timestamp.
func recordAtOrAfter(batch []byte, h wire.BatchHeader, target int64, scratch *[]byte, off, ts *int64) (bool, error) {
	if h.TimestampType() == 1 {
		// LogAppendTime: every record carries the batch's max timestamp.
		*off, *ts = h.BaseOffset, h.MaxTimestamp
		return true, nil
	}
	var err error
	*scratch, err = wire.ForEachRecord(batch, *scratch, func(rec wire.Record) error {
		if t := h.FirstTimestamp + rec.TimestampDelta; t >= target {
			*off, *ts = h.BaseOffset+int64(rec.OffsetDelta), t
			return errStopScan
		}
		return nil
	})
	if errors.Is(err, errStopScan) {
		return true, nil
	}
	return false, err
}

// authorizeListOffsets: DESCRIBE on each topic (KafkaApis.handleListOffsetRequest).
func authorizeListOffsets(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	var denied []kmsg.ListOffsetsRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.ListOffsetsRequestTopic) bool { return p.Topic(acl.Describe, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.ListOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, pt := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
				rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
