package server

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeGroups v0-v5 (v3 authorized operations, answered "not requested"; v4 instance ids).
// v6 (KIP-1043: GROUP_ID_NOT_FOUND for unknown groups) is not advertised; unknown groups are
// described as Dead, as before it.
const describeGroupsKey = 15

func init() {
	register(api{key: describeGroupsKey, min: 0, max: 5, handle: handleDescribeGroups})
}

func handleDescribeGroups(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, g := range req.Groups {
		resp.Groups = append(resp.Groups, s.groups.Describe(g))
	}
	return resp, nil
}
