package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/tenants"
	"inlet/wire"
)

// CreateAcls v0-v3: each creation is validated as Kafka does (acl.Binding.Validate: resource
// type, LITERAL or PREFIXED, an operation of the resource type, ALLOW or DENY, User:<name>,
// kafka-cluster for CLUSTER) and stored durably, in force at once for connections already
// open. Needs ALTER on the cluster (super users): CLUSTER_AUTHORIZATION_FAILED otherwise. A
// binding for a user that does not exist (yet) is kept and applies once the user does.
const createACLsKey = 30

func init() {
	register(API{Key: createACLsKey, Min: 0, Max: 3, Handle: handleCreateACLs,
		Authz: inHandler(onCluster(acl.Alter))})
}

func handleCreateACLs(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	code, msg := int16(0), ""
	switch {
	case s.tenantsDisabled():
		code, msg = wire.ErrSecurityDisabled, "No authorizer is configured on the broker: this node has no SASL users."
	case !s.subjectOf(r).Cluster(acl.Alter):
		code, msg = wire.ErrClusterAuthorizationFailed, "Creating ACLs needs ALTER on the cluster."
	}
	results := make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var valid []acl.Binding
	for i, c := range req.Creations {
		results[i] = kmsg.NewCreateACLsResponseResult()
		if req.Version == 0 {
			c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		b := acl.Binding{ResourceType: c.ResourceType, Name: c.ResourceName, Pattern: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if code != 0 {
			results[i].ErrorCode, results[i].ErrorMessage = code, &msg
			continue
		}
		if err := b.Validate(); err != nil {
			why := err.Error()
			results[i].ErrorCode, results[i].ErrorMessage = wire.ErrInvalidRequest, &why
			continue
		}
		valid = append(valid, b)
	}
	if len(valid) > 0 {
		file := s.fileBindings()
		err := s.changeTenants(func(st *tenants.State) (bool, error) {
			changed := false
			for _, b := range valid {
				if st.AddACL(b, file) {
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
