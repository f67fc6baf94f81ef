package admin

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// CreatePartitions v0-v3: grows a topic (never shrinks: INVALID_PARTITIONS); assignments may
// only name this node.
const createPartitionsKey = 37

func init() {
	register(API{Key: createPartitionsKey, Min: 0, Max: 3, Handle: handleCreatePartitions,
		Authz: before(authorizeCreatePartitions, onTopics(acl.Alter))})
}

func handleCreatePartitions(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	for _, rt := range req.Topics {
		ot := kmsg.NewCreatePartitionsResponseTopic()
		ot.Topic = rt.Topic
		fail := func(code int16, msg string) { ot.ErrorCode, ot.ErrorMessage = code, &msg }
		t, ok := s.blog.Topic(rt.Topic)
		switch {
		case seen[rt.Topic] > 1:
			fail(wire.ErrInvalidRequest, "Duplicate topic in request.")
		case !ok:
			fail(wire.ErrUnknownTopicOrPartition, fmt.Sprintf("The topic '%s' does not exist.", rt.Topic))
		case int(rt.Count) <= len(t.Partitions):
			if int(rt.Count) == len(t.Partitions) {
				fail(wire.ErrInvalidPartitions, fmt.Sprintf("Topic already has %d partitions.", len(t.Partitions)))
			} else {
				fail(wire.ErrInvalidPartitions, fmt.Sprintf("Topic currently has %d partitions, which is higher than the requested %d.", len(t.Partitions), rt.Count))
			}
		case rt.Count > maxPartitionsPerTopic:
			fail(wire.ErrInvalidPartitions, tooManyPartitions)
		case req.Version >= 3 && s.mutationRefused(r, fail, &resp.ThrottleMillis):
		case rt.Assignment != nil && len(rt.Assignment) != int(rt.Count)-len(t.Partitions):
			fail(wire.ErrInvalidReplicaAssignment, fmt.Sprintf("Increasing the number of partitions by %d but %d assignments provided.", int(rt.Count)-len(t.Partitions), len(rt.Assignment)))
		default:
			for _, a := range rt.Assignment {
				if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
					fail(wire.ErrInvalidReplicaAssignment, fmt.Sprintf("Replica assignments may only name broker %d.", s.cfg.NodeID))
					break
				}
			}
			if ot.ErrorCode == 0 {
				if code, msg := CheckPartitionBound(s.blog, s.partitionBounds(), t.Creator, int(rt.Count)-len(t.Partitions)); code != 0 {
					fail(code, msg)
				}
			}
			if ot.ErrorCode != 0 || req.ValidateOnly {
				break
			}
			resp.ThrottleMillis = max(resp.ThrottleMillis, RecordMutations(r.Conn, r.ClientID, int(rt.Count)-len(t.Partitions)))
			if nt, err := s.blog.AddPartitions(rt.Topic, int(rt.Count)); err != nil {
				s.log.Error("create partitions", "topic", rt.Topic, "err", err)
				fail(wire.ErrUnknownServerError, err.Error())
			} else if code, msg := s.describe(nt); code != 0 {
				fail(code, msg)
			} else {
				s.groups.TopicsChanged() // consumer groups subscribing to it rebalance
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// authorizeCreatePartitions: ALTER on each topic (KafkaApis.handleCreatePartitionsRequest).
func authorizeCreatePartitions(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	var denied []kmsg.CreatePartitionsRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) bool { return p.Topic(acl.Alter, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.CreatePartitionsResponse)
		for _, t := range denied {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, wire.ErrTopicAuthorizationFailed
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
