package server

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetFetch v0-v8. v2+ takes null topics as "every committed offset", v5 returns leader
// epochs, v7 RequireStable (nothing is ever pending: transactional offset commits are not
// served), v8 batches groups (KIP-709). v9 (KIP-848) and v10 (topic ids) are not advertised.
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
		return resp, nil
	}
	for _, rg := range req.Groups {
		og := kmsg.NewOffsetFetchResponseGroup()
		og.Group = rg.Group
		topics := map[string][]int32{}
		for _, t := range rg.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
		for _, t := range s.groups.FetchOffsets(rg.Group, topics, rg.Topics == nil) {
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
