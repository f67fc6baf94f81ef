package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/server/read"
	"inlet/wire"
)

// OffsetForLeaderEpoch v0-v4: the end offset of a leader epoch, which a consumer asks for
// the epoch of the last record it read, to learn whether the log it read from was truncated
// below its position (KIP-320). v2+ names the current leader epoch, checked against
// Config.LeaderEpoch (read.CheckLeaderEpoch). With e the current epoch, a requested epoch:
//   - above e is one this node never knew: UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET (-1,
//     -1), as LeaderEpochFileCache.endOffsetFor answers;
//   - e, or below e: the requested epoch and the high watermark. No history of epochs is
//     kept, so the end of an earlier epoch is not known; the high watermark stands for it
//     because nothing a consumer can have read of a diskless partition is missing from the
//     log: a takeover truncates nothing below the old writer's last high watermark. A
//     diskless partition's high watermark is published only once the commit object holding
//     its batches, and every object before it, is in the bucket and the node still holds
//     the lease (diskless/committer.go), and the node that takes the prefix over restores
//     every object in the bucket, so its log ends at or past every offset a consumer of the
//     old writer read. A consumer is thus never told of a truncation that did not happen.
//     (A local or tiered topic's tail that was not yet in the bucket is lost at a takeover:
//     the log end falls below the position of a consumer that read it, and the answer tells
//     it of the truncation if it asks before new records reach its position; Kafka, which
//     answers the end of the requested epoch itself, would tell it later too. Hence
//     docs/standby.md asks for diskless topics only.)
const offsetForLeaderEpochKey = 23

func init() {
	register(api{key: offsetForLeaderEpochKey, min: 0, max: 4, handle: handleOffsetForLeaderEpoch,
		authz: before(authorizeOffsetForLeaderEpoch, onTopics(acl.Describe))})
}

func handleOffsetForLeaderEpoch(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	epoch := s.leaderEpoch()
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
			case req.Version >= 2 && read.CheckLeaderEpoch(rp.CurrentLeaderEpoch, epoch) != 0:
				op.ErrorCode = read.CheckLeaderEpoch(rp.CurrentLeaderEpoch, epoch)
			case rp.LeaderEpoch >= 0 && rp.LeaderEpoch <= epoch:
				op.LeaderEpoch, op.EndOffset = rp.LeaderEpoch, t.Partitions[rp.Partition].HighWatermark()
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
