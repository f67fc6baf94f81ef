package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// DeleteGroups v0-v2: only groups without members (NON_EMPTY_GROUP otherwise); the group's
// committed offsets go with it.
const deleteGroupsKey = 42

func init() {
	register(api{key: deleteGroupsKey, min: 0, max: 2, handle: handleDeleteGroups,
		authz: before(authorizeDeleteGroups, onGroups(acl.Delete))})
}

func handleDeleteGroups(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = g
		dg.ErrorCode = s.groups.Delete(g)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}

// authorizeDeleteGroups: DELETE on each group (KafkaApis.handleDeleteGroupsRequest).
func authorizeDeleteGroups(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	// Groups outside the principal's prefixes are taken out of the request before the
	// handler runs, so they are never deleted, and answered GROUP_AUTHORIZATION_FAILED.
	var denied []string
	req.Groups, denied = authz.SplitAllowed(req.Groups, func(g string) bool { return p.Group(acl.Delete, g) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.DeleteGroupsResponse)
		for _, g := range denied {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, wire.ErrGroupAuthorizationFailed
			resp.Groups = append(resp.Groups, rg)
		}
	}
}
