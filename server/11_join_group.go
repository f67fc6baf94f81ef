package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// JoinGroup v0-v9 (classic protocol; package groups has the state machine). v1 adds the
// rebalance timeout, v4 MEMBER_ID_REQUIRED (KIP-394), v5 static membership (KIP-345), v7 the
// protocol type and name in the response, v8 a reason, v9 SkipAssignment (always false: the
// leader is always asked to assign). The request waits on the connection's worker until the
// rebalance completes, as Kafka parks it in a delayed join.
const joinGroupKey = 11

func init() {
	register(api{key: joinGroupKey, min: 0, max: 9, handle: handleJoinGroup,
		authz: before(authorizeJoinGroup, onGroups(acl.Read))})
}

func handleJoinGroup(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	clientID, host := clientIDHost(r)
	// Join may wait for the rebalance: the frame (and its budget) goes first, so a parked
	// JoinGroup holds nothing an event loop waits for (transport.Request.Shed). Its strings
	// are copies; the protocols' metadata aliases the frame and is copied out.
	for i := range req.Protocols {
		req.Protocols[i].Metadata = append([]byte{}, req.Protocols[i].Metadata...)
	}
	existed, ok := s.admitGroup(r, req.Group, req.MemberID == "") // group_bounds.go
	if !ok {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = errGroupBound, -1, req.MemberID
		return resp, nil
	}
	s.shed(r)
	resp := s.groups.Join(req, clientID, host, s.net.DrainStarted(), r.c.Done())
	s.ownGroup(r, req.Group, existed)
	return resp, nil
}

// authorizeJoinGroup: READ on the group (KafkaApis.handleJoinGroupRequest).
func authorizeJoinGroup(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.JoinGroupRequest)
	if !p.Group(acl.Read, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = wire.ErrGroupAuthorizationFailed, -1
		return resp, nil
	}
	return nil, nil
}
