package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// OffsetDelete v0 (KIP-496): deletes committed offsets of topics the group does not consume.
const offsetDeleteKey = 47

func init() {
	register(api{key: offsetDeleteKey, min: 0, max: 0, handle: handleOffsetDelete,
		authz: before(authorizeOffsetDelete, onGroups(acl.Delete), onTopics(acl.Read))})
}

func handleOffsetDelete(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	return s.groups.DeleteOffsets(kreq.(*kmsg.OffsetDeleteRequest)), nil
}

// authorizeOffsetDelete: DELETE on the group, READ on each topic
// (KafkaApis.handleOffsetDeleteRequest).
func authorizeOffsetDelete(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	// KafkaApis.handleOffsetDeleteRequest: DELETE on the group (a group error is the
	// top-level error), READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition,
	// never looked up, never deleted).
	if !p.Group(acl.Delete, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = wire.ErrGroupAuthorizationFailed
		return resp, nil
	}
	var denied []kmsg.OffsetDeleteRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return p.Topic(acl.Read, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != wire.ErrNone {
			return // Kafka answers a group error alone
		}
		for _, t := range denied {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, pt := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
