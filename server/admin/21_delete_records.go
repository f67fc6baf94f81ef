package admin

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/batchlog"
	"inlet/server/authz"
	"inlet/wire"
)

// DeleteRecords v0-v2: advances a partition's log start offset (-1: to the high watermark);
// batches wholly below it are deleted, the one it falls in stays whole (as Kafka's log start
// may fall inside a batch). On a diskless topic the new start is in the bucket first
// (keepLogStart).
const deleteRecordsKey = 21

func init() {
	register(API{Key: deleteRecordsKey, Min: 0, Max: 2, Handle: handleDeleteRecords,
		Authz: before(authorizeDeleteRecords, onTopics(acl.Delete))})
}

func handleDeleteRecords(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteRecordsResponseTopic()
		ot.Topic = rt.Topic
		t, _ := s.blog.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewDeleteRecordsResponseTopicPartition()
			op.Partition, op.LowWatermark = rp.Partition, -1
			if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			p := t.Partitions[rp.Partition]
			offset := rp.Offset
			if s.diskless != nil && t.Settings.Diskless {
				var code int16
				if offset, code = s.keepLogStart(t, p, offset); code != 0 {
					op.ErrorCode = code
					ot.Partitions = append(ot.Partitions, op)
					continue
				}
			}
			low, err := s.blog.DeleteRecords(p, offset)
			switch {
			case errors.Is(err, batchlog.ErrOffsetOutOfRange):
				op.ErrorCode = wire.ErrOffsetOutOfRange
			case err != nil:
				s.log.Error("delete records", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				op.ErrorCode = wire.ErrUnknownServerError
			default:
				op.LowWatermark = low
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// keepLogStart puts the log start a DeleteRecords to offset (-1: the high watermark) moves a
// diskless partition to in the bucket before the log moves it (diskless/log_start.go), and
// returns the offset to move it to: the high watermark it read, for -1, since the log's may have
// moved on since. A start the partition has already passed, or an offset past the high
// watermark, puts nothing (the log answers them). One not in the bucket in time is
// REQUEST_TIMED_OUT, the log start unmoved: its entry may land later, and a restore then moves
// the start (as a DeleteRecords that timed out in Kafka may still take effect).
func (s *Server) keepLogStart(t *batchlog.Topic, p *batchlog.Partition, offset int64) (int64, int16) {
	if offset == -1 {
		offset = p.HighWatermark()
	}
	if offset <= p.LogStartOffset() || offset > p.HighWatermark() {
		return offset, 0
	}
	if err := s.diskless.KeepLogStart(t.ID, p.Index, offset); err != nil {
		s.log.Error("delete records: the log start not in the bucket", "topic", t.Name, "partition", p.Index, "err", err)
		return offset, wire.ErrRequestTimedOut
	}
	return offset, 0
}

// authorizeDeleteRecords: DELETE on each topic (KafkaApis.handleDeleteRecordsRequest).
func authorizeDeleteRecords(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	var denied []kmsg.DeleteRecordsRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.DeleteRecordsRequestTopic) bool { return p.Topic(acl.Delete, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.DeleteRecordsResponse)
		for _, t := range denied {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, pt := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LowWatermark = pt.Partition, wire.ErrTopicAuthorizationFailed, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
