package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/tenants"
	"inlet/wire"
)

// CreateAcls v0-v3: each creation adds a prefix to a user (acls.go has the one shape a
// binding may take), durably, for connections already open too. Only super users may;
// others get CLUSTER_AUTHORIZATION_FAILED, as Kafka needs ALTER on the cluster. A binding for
// a user that does not exist (yet) is kept and applies once the user does.
const createACLsKey = 30

func init() {
	register(api{key: createACLsKey, min: 0, max: 3, handle: handleCreateACLs})
}

func handleCreateACLs(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	code, msg := int16(0), ""
	switch {
	case s.tenantsDisabled():
		code, msg = wire.ErrSecurityDisabled, "No authorizer is configured on the broker: this node has no SASL users."
	case !s.isSuperUser(r):
		code, msg = wire.ErrClusterAuthorizationFailed, "Only super.users may create ACLs."
	}
	results := make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var valid []aclBinding
	for i, c := range req.Creations {
		results[i] = kmsg.NewCreateACLsResponseResult()
		if req.Version == 0 {
			c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		b, why := bindingFromCreation(c)
		switch {
		case code != 0:
			results[i].ErrorCode, results[i].ErrorMessage = code, &msg
		case why != "":
			results[i].ErrorCode, results[i].ErrorMessage = wire.ErrInvalidRequest, &why
		default:
			valid = append(valid, b)
		}
	}
	if len(valid) > 0 {
		err := s.changeTenants(func(st *tenants.State) (bool, error) {
			changed := false
			for _, b := range valid {
				if s.changePrefix(st, b, true) {
					changed = true
				}
			}
			return changed, nil
		})
		if err != nil {
			s.log.Error("create acls", "err", err)
			emsg := "The ACLs could not be stored: " + err.Error()
			for i := range results {
				if results[i].ErrorCode == 0 {
					results[i].ErrorCode, results[i].ErrorMessage = wire.ErrUnknownServerError, &emsg
				}
			}
		}
	}
	resp.Results = results
	return resp, nil
}
