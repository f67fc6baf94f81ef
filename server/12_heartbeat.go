package server

import "github.com/twmb/franz-go/pkg/kmsg"

// Heartbeat v0-v4 (v3 group instance id, v4 flexible).
const heartbeatKey = 12

func init() {
	register(api{key: heartbeatKey, min: 0, max: 4, handle: handleHeartbeat})
}

func handleHeartbeat(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = s.groups.Heartbeat(req)
	return resp, nil
}
