package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// DescribeGroups v0-v5 (v3 authorized operations, KIP-430, when asked; v4 instance ids).
// v6 (KIP-1043: GROUP_ID_NOT_FOUND for unknown groups) is not advertised; unknown groups are
// described as Dead, as before it.
const describeGroupsKey = 15

func init() {
	register(api{key: describeGroupsKey, min: 0, max: 5, handle: handleDescribeGroups,
		authz: before(authorizeDescribeGroups, onGroups(acl.Describe))})
}

func handleDescribeGroups(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	sub := s.subjectOf(r)
	for _, g := range req.Groups {
		d := s.groups.Describe(g)
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = sub.Operations(acl.Group, g)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil
}

// authorizeDescribeGroups: DESCRIBE on each group (KafkaApis.handleDescribeGroupsRequest).
func authorizeDescribeGroups(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	var denied []string
	req.Groups, denied = authz.SplitAllowed(req.Groups, func(g string) bool { return p.Group(acl.Describe, g) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.DescribeGroupsResponse)
		for _, g := range denied {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode, rg.AuthorizedOperations = g, wire.ErrGroupAuthorizationFailed, authorizedOperationsOmitted
			resp.Groups = append(resp.Groups, rg)
		}
	}
}
