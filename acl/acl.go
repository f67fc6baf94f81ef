// Package acl is Kafka's authorization model: ACL bindings and the evaluator that decides
// whether a principal, connecting from a host, may perform an operation on a resource. It is
// pure (no I/O, no locks): an Authorizer is built once from a list of bindings and never
// changes, so the server publishes a new one on every change and connections read it with one
// atomic load.
//
// The semantics are Kafka's AclAuthorizer (kafka.security.authorizer.AclAuthorizer, and
// StandardAuthorizer in KRaft, which keeps them):
//   - a binding applies to a resource when its pattern matches the name: LITERAL equal, the
//     LITERAL wildcard "*" any name, PREFIXED a name that starts with it;
//   - it applies to a request when its principal is the request's or "User:*", its host is
//     the client's address or "*", and its operation is the one asked or ALL;
//   - a super user is allowed everything, bindings or not;
//   - any DENY that applies wins over every ALLOW;
//   - an ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, and one of ALTER_CONFIGS
//     implies DESCRIBE_CONFIGS (AclAuthorizer's "allowOps");
//   - a resource that no binding (of any principal) matches is allowed to everyone only when
//     allow.everyone.if.no.acl.found is set (default false).
package acl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Short names for Kafka's enums (the values are the protocol's, kmsg's types).
type (
	ResourceType = kmsg.ACLResourceType
	PatternType  = kmsg.ACLResourcePatternType
	Operation    = kmsg.ACLOperation
	Permission   = kmsg.ACLPermissionType
)

const (
	Topic           = kmsg.ACLResourceTypeTopic
	Group           = kmsg.ACLResourceTypeGroup
	Cluster         = kmsg.ACLResourceTypeCluster
	TransactionalID = kmsg.ACLResourceTypeTransactionalId
	DelegationToken = kmsg.ACLResourceTypeDelegationToken

	Literal  = kmsg.ACLResourcePatternTypeLiteral
	Prefixed = kmsg.ACLResourcePatternTypePrefixed

	All             = kmsg.ACLOperationAll
	Read            = kmsg.ACLOperationRead
	Write           = kmsg.ACLOperationWrite
	Create          = kmsg.ACLOperationCreate
	Delete          = kmsg.ACLOperationDelete
	Alter           = kmsg.ACLOperationAlter
	Describe        = kmsg.ACLOperationDescribe
	ClusterAction   = kmsg.ACLOperationClusterAction
	DescribeConfigs = kmsg.ACLOperationDescribeConfigs
	AlterConfigs    = kmsg.ACLOperationAlterConfigs
	IdempotentWrite = kmsg.ACLOperationIdempotentWrite

	Allow = kmsg.ACLPermissionTypeAllow
	Deny  = kmsg.ACLPermissionTypeDeny
)

// Wildcard is the LITERAL name that matches every resource, the principal "User:*" every
// user and the host every address.
const Wildcard = "*"

// ClusterName is the one name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// Binding is one ACL: a resource pattern and an access-control entry.
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	Name         string       `json:"name"`
	Pattern      PatternType  `json:"pattern"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

// String is the binding as kafka-acls.sh lists it.
func (b Binding) String() string {
	return fmt.Sprintf("(%s %s %s) %s %s from host %s: %s", b.ResourceType, b.Pattern, b.Name, b.Principal, b.Permission, b.Host, b.Operation)
}

// Validate checks b as CreateAcls does (Kafka's AclControlManager.validateNewAcl); the error
// is the message for INVALID_REQUEST.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case Topic, Group, Cluster, TransactionalID, DelegationToken, kmsg.ACLResourceTypeUser:
	default:
		return fmt.Errorf("invalid resource type %s", b.ResourceType)
	}
	switch b.Pattern {
	case Literal, Prefixed:
	default:
		return fmt.Errorf("invalid pattern type %s: a binding is LITERAL or PREFIXED", b.Pattern)
	}
	if b.Name == "" {
		return fmt.Errorf("resource name should not be empty")
	}
	if b.ResourceType == Cluster && (b.Pattern != Literal || b.Name != ClusterName) {
		return fmt.Errorf("the only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if kind, name, ok := strings.Cut(b.Principal, ":"); !ok || kind == "" || name == "" {
		return fmt.Errorf("could not parse principal %q: a principal is User:<name>", b.Principal)
	}
	if b.Host == "" {
		return fmt.Errorf("the host should not be empty: * is every host")
	}
	switch b.Operation {
	case kmsg.ACLOperationUnknown, kmsg.ACLOperationAny:
		return fmt.Errorf("invalid operation %s", b.Operation)
	}
	if b.Operation != All && !slices.Contains(Operations(b.ResourceType), b.Operation) {
		return fmt.Errorf("operation %s does not apply to resource type %s", b.Operation, b.ResourceType)
	}
	switch b.Permission {
	case Allow, Deny:
	default:
		return fmt.Errorf("invalid permission type %s", b.Permission)
	}
	return nil
}

// Operations are the operations that apply to resource type rt (Kafka's
// AclEntry.supportedOperations): what KIP-430's authorized operations are made of.
func Operations(rt ResourceType) []Operation {
	switch rt {
	case Topic:
		return []Operation{Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs}
	case Group:
		return []Operation{Read, Describe, Delete}
	case Cluster:
		return []Operation{Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe}
	case TransactionalID:
		return []Operation{Describe, Write}
	case DelegationToken:
		return []Operation{Describe}
	case kmsg.ACLResourceTypeUser:
		return []Operation{kmsg.ACLOperationCreateTokens, kmsg.ACLOperationDescribeTokens}
	}
	return nil
}

// AllOperations is KIP-430's bit set of every operation of rt (bit n: operation n): what a
// node without an authorizer answers.
func AllOperations(rt ResourceType) int32 {
	var bits int32
	for _, op := range Operations(rt) {
		bits |= 1 << op
	}
	return bits
}

// Filter is Kafka's AclBindingFilter (DescribeAcls, DeleteAcls): nil strings and the ANY
// values match everything; the pattern MATCH selects the bindings that apply to a resource of
// that name (its LITERAL, the wildcard, and the PREFIXED ones it starts with).
type Filter struct {
	ResourceType    ResourceType
	Name            *string
	Pattern         PatternType
	Principal, Host *string
	Operation       Operation
	Permission      Permission
}

// Matches is AclBindingFilter.matches.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	anyPattern := f.Pattern == kmsg.ACLResourcePatternTypeAny
	match := f.Pattern == kmsg.ACLResourcePatternTypeMatch
	if !anyPattern && !match && f.Pattern != b.Pattern {
		return false
	}
	if f.Name != nil {
		switch {
		case anyPattern || f.Pattern == b.Pattern:
			if *f.Name != b.Name {
				return false
			}
		case b.Pattern == Literal:
			if *f.Name != b.Name && b.Name != Wildcard {
				return false
			}
		case b.Pattern == Prefixed:
			if !strings.HasPrefix(*f.Name, b.Name) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

// Validate checks f as DeleteAcls does: an UNKNOWN value cannot match anything Kafka
// would store, so Kafka refuses the filter (INVALID_REQUEST).
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown:
		return fmt.Errorf("the resource type is UNKNOWN")
	case f.Pattern == kmsg.ACLResourcePatternTypeUnknown:
		return fmt.Errorf("the pattern type is UNKNOWN")
	case f.Operation == kmsg.ACLOperationUnknown:
		return fmt.Errorf("the operation is UNKNOWN")
	case f.Permission == kmsg.ACLPermissionTypeUnknown:
		return fmt.Errorf("the permission type is UNKNOWN")
	}
	return nil
}
