package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// SyncGroup v0-v5: the leader's assignment, which followers wait for. v3 adds the group
// instance id, v5 the protocol type and name (checked against the group's).
const syncGroupKey = 14

func init() {
	register(api{key: syncGroupKey, min: 0, max: 5, handle: handleSyncGroup,
		authz: before(authorizeSyncGroup, onGroups(acl.Read))})
}

func handleSyncGroup(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	// Sync may wait for the leader: the frame goes first, as JoinGroup's does; the
	// assignments alias it and are copied out.
	for i := range req.GroupAssignment {
		req.GroupAssignment[i].MemberAssignment = append([]byte{}, req.GroupAssignment[i].MemberAssignment...)
	}
	s.shed(r)
	return s.groups.Sync(req, s.net.DrainStarted(), r.c.Done()), nil
}

// authorizeSyncGroup: READ on the group (KafkaApis.handleSyncGroupRequest).
func authorizeSyncGroup(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.SyncGroupRequest)
	if !p.Group(acl.Read, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = wire.ErrGroupAuthorizationFailed
		return resp, nil
	}
	return nil, nil
}
