package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/tenants"
	"inlet/wire"
)

// DeleteAcls v0-v3: every binding a filter matches is removed (the user loses that prefix),
// durably, for connections already open too, and listed in the result. Only super users may.
const deleteACLsKey = 31

func init() {
	register(api{key: deleteACLsKey, min: 0, max: 3, handle: handleDeleteACLs})
}

func handleDeleteACLs(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	code, msg := int16(0), ""
	switch {
	case s.tenantsDisabled():
		code, msg = wire.ErrSecurityDisabled, "No authorizer is configured on the broker: this node has no SASL users."
	case !s.isSuperUser(r):
		code, msg = wire.ErrClusterAuthorizationFailed, "Only super.users may delete ACLs."
	}
	var matched [][]aclBinding
	if code == 0 {
		bindings := s.aclBindings()
		for _, rf := range req.Filters {
			f := aclFilter{rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType}
			if req.Version == 0 {
				f.pattern = kmsg.ACLResourcePatternTypeLiteral
			}
			var m []aclBinding
			for _, b := range bindings {
				if f.matches(b) {
					m = append(m, b)
				}
			}
			matched = append(matched, m)
		}
		err := s.changeTenants(func(st *tenants.State) (bool, error) {
			changed := false
			for _, m := range matched {
				for _, b := range m {
					if s.changePrefix(st, b, false) {
						changed = true
					}
				}
			}
			return changed, nil
		})
		if err != nil {
			s.log.Error("delete acls", "err", err)
			code, msg, matched = wire.ErrUnknownServerError, "The ACLs could not be removed: "+err.Error(), nil
		}
	}
	for i := range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		if code != 0 {
			res.ErrorCode, res.ErrorMessage = code, &msg
			resp.Results = append(resp.Results, res)
			continue
		}
		for _, b := range matched[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.resourceType, b.name, b.pattern
			m.Principal, m.Host, m.Operation, m.PermissionType = b.principal(), "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
