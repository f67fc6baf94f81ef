package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// OffsetCommit v0-v9. v1 carries a commit timestamp, v2-v4 a retention time (ignored, as
// Kafka ignores it since 2.1), v6 leader epochs, v7 group instance ids, v8 the flexible
// encoding, v9 the same request for KIP-848 groups (the generation is the member epoch:
// STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH; their members must use v9+). v10 (topic ids) is
// not advertised. Offsets are durable (one synced Pebble batch) before the response.
const offsetCommitKey = 8

func init() {
	register(api{key: offsetCommitKey, min: 0, max: 9, handle: handleOffsetCommit,
		authz: before(authorizeOffsetCommit, onGroups(acl.Read), onTopics(acl.Read))})
}

func handleOffsetCommit(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	existed, ok := s.admitGroup(r, req.Group, req.Version == 0 || req.Generation < 0) // group_bounds.go
	if !ok {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		appendOffsetCommitErrors(resp, req.Topics, errGroupBound)
		return resp, nil
	}
	resp := s.groups.Commit(req)
	s.ownGroup(r, req.Group, existed)
	return resp, nil
}

// authorizeOffsetCommit: READ on the group, then READ on each topic
// (KafkaApis.handleOffsetCommitRequest).
func authorizeOffsetCommit(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	// A topic it may not read is TOPIC_AUTHORIZATION_FAILED per partition, checked before
	// the topic is looked up (so whether it exists, and its partition count, stay hidden)
	// and never reaches the coordinator (nothing is stored for it).
	if !p.Group(acl.Read, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		appendOffsetCommitErrors(resp, req.Topics, wire.ErrGroupAuthorizationFailed)
		return resp, nil
	}
	var denied []kmsg.OffsetCommitRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return p.Topic(acl.Read, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	if len(req.Topics) == 0 {
		// As Kafka: nothing authorized is left, so the coordinator is not asked.
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		appendOffsetCommitErrors(resp, denied, wire.ErrTopicAuthorizationFailed)
		return resp, nil
	}
	return nil, func(kresp kmsg.Response) {
		appendOffsetCommitErrors(kresp.(*kmsg.OffsetCommitResponse), denied, wire.ErrTopicAuthorizationFailed)
	}
}

// appendOffsetCommitErrors answers every partition of topics with code.
func appendOffsetCommitErrors(resp *kmsg.OffsetCommitResponse, topics []kmsg.OffsetCommitRequestTopic, code int16) {
	for _, t := range topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, pt := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pt.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}
