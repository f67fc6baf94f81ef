package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// ConsumerGroupDescribe v0-v1 (KIP-848; v1 the member type, KIP-1099): a consumer group's
// epochs, assignor and members with their subscriptions, current and target assignments. A
// classic group, or none, is GROUP_ID_NOT_FOUND.
const consumerGroupDescribeKey = 69

func init() {
	register(api{key: consumerGroupDescribeKey, min: 0, max: 1, handle: handleConsumerGroupDescribe,
		authz: before(authorizeConsumerGroupDescribe, onGroups(acl.Describe), onTopics(acl.Describe))})
}

func handleConsumerGroupDescribe(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	sub := s.subjectOf(r)
	for _, g := range req.Groups {
		d := s.groups.DescribeConsumer(g)
		dg := d.Group
		if sub.Restricted() && dg.ErrorCode == wire.ErrNone {
			// As KafkaApis.handleConsumerGroupDescribe: a group naming a topic the principal
			// may not describe is not shown.
			for _, t := range d.Topics {
				if !sub.Topic(acl.Describe, t) {
					dg = kmsg.NewConsumerGroupDescribeResponseGroup()
					msg := "The described group uses topics that the client is not authorized to describe."
					dg.Group, dg.ErrorCode, dg.ErrorMessage = g, wire.ErrTopicAuthorizationFailed, &msg
					dg.AuthorizedOperations = authorizedOperationsOmitted
					break
				}
			}
		}
		if req.IncludeAuthorizedOperations && dg.ErrorCode == wire.ErrNone {
			dg.AuthorizedOperations = sub.Operations(acl.Group, g)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}

// authorizeConsumerGroupDescribe: DESCRIBE on each group; the topics its members use are
// checked in the handler, once the group is known.
func authorizeConsumerGroupDescribe(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	var denied []string
	req.Groups, denied = authz.SplitAllowed(req.Groups, func(g string) bool { return p.Group(acl.Describe, g) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range denied {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode, rg.AuthorizedOperations = g, wire.ErrGroupAuthorizationFailed, authorizedOperationsOmitted
			resp.Groups = append(resp.Groups, rg)
		}
	}
}
