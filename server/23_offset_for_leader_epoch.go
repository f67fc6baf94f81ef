package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// OffsetForLeaderEpoch v0-v4. Every partition has had one leader, this node, at epoch 0, so
// the end offset of epoch 0 is the high watermark and any later epoch is unknown
// (LeaderEpochFileCache.endOffsetFor answers UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET). A
// current leader epoch above 0 is one this node never had: UNKNOWN_LEADER_EPOCH.
const offsetForLeaderEpochKey = 23

func init() {
	register(api{key: offsetForLeaderEpochKey, min: 0, max: 4, handle: handleOffsetForLeaderEpoch,
		authz: before(authorizeOffsetForLeaderEpoch, onTopics(acl.Describe))})
}

func handleOffsetForLeaderEpoch(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
		ot.Topic = rt.Topic
		t, _ := s.blog.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition = rp.Partition
			op.LeaderEpoch, op.EndOffset = -1, -1
			switch {
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
			case req.Version >= 2 && rp.CurrentLeaderEpoch > t.Partitions[rp.Partition].LeaderEpoch():
				op.ErrorCode = wire.ErrUnknownLeaderEpoch
			case rp.LeaderEpoch == t.Partitions[rp.Partition].LeaderEpoch():
				p := t.Partitions[rp.Partition]
				op.LeaderEpoch, op.EndOffset = p.LeaderEpoch(), p.HighWatermark()
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// authorizeOffsetForLeaderEpoch: DESCRIBE on each topic (a client's request; Kafka's replicas
// need CLUSTER_ACTION).
func authorizeOffsetForLeaderEpoch(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	var denied []kmsg.OffsetForLeaderEpochRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) bool { return p.Topic(acl.Describe, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, pt := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
				rp.LeaderEpoch, rp.EndOffset = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
