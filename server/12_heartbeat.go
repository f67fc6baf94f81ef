package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// Heartbeat v0-v4 (v3 group instance id, v4 flexible).
const heartbeatKey = 12

func init() {
	register(api{key: heartbeatKey, min: 0, max: 4, handle: handleHeartbeat,
		authz: before(authorizeHeartbeat, onGroups(acl.Read))})
}

func handleHeartbeat(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = s.groups.Heartbeat(req)
	return resp, nil
}

// authorizeHeartbeat: READ on the group (KafkaApis.handleHeartbeatRequest).
func authorizeHeartbeat(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.HeartbeatRequest)
	if !p.Group(acl.Read, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = wire.ErrGroupAuthorizationFailed
		return resp, nil
	}
	return nil, nil
}
