package server

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/tenants"
)

// ACLs are the public face of prefix scoping (DescribeAcls, CreateAcls, DeleteAcls): each
// prefix a user has for topics, groups or transactional ids is one ACL binding of Kafka's
// shape — resource (TOPIC, GROUP or TRANSACTIONAL_ID, the prefix, PREFIXED; the prefix "*" as
// the LITERAL wildcard "*"), principal User:<name>, host "*", operation ALL, permission ALLOW.
// Nothing finer exists here, so a binding that is not of that shape (another operation, a
// DENY, a host) is refused with INVALID_REQUEST rather than stored and ignored: an operator
// must never believe a user is narrower than it is.

// aclBinding is one prefix of one user, as an ACL.
type aclBinding struct {
	resourceType kmsg.ACLResourceType
	name         string
	pattern      kmsg.ACLResourcePatternType
	user         string
}

func (b aclBinding) principal() string { return "User:" + b.user }

// prefix is the user's prefix the binding stands for.
func (b aclBinding) prefix() string { return b.name } // the wildcard "*" is the prefix "*"

func (b aclBinding) kind() tenants.Kind {
	switch b.resourceType {
	case kmsg.ACLResourceTypeGroup:
		return tenants.Group
	case kmsg.ACLResourceTypeTransactionalId:
		return tenants.TransactionalID
	}
	return tenants.Topic
}

// bindingOf is the binding of prefix of kind for user.
func bindingOf(rt kmsg.ACLResourceType, prefix, user string) aclBinding {
	if prefix == "*" || prefix == "" {
		return aclBinding{rt, "*", kmsg.ACLResourcePatternTypeLiteral, user}
	}
	return aclBinding{rt, prefix, kmsg.ACLResourcePatternTypePrefixed, user}
}

// aclBindings lists every user's prefixes as bindings, sorted by user.
func (s *Server) aclBindings() []aclBinding {
	var out []aclBinding
	for _, u := range s.cfg.Users.All() {
		for _, p := range u.TopicPrefixes {
			out = append(out, bindingOf(kmsg.ACLResourceTypeTopic, p, u.Name))
		}
		for _, p := range u.Groups() {
			out = append(out, bindingOf(kmsg.ACLResourceTypeGroup, p, u.Name))
		}
		for _, p := range u.TransactionalIDs() {
			out = append(out, bindingOf(kmsg.ACLResourceTypeTransactionalId, p, u.Name))
		}
	}
	return out
}

// aclFilter is the filter of DescribeAcls and DeleteAcls (Kafka's AclBindingFilter).
type aclFilter struct {
	resourceType    kmsg.ACLResourceType
	name            *string
	pattern         kmsg.ACLResourcePatternType
	principal, host *string
	operation       kmsg.ACLOperation
	permission      kmsg.ACLPermissionType
}

// matches is AclBindingFilter.matches for b (host "*", operation ALL, permission ALLOW).
func (f aclFilter) matches(b aclBinding) bool {
	if f.resourceType != kmsg.ACLResourceTypeAny && f.resourceType != b.resourceType {
		return false
	}
	if f.name != nil {
		switch f.pattern {
		case kmsg.ACLResourcePatternTypeAny:
			if *f.name != b.name {
				return false
			}
		case kmsg.ACLResourcePatternTypeMatch:
			// The bindings that apply to a resource of that name.
			switch b.pattern {
			case kmsg.ACLResourcePatternTypeLiteral:
				if b.name != "*" && b.name != *f.name {
					return false
				}
			case kmsg.ACLResourcePatternTypePrefixed:
				if !strings.HasPrefix(*f.name, b.name) {
					return false
				}
			}
		default:
			if f.pattern != b.pattern || *f.name != b.name {
				return false
			}
		}
	} else if f.pattern != kmsg.ACLResourcePatternTypeAny && f.pattern != kmsg.ACLResourcePatternTypeMatch && f.pattern != b.pattern {
		return false
	}
	if f.principal != nil && *f.principal != b.principal() {
		return false
	}
	if f.host != nil && *f.host != "*" {
		return false
	}
	if f.operation != kmsg.ACLOperationAny && f.operation != kmsg.ACLOperationAll {
		return false
	}
	return f.permission == kmsg.ACLPermissionTypeAny || f.permission == kmsg.ACLPermissionTypeAllow
}

// bindingFromCreation checks a CreateAcls entry against the one shape prefixes take and
// returns its binding, or a message saying why it cannot be one.
func bindingFromCreation(c kmsg.CreateACLsRequestCreation) (aclBinding, string) {
	switch c.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTransactionalId:
	default:
		return aclBinding{}, "only TOPIC, GROUP and TRANSACTIONAL_ID ACLs exist here: they scope a user by name prefix"
	}
	user, ok := strings.CutPrefix(c.Principal, "User:")
	if !ok || user == "" {
		return aclBinding{}, "the principal must be User:<name>"
	}
	if c.Host != "*" {
		return aclBinding{}, "ACLs apply to every host here: the host must be *"
	}
	if c.Operation != kmsg.ACLOperationAll || c.PermissionType != kmsg.ACLPermissionTypeAllow {
		return aclBinding{}, "only ALLOW ALL ACLs exist here: a prefix grants every operation on the names under it"
	}
	switch {
	case c.ResourcePatternType == kmsg.ACLResourcePatternTypePrefixed && c.ResourceName != "":
		return aclBinding{c.ResourceType, c.ResourceName, c.ResourcePatternType, user}, ""
	case c.ResourcePatternType == kmsg.ACLResourcePatternTypeLiteral && c.ResourceName == "*":
		return bindingOf(c.ResourceType, "*", user), ""
	}
	return aclBinding{}, "only PREFIXED ACLs (or the LITERAL wildcard *) exist here: a user is scoped by name prefixes"
}

// baseList is the config file's list of kind for user: what tenants' changes apply to.
func (s *Server) baseList(user string, kind tenants.Kind) []string {
	for _, u := range s.baseUsers {
		if u.Name != user {
			continue
		}
		switch kind {
		case tenants.Group:
			return u.Groups()
		case tenants.TransactionalID:
			return u.TransactionalIDs()
		}
		return u.TopicPrefixes
	}
	return nil
}

// changePrefix adds (or removes) b's prefix for its user in st. A user's groups and
// transactional ids follow its topic prefixes until changed themselves; the first change
// makes the list explicit, starting from what it is now (the topic prefixes added at run time
// included), so that removing one of them as a group removes just that.
func (s *Server) changePrefix(st *tenants.State, b aclBinding, add bool) bool {
	kind, base := b.kind(), s.baseList(b.user, b.kind())
	if kind != tenants.Topic && st.Prefixes[b.user][kind] == nil {
		if u, ok := s.cfg.Users.Lookup(b.user); ok {
			now := u.Groups()
			if kind == tenants.TransactionalID {
				now = u.TransactionalIDs()
			}
			for _, p := range now {
				st.AddPrefix(b.user, kind, p, base)
			}
		}
	}
	if add {
		return st.AddPrefix(b.user, kind, b.prefix(), base)
	}
	return st.RemovePrefix(b.user, kind, b.prefix(), base)
}

// tenantsDisabled answers for the ACL and user APIs on a node without SASL users: Kafka's
// SECURITY_DISABLED (no authorizer).
func (s *Server) tenantsDisabled() bool { return s.cfg.Users == nil || s.tenants == nil }
