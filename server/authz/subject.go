package authz

import (
	"sync/atomic"
	"unsafe"

	"inlet/acl"
	"inlet/conn"
)

// A connection authorizes as Kafka's principal User:<name>: the SASL or certificate user, or
// for clients that do not authenticate (and certificates naming no user) the listener's
// anonymous principal (User:ANONYMOUS). A connection without a principal (a listener without
// security, or a certificate on a listener without anonymous prefixes) is not checked: as a
// Kafka broker without an authorizer, and KIP-430's authorized operations are then every
// operation.

// Subject is who a request acts as, for authorization. The zero Subject is unrestricted.
type Subject struct {
	az        *acl.Authorizer // nil: unrestricted
	principal string          // User:<name>
	host      string          // the client's address
}

// Of is the subject of a request on connection c, under the bindings in force in bindings
// (published copy-on-write: one atomic load).
func Of(c *conn.Conn, bindings *atomic.Pointer[acl.Authorizer]) Subject {
	sec := c.Security()
	if sec == nil {
		return Subject{}
	}
	principal, ok := sec.ACLPrincipal()
	if !ok {
		return Subject{} // no principal, or a certificate naming no user and no anonymous prefixes: unrestricted
	}
	az := bindings.Load()
	if az == nil {
		az = denyAll // nothing published (yet): a restricted principal may do nothing
	}
	return Subject{az: az, principal: principal, host: c.IP()}
}

// denyAll is an authorizer without bindings.
var denyAll = acl.New(nil, nil, false)

// Principal is the principal sub acts as (User:<name>; "" when unrestricted).
func (sub Subject) Principal() string { return sub.principal }

// Restricted tells whether sub's requests are checked at all.
func (sub Subject) Restricted() bool { return sub.az != nil }

// May is the one check every API's declaration goes through (authz.go).
func (sub Subject) May(rt acl.ResourceType, name string, op acl.Operation) bool {
	return sub.az == nil || sub.az.Authorize(sub.principal, sub.host, rt, name, op)
}

func (sub Subject) Topic(op acl.Operation, name string) bool { return sub.May(acl.Topic, name, op) }

// TopicBytes is Topic for a name that aliases a request (the produce path): not copied.
func (sub Subject) TopicBytes(op acl.Operation, name []byte) bool {
	if sub.az == nil {
		return true
	}
	return sub.az.Authorize(sub.principal, sub.host, acl.Topic, unsafe.String(unsafe.SliceData(name), len(name)), op)
}

func (sub Subject) Group(op acl.Operation, id string) bool { return sub.May(acl.Group, id, op) }

func (sub Subject) TxnID(op acl.Operation, id string) bool {
	return sub.May(acl.TransactionalID, id, op)
}

func (sub Subject) Cluster(op acl.Operation) bool { return sub.May(acl.Cluster, acl.ClusterName, op) }

// AnyTopic tells whether sub may perform op on some topic (authorizeByResourceType).
func (sub Subject) AnyTopic(op acl.Operation) bool {
	return sub.az == nil || sub.az.AuthorizeAny(sub.principal, sub.host, acl.Topic, op)
}

// Operations is KIP-430's authorized operations of sub on a resource: every operation of
// the type when unrestricted.
func (sub Subject) Operations(rt acl.ResourceType, name string) int32 {
	if sub.az == nil {
		return acl.AllOperations(rt)
	}
	return sub.az.AuthorizedOperations(sub.principal, sub.host, rt, name)
}
