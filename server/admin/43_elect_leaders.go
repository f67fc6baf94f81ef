package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// ElectLeaders v0-v2 (KIP-183 preferred elections; v1 KIP-460 election types; v2 flexible).
// The one node is every partition's only replica and its leader, so no election is ever
// needed: each named partition is answered ELECTION_NOT_NEEDED, which is how Kafka reports
// that the wanted leader already leads (and what kafka-leader-election.sh prints as "Valid
// replica already elected"), and an unknown one UNKNOWN_TOPIC_OR_PARTITION. A null topic
// list (every partition) is answered with no partitions, as Kafka leaves out the ones that
// needed no election.
const electLeadersKey = 43

func init() {
	register(API{Key: electLeadersKey, Min: 0, Max: 2, Handle: handleElectLeaders,
		Authz: before(authorizeElectLeaders, onCluster(acl.Alter))})
}

func handleElectLeaders(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = wire.ErrInvalidRequest
		return resp, nil
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewElectLeadersResponseTopic()
		ot.Topic = rt.Topic
		t, ok := s.blog.Topic(rt.Topic)
		for _, i := range rt.Partitions {
			op := kmsg.NewElectLeadersResponseTopicPartition()
			op.Partition = i
			if !ok || i < 0 || int(i) >= len(t.Partitions) {
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
				msg := "The partition does not exist."
				op.ErrorMessage = &msg
			} else {
				op.ErrorCode = wire.ErrElectionNotNeeded
				msg := "Leader election not needed: the preferred leader, the only replica, already leads the partition."
				op.ErrorMessage = &msg
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}
