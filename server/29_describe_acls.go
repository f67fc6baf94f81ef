package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

// DescribeAcls v0-v3 (KIP-140; v1 pattern types, KIP-290; v2 flexible): every user's prefixes
// as ACL bindings (acls.go) matching the filter. A super user, or a principal scoped to every
// topic, sees all of them; any other principal sees its own. Without SASL users there is
// nothing to describe: SECURITY_DISABLED, as Kafka without an authorizer.
const describeACLsKey = 29

func init() {
	register(api{key: describeACLsKey, min: 0, max: 3, handle: handleDescribeACLs})
}

func handleDescribeACLs(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if s.tenantsDisabled() {
		msg := "No authorizer is configured on the broker: this node has no SASL users."
		resp.ErrorCode, resp.ErrorMessage = wire.ErrSecurityDisabled, &msg
		return resp, nil
	}
	f := aclFilter{req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType}
	if req.Version == 0 {
		f.pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	own := ""
	if !s.seesAllTenants(r) {
		own = "User:" + r.c.sec.principal.Name
	}
	index := map[aclBinding]int{} // resource (user left empty) -> its index in resp.Resources
	for _, b := range s.aclBindings() {
		if !f.matches(b) || own != "" && b.principal() != own {
			continue
		}
		if req.Version == 0 && b.pattern != kmsg.ACLResourcePatternTypeLiteral {
			continue // v0 knows only literal names
		}
		key := aclBinding{b.resourceType, b.name, b.pattern, ""}
		i, ok := index[key]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.resourceType, b.name, b.pattern
			resp.Resources = append(resp.Resources, res)
			i = len(resp.Resources) - 1
			index[key] = i
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host, acl.Operation, acl.PermissionType = b.principal(), "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, acl)
	}
	return resp, nil
}
