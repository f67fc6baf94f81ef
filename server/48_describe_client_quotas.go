package server

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/quota"
	"inlet/wire"
)

// DescribeClientQuotas v0-v1 (KIP-546): the byte-rate quotas in force, of user entities (a
// user, or the default user), matched by the request's filter as Kafka matches it. Quotas are
// kept only for users: a filter on client-id or ip matches nothing. Describing needs what
// describing every tenant needs (seesAllTenants), as Kafka needs DESCRIBE_CONFIGS on the
// cluster.
const describeClientQuotasKey = 48

func init() {
	register(api{key: describeClientQuotasKey, min: 0, max: 1, handle: handleDescribeClientQuotas,
		authz: inHandler(onCluster(acl.Describe))})
}

// Quota entity types (ClientQuotaEntity) and filter match types.
const (
	entityUser     = "user"
	entityClientID = "client-id"
	entityIP       = "ip"

	matchExact     = 0
	matchDefault   = 1
	matchSpecified = 2
)

func handleDescribeClientQuotas(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !s.seesAllTenants(r) {
		resp.ErrorCode, resp.ErrorMessage = wire.ErrClusterAuthorizationFailed, strp("Describing quotas needs a super user.")
		return resp, nil
	}
	matchUser := func(string) bool { return true }
	seen := map[string]bool{}
	for _, c := range req.Components {
		if seen[c.EntityType] {
			resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("Duplicate filter component entity type "+c.EntityType)
			return resp, nil
		}
		seen[c.EntityType] = true
		switch c.EntityType {
		case entityUser:
		case entityClientID, entityIP:
			return resp, nil // no entity has one
		default:
			resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("Custom entity type '"+c.EntityType+"' not supported")
			return resp, nil
		}
		if c.MatchType != matchExact && c.Match != nil {
			resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("A default or any-name match takes no name")
			return resp, nil
		}
		switch c.MatchType {
		case matchExact:
			if c.Match == nil {
				resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("Exact match of a user needs a name")
				return resp, nil
			}
			name := *c.Match
			matchUser = func(e string) bool { return e == name }
		case matchDefault:
			matchUser = func(e string) bool { return e == quota.DefaultUser }
		case matchSpecified:
			matchUser = func(e string) bool { return e != quota.DefaultUser }
		default:
			resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("Unknown match type")
			return resp, nil
		}
	}
	// Every entity here is one user. Strict: an entity matches only when the filter names
	// exactly its types, so a strict filter without a user component matches none.
	if req.Strict && !seen[entityUser] {
		return resp, nil
	}
	bounds := s.quotas.Bounds()
	names := make([]string, 0, len(bounds))
	for e := range bounds {
		if matchUser(e) {
			names = append(names, e)
		}
	}
	sort.Strings(names)
	for _, e := range names {
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		ent.Type = entityUser
		if e != quota.DefaultUser {
			ent.Name = strp(e)
		}
		entry.Entity = append(entry.Entity, ent)
		keys := make([]string, 0, len(bounds[e]))
		for k := range bounds[e] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, bounds[e][k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp, nil
}
