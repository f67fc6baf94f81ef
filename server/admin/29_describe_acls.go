package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// DescribeAcls v0-v3 (KIP-140; v1 pattern types, KIP-290; v2 flexible): the bindings in force
// (acls.go) that the filter matches, grouped by resource pattern. A principal with DESCRIBE on
// the cluster (super users) sees all of them; any other sees only its own bindings, where
// Kafka answers CLUSTER_AUTHORIZATION_FAILED (a tenant may learn its own grants, nothing of
// the others'). Without SASL users there is nothing to describe: SECURITY_DISABLED, as Kafka
// without an authorizer.
const describeACLsKey = 29

func init() {
	register(API{Key: describeACLsKey, Min: 0, Max: 3, Handle: handleDescribeACLs,
		Authz: inHandler(onCluster(acl.Describe))})
}

func handleDescribeACLs(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if s.tenantsDisabled() {
		msg := "No authorizer is configured on the broker: this node has no SASL users."
		resp.ErrorCode, resp.ErrorMessage = wire.ErrSecurityDisabled, &msg
		return resp, nil
	}
	f := aclFilterOf(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if err := f.Validate(); err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, &msg
		return resp, nil
	}
	sub := s.subjectOf(r)
	own := ""
	if !sub.Cluster(acl.Describe) {
		own = sub.Principal()
	}
	type resource struct {
		rt      kmsg.ACLResourceType
		name    string
		pattern kmsg.ACLResourcePatternType
	}
	index := map[resource]int{} // its index in resp.Resources
	for _, b := range s.authz.Load().Bindings() {
		if !f.Matches(b) || own != "" && b.Principal != own {
			continue
		}
		key := resource{b.ResourceType, b.Name, b.Pattern}
		i, ok := index[key]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.ResourceType, b.Name, b.Pattern
			resp.Resources = append(resp.Resources, res)
			i = len(resp.Resources) - 1
			index[key] = i
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp, nil
}
