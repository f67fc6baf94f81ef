package kafka

import (
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/tenants"
)

// ACLs: Kafka's model (package acl) over the bindings in force, which are the config file's
// (each user's and each listener's anonymous principal's prefixes as PREFIXED ALLOW ALL
// bindings, tenants.PrefixBindings) less those DeleteAcls removed, plus those CreateAcls
// created (kept in tenants.json). Every change publishes a new acl.Authorizer in s.authz
// (copy-on-write, one atomic load per request), so it applies to open connections at once.
//
// A connection authorizes as Kafka's principal User:<name>: the SASL or certificate user, or
// for clients that do not authenticate (and certificates naming no user) the listener's
// anonymous principal (User:ANONYMOUS). A connection without a principal (a listener without
// security, or a certificate on a listener without anonymous prefixes) is not checked: as a
// Kafka broker without an authorizer, and KIP-430's authorized operations are then every
// operation.

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

// subject is who a request acts as, for authorization. The zero subject is unrestricted.
type subject struct {
	az        *acl.Authorizer // nil: unrestricted
	principal string          // User:<name>
	host      string          // the client's address
}

// subjectOf is r's subject.
func (s *Server) subjectOf(r *request) subject {
	sec := r.c.Security()
	if sec == nil {
		return subject{}
	}
	principal, ok := sec.ACLPrincipal()
	if !ok {
		return subject{} // no principal, or a certificate naming no user and no anonymous prefixes: unrestricted
	}
	az := s.authz.Load()
	if az == nil {
		az = denyAll // nothing published (yet): a restricted principal may do nothing
	}
	return subject{az: az, principal: principal, host: r.c.IP()}
}

// denyAll is an authorizer without bindings.
var denyAll = acl.New(nil, nil, false)

// restricted tells whether sub's requests are checked at all.
func (sub subject) restricted() bool { return sub.az != nil }

// may is the one check every API's declaration goes through (authz.go).
func (sub subject) may(rt acl.ResourceType, name string, op acl.Operation) bool {
	return sub.az == nil || sub.az.Authorize(sub.principal, sub.host, rt, name, op)
}

func (sub subject) topic(op acl.Operation, name string) bool { return sub.may(acl.Topic, name, op) }

// topicBytes is topic for a name that aliases a request (the produce path): not copied.
func (sub subject) topicBytes(op acl.Operation, name []byte) bool {
	if sub.az == nil {
		return true
	}
	return sub.az.Authorize(sub.principal, sub.host, acl.Topic, unsafe.String(unsafe.SliceData(name), len(name)), op)
}

func (sub subject) group(op acl.Operation, id string) bool { return sub.may(acl.Group, id, op) }

func (sub subject) txnID(op acl.Operation, id string) bool {
	return sub.may(acl.TransactionalID, id, op)
}

func (sub subject) cluster(op acl.Operation) bool { return sub.may(acl.Cluster, acl.ClusterName, op) }

// anyTopic tells whether sub may perform op on some topic (authorizeByResourceType).
func (sub subject) anyTopic(op acl.Operation) bool {
	return sub.az == nil || sub.az.AuthorizeAny(sub.principal, sub.host, acl.Topic, op)
}

// operations is KIP-430's authorized operations of sub on a resource: every operation of
// the type when unrestricted.
func (sub subject) operations(rt acl.ResourceType, name string) int32 {
	if sub.az == nil {
		return acl.AllOperations(rt)
	}
	return sub.az.AuthorizedOperations(sub.principal, sub.host, rt, name)
}

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
