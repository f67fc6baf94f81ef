package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

// OffsetFetch v0-v8. v2+ takes null topics as "every committed offset", v5 returns leader
// epochs, v7 RequireStable (a partition with an offset committed in a transaction not yet
// ended answers UNSTABLE_OFFSET_COMMIT and offset -1, as GroupMetadataManager.getOffsets
// does), v8 batches groups (KIP-709). v9 (KIP-848) and v10 (topic ids) are not advertised.
const offsetFetchKey = 9

func init() {
	register(api{key: offsetFetchKey, min: 0, max: 8, handle: handleOffsetFetch})
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
