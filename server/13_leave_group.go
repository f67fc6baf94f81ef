package server

import "github.com/twmb/franz-go/pkg/kmsg"

// LeaveGroup v0-v5: v0-v2 one member id, v3+ a batch of members with instance ids (KIP-345),
// v5 a reason.
const leaveGroupKey = 13

func init() {
	register(api{key: leaveGroupKey, min: 0, max: 5, handle: handleLeaveGroup})
}

func handleLeaveGroup(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	return s.groups.Leave(kreq.(*kmsg.LeaveGroupRequest)), nil
}
