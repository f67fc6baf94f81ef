package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/tenants"
	"inlet/wire"
)

// DeleteAcls v0-v3: every binding in force that a filter matches (acl.Filter: ANY and MATCH
// as Kafka's AclBindingFilter) is removed, durably and at once for connections already open,
// and listed in that filter's result; the config file's bindings are removed too (recorded
// as deleted). Needs ALTER on the cluster.
const deleteACLsKey = 31

func init() {
	register(API{Key: deleteACLsKey, Min: 0, Max: 3, Handle: handleDeleteACLs,
		Authz: inHandler(onCluster(acl.Alter))})
}

func handleDeleteACLs(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	code, msg := int16(0), ""
	switch {
	case s.tenantsDisabled():
		code, msg = wire.ErrSecurityDisabled, "No authorizer is configured on the broker: this node has no SASL users."
	case !s.subjectOf(r).Cluster(acl.Alter):
		code, msg = wire.ErrClusterAuthorizationFailed, "Deleting ACLs needs ALTER on the cluster."
	}
	filters := make([]acl.Filter, len(req.Filters))
	invalid := make([]string, len(req.Filters))
	for i, rf := range req.Filters {
		filters[i] = aclFilterOf(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
		if err := filters[i].Validate(); err != nil {
			invalid[i] = err.Error()
		}
	}
	matched := make([][]acl.Binding, len(req.Filters))
	if code == 0 {
		file := s.fileBindings()
		err := s.changeTenants(func(st *tenants.State) (bool, error) {
			clear(matched) // a retried change starts again
			bindings := st.Bindings(file)
			changed := false
			for i, f := range filters {
				if invalid[i] != "" {
					continue
				}
				for _, b := range bindings {
					if f.Matches(b) {
						matched[i] = append(matched[i], b)
						if st.RemoveACL(b, file) {
							changed = true
						}
					}
				}
			}
			return changed, nil
		})
		if err != nil {
			s.log.Error("delete acls", "err", err)
			code, msg = wire.ErrUnknownServerError, "The ACLs could not be removed: "+err.Error()
		}
	}
	for i := range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		switch {
		case code != 0:
			res.ErrorCode, res.ErrorMessage = code, &msg
		case invalid[i] != "":
			res.ErrorCode, res.ErrorMessage = wire.ErrInvalidRequest, &invalid[i]
		}
		if res.ErrorCode != 0 {
			resp.Results = append(resp.Results, res)
			continue
		}
		for _, b := range matched[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.Name, b.Pattern
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
