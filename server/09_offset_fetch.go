package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// OffsetFetch v0-v8. v2+ takes null topics as "every committed offset", v5 returns leader
// epochs, v7 RequireStable (a partition with an offset committed in a transaction not yet
// ended answers UNSTABLE_OFFSET_COMMIT and offset -1, as GroupMetadataManager.getOffsets
// does), v8 batches groups (KIP-709), v9 a member id and epoch (KIP-848: a consumer group's
// member must fetch with its current epoch, else STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH or
// UNKNOWN_MEMBER_ID for the group). v10 (topic ids) is not advertised.
const offsetFetchKey = 9

func init() {
	register(api{key: offsetFetchKey, min: 0, max: 9, handle: handleOffsetFetch,
		authz: before(authorizeOffsetFetch, onGroups(acl.Describe), onTopics(acl.Describe))})
}

func handleOffsetFetch(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		topics := map[string][]int32{}
		for _, t := range req.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
		resp.Topics = s.groups.FetchOffsets(req.Group, topics, req.Topics == nil && req.Version >= 2)
		if req.RequireStable {
			s.markUnstable(req.Group, resp.Topics)
		}
		return resp, nil
	}
	for _, rg := range req.Groups {
		og := kmsg.NewOffsetFetchResponseGroup()
		og.Group = rg.Group
		if req.Version >= 9 {
			if code := s.groups.CheckOffsetFetch(rg.Group, rg.MemberID, rg.MemberEpoch); code != wire.ErrNone {
				og.ErrorCode = code
				resp.Groups = append(resp.Groups, og)
				continue
			}
		}
		topics := map[string][]int32{}
		for _, t := range rg.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
		fetched := s.groups.FetchOffsets(rg.Group, topics, rg.Topics == nil)
		if req.RequireStable {
			s.markUnstable(rg.Group, fetched)
		}
		for _, t := range fetched {
			gt := kmsg.NewOffsetFetchResponseGroupTopic()
			gt.Topic = t.Topic
			for _, p := range t.Partitions {
				gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				gt.Partitions = append(gt.Partitions, gp)
			}
			og.Topics = append(og.Topics, gt)
		}
		resp.Groups = append(resp.Groups, og)
	}
	return resp, nil
}

// markUnstable answers UNSTABLE_OFFSET_COMMIT for the partitions an open transaction has
// committed an offset of group for.
func (s *Server) markUnstable(group string, topics []kmsg.OffsetFetchResponseTopic) {
	for ti := range topics {
		for pi := range topics[ti].Partitions {
			p := &topics[ti].Partitions[pi]
			if s.txns.PendingOffset(group, topics[ti].Topic, p.Partition) {
				p.Offset, p.ErrorCode = -1, wire.ErrUnstableOffsetCommit
			}
		}
	}
}

// authorizeOffsetFetch: DESCRIBE on the group and on each topic
// (KafkaApis.handleOffsetFetchRequest).
func authorizeOffsetFetch(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	// KafkaApis.handleOffsetFetchRequest: DESCRIBE on the group; named topics it may not
	// describe are TOPIC_AUTHORIZATION_FAILED per partition (offset -1) without being
	// looked up; asked for every topic (null topics), only topics it may describe are
	// returned. v8 does the same per group.
	if req.Version < 8 {
		if !p.Group(acl.Describe, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = wire.ErrGroupAuthorizationFailed
			return resp, nil
		}
		var denied []kmsg.OffsetFetchRequestTopic
		req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.OffsetFetchRequestTopic) bool { return p.Topic(acl.Describe, t.Topic) })
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.OffsetFetchResponse)
			resp.Topics, _ = authz.SplitAllowed(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return p.Topic(acl.Describe, t.Topic) })
			for _, t := range denied {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, i := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					md := ""
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = i, -1, -1, &md, wire.ErrTopicAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
	}
	var deniedGroups []kmsg.OffsetFetchRequestGroup
	req.Groups, deniedGroups = authz.SplitAllowed(req.Groups, func(g kmsg.OffsetFetchRequestGroup) bool { return p.Group(acl.Describe, g.Group) })
	deniedTopics := make([][]kmsg.OffsetFetchRequestGroupTopic, len(req.Groups)) // by the kept group's index
	for i := range req.Groups {
		req.Groups[i].Topics, deniedTopics[i] = authz.SplitAllowed(req.Groups[i].Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool { return p.Topic(acl.Describe, t.Topic) })
	}
	kept := len(req.Groups)
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.OffsetFetchResponse)
		// The handler answers one group per request group, in order.
		for i := 0; i < kept && i < len(resp.Groups); i++ {
			rg := &resp.Groups[i]
			rg.Topics, _ = authz.SplitAllowed(rg.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return p.Topic(acl.Describe, t.Topic) })
			for _, t := range deniedTopics[i] {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, pi := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					md := ""
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = pi, -1, -1, &md, wire.ErrTopicAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
		}
		for _, g := range deniedGroups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, wire.ErrGroupAuthorizationFailed
			resp.Groups = append(resp.Groups, rg)
		}
	}
}
