package server

import "github.com/twmb/franz-go/pkg/kmsg"

// DeleteGroups v0-v2: only groups without members (NON_EMPTY_GROUP otherwise); the group's
// committed offsets go with it.
const deleteGroupsKey = 42

func init() {
	register(api{key: deleteGroupsKey, min: 0, max: 2, handle: handleDeleteGroups})
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
