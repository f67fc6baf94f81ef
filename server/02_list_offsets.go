package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/server/read"
	"inlet/wire"
)

// ListOffsets v0-v8: earliest (-2), latest (-1), by timestamp (the first offset whose
// record timestamp is >= the target, KIP-79), v7's max timestamp (-3, KIP-734) and v8's
// earliest-local (-4, KIP-405: the local log start of a tiered partition), with
// read_committed bounded by the last stable offset. Earliest and by timestamp span both
// tiers: a tiered partition's batches below its local log start are searched in the remote
// tier first (package read: read.Reader.OffsetForTimestamp, OffsetOfMaxTimestamp). v4+ names
// the partition's current leader epoch, checked against Config.LeaderEpoch
// (read.CheckLeaderEpoch, KIP-320), which every answer carries. v9's latest-tiered (-5) is not
// advertised.
const listOffsetsKey = 2

func init() {
	register(api{key: listOffsetsKey, min: 0, max: 8, handle: handleListOffsets,
		authz: before(authorizeListOffsets, onTopics(acl.Describe))})
}

const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3 // the record with the largest timestamp, the earliest on a tie
	listEarliestLocal = -4
)

func handleListOffsets(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	epoch := s.leaderEpoch()
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
			if code := read.CheckLeaderEpoch(rp.CurrentLeaderEpoch, epoch); req.Version >= 4 && code != 0 {
				op.ErrorCode, op.LeaderEpoch = code, -1
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			p := t.Partitions[rp.Partition]
			op.LeaderEpoch = epoch
			stable := read.Stable(p, req.IsolationLevel)
			switch rp.Timestamp {
			case listLatest:
				op.Offset = stable
			case listEarliest:
				op.Offset = p.LogStartOffset()
			case listEarliestLocal:
				op.Offset = p.LocalLogStartOffset()
			case listMaxTimestamp:
				off, ts, err := s.reader.OffsetOfMaxTimestamp(p, stable)
				if err != nil {
					s.log.Error("list offsets max timestamp", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					op.ErrorCode = wire.ErrUnknownServerError
				}
				op.Offset, op.Timestamp = off, ts
			default:
				off, ts, err := s.reader.OffsetForTimestamp(p, rp.Timestamp, stable)
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
