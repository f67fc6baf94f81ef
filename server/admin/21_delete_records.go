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
// may fall inside a batch).
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
			low, err := s.blog.DeleteRecords(t.Partitions[rp.Partition], rp.Offset)
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
