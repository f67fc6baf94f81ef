package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/tenants"
)

// ACLs: Kafka's model (package acl) over the bindings in force, which are the config file's
// (each user's and each listener's anonymous principal's prefixes as PREFIXED ALLOW ALL
// bindings, tenants.PrefixBindings) less those DeleteAcls removed, plus those CreateAcls
// created (kept in tenants.json). Every change publishes a new acl.Authorizer in s.authz
// (copy-on-write, one atomic load per request), so it applies to open connections at once.
// Who a connection authorizes as is package authz's (subject.go).

// fileBindings are the bindings the config file's users and listeners give.
func (s *Server) fileBindings() []acl.Binding {
	var out []acl.Binding
	for _, u := range s.baseUsers {
		out = append(out, tenants.PrefixBindings(&u.Principal)...)
	}
	for _, l := range s.cfg.Listeners {
		if l.Anonymous != nil {
			out = append(out, tenants.PrefixBindings(l.Anonymous)...)
		}
	}
	return out
}

// publishACLs makes st's bindings the ones in force.
func (s *Server) publishACLs(st *tenants.State) {
	var super []string
	for _, name := range s.cfg.SuperUsers {
		super = append(super, "User:"+name)
	}
	s.authz.Store(acl.New(st.Bindings(s.fileBindings()), super, s.cfg.AllowEveryoneIfNoACLFound))
}

// subjectOf is r's subject (package authz).
func (s *Server) subjectOf(r *Request) authz.Subject { return authz.Of(r.Conn, s.authz) }

// aclFilterOf is a request's filter (v0 knows only LITERAL patterns).
func aclFilterOf(version int16, rt kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	if version == 0 {
		pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	return acl.Filter{ResourceType: rt, Name: name, Pattern: pattern, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// tenantsDisabled answers for the ACL and user APIs on a node without SASL users: Kafka's
// SECURITY_DISABLED (no authorizer).
func (s *Server) tenantsDisabled() bool { return s.cfg.Users == nil || s.tenants == nil }
