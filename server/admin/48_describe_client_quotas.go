package admin

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/quota"
	"inlet/wire"
)

// DescribeClientQuotas v0-v1 (KIP-546): the byte-rate quotas in force, of every entity of
// KIP-55 (a user, a client id, or both; each named or the default), matched by the request's
// filter as Kafka's ClientQuotasImage matches it: every component must match the entity's
// part of its type (a name exactly, the default, or any specified name, which here is any
// name but the default), and a strict filter matches only entities of exactly its types.
// Quotas are not kept for ip entities: a filter on ip matches nothing. Describing needs what
// describing every tenant needs (seesAllTenants), as Kafka needs DESCRIBE_CONFIGS on the
// cluster.
const describeClientQuotasKey = 48

func init() {
	register(API{Key: describeClientQuotasKey, Min: 0, Max: 1, Handle: handleDescribeClientQuotas,
		Authz: inHandler(onCluster(acl.Describe))})
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

func handleDescribeClientQuotas(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !s.seesAllTenants(r) {
		resp.ErrorCode, resp.ErrorMessage = wire.ErrClusterAuthorizationFailed, strp("Describing quotas needs a super user.")
		return resp, nil
	}
	// match[0] tests an entity's user, match[1] its client id ("" when it has none).
	var match [2]func(string) bool
	seen := map[string]bool{}
	ipFilter := false
	for _, c := range req.Components {
		if seen[c.EntityType] {
			resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("Duplicate filter component entity type "+c.EntityType)
			return resp, nil
		}
		seen[c.EntityType] = true
		var part int
		switch c.EntityType {
		case entityUser:
			part = 0
		case entityClientID:
			part = 1
		case entityIP:
			ipFilter = true
			continue
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
				resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("Exact match of a "+c.EntityType+" needs a name")
				return resp, nil
			}
			name := *c.Match
			match[part] = func(e string) bool { return e == name }
		case matchDefault:
			match[part] = func(e string) bool { return e == quota.DefaultUser }
		case matchSpecified:
			match[part] = func(e string) bool { return e != "" && e != quota.DefaultUser }
		default:
			resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("Unknown match type")
			return resp, nil
		}
	}
	if ipFilter {
		if seen[entityUser] || seen[entityClientID] {
			resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidRequest, strp("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
		}
		return resp, nil // no entity has an ip
	}
	bounds := s.quotas.Bounds()
	keys := make([]string, 0, len(bounds))
	for key := range bounds {
		parts := [2]string{}
		parts[0], parts[1] = quota.SplitEntityKey(key)
		ok := true
		n := 0
		for i, p := range parts {
			if p != "" {
				n++
			}
			if match[i] != nil && !match[i](p) {
				ok = false
			}
		}
		if req.Strict && n != len(req.Components) {
			ok = false
		}
		if ok {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		user, client := quota.SplitEntityKey(key)
		for _, p := range []struct{ typ, name string }{{entityUser, user}, {entityClientID, client}} {
			if p.name == "" {
				continue
			}
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type = p.typ
			if p.name != quota.DefaultUser {
				ent.Name = strp(p.name)
			}
			entry.Entity = append(entry.Entity, ent)
		}
		names := make([]string, 0, len(bounds[key]))
		for k := range bounds[key] {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, bounds[key][k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp, nil
}
