package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// LeaveGroup v0-v5: v0-v2 one member id, v3+ a batch of members with instance ids (KIP-345),
// v5 a reason.
const leaveGroupKey = 13

func init() {
	register(api{key: leaveGroupKey, min: 0, max: 5, handle: handleLeaveGroup,
		authz: before(authorizeLeaveGroup, onGroups(acl.Read))})
}

func handleLeaveGroup(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	return s.groups.Leave(kreq.(*kmsg.LeaveGroupRequest)), nil
}

// authorizeLeaveGroup: READ on the group (KafkaApis.handleLeaveGroupRequest).
func authorizeLeaveGroup(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	if !p.Group(acl.Read, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = wire.ErrGroupAuthorizationFailed
		return resp, nil
	}
	return nil, nil
}
