package acl

import (
	"slices"
	"strings"
)

// Authorizer decides requests against a fixed set of bindings. Safe for concurrent use (it
// never changes); Authorize does not allocate.
type Authorizer struct {
	bindings    []Binding
	superUsers  []string // principals, "User:<name>"
	allowIfNone bool
	byType      map[ResourceType]*resourceACLs
}

type resourceACLs struct {
	literal  map[string][]entry // by name; the wildcard under "*"
	prefixed []prefixedEntries
}

type prefixedEntries struct {
	prefix  string
	entries []entry
}

type entry struct {
	principal, host string
	op              Operation
	perm            Permission
}

// New builds an Authorizer over bindings (kept as given; duplicates are harmless).
// superUsers are principals ("User:<name>") allowed everything; allowEveryoneIfNoACL is
// Kafka's allow.everyone.if.no.acl.found.
func New(bindings []Binding, superUsers []string, allowEveryoneIfNoACL bool) *Authorizer {
	a := &Authorizer{
		bindings:    slices.Clone(bindings),
		superUsers:  slices.Clone(superUsers),
		allowIfNone: allowEveryoneIfNoACL,
		byType:      map[ResourceType]*resourceACLs{},
	}
	for _, b := range bindings {
		r := a.byType[b.ResourceType]
		if r == nil {
			r = &resourceACLs{literal: map[string][]entry{}}
			a.byType[b.ResourceType] = r
		}
		e := entry{b.Principal, b.Host, b.Operation, b.Permission}
		switch b.Pattern {
		case Literal:
			r.literal[b.Name] = append(r.literal[b.Name], e)
		case Prefixed:
			i := slices.IndexFunc(r.prefixed, func(p prefixedEntries) bool { return p.prefix == b.Name })
			if i < 0 {
				r.prefixed = append(r.prefixed, prefixedEntries{prefix: b.Name})
				i = len(r.prefixed) - 1
			}
			r.prefixed[i].entries = append(r.prefixed[i].entries, e)
		}
	}
	return a
}

// Bindings returns the bindings a was built from (a copy).
func (a *Authorizer) Bindings() []Binding { return slices.Clone(a.bindings) }

// IsSuperUser tells whether principal is one of super.users.
func (a *Authorizer) IsSuperUser(principal string) bool {
	return slices.Contains(a.superUsers, principal)
}

// implies tells whether an ALLOW of granted allows op (AclAuthorizer: DESCRIBE is implied by
// READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS; ALL implies everything).
func implies(granted, op Operation) bool {
	switch {
	case granted == All || granted == op:
		return true
	case op == Describe:
		return granted == Read || granted == Write || granted == Delete || granted == Alter
	case op == DescribeConfigs:
		return granted == AlterConfigs
	}
	return false
}

func (e *entry) appliesTo(principal, host string) bool {
	return (e.principal == principal || e.principal == "User:*") && (e.host == Wildcard || e.host == host)
}

// Authorize tells whether principal ("User:<name>"), connected from host (an IP address),
// may perform op on the resource of type rt named name.
func (a *Authorizer) Authorize(principal, host string, rt ResourceType, name string, op Operation) bool {
	if a.IsSuperUser(principal) {
		return true
	}
	r := a.byType[rt]
	if r == nil {
		return a.allowIfNone
	}
	found, allowed := false, false
	// check folds one list of entries in; false: a DENY applies (the answer is no).
	check := func(es []entry) bool {
		for i := range es {
			e := &es[i]
			found = true
			if !e.appliesTo(principal, host) {
				continue
			}
			if e.perm == Deny && (e.op == op || e.op == All) {
				return false
			}
			if e.perm == Allow && implies(e.op, op) {
				allowed = true
			}
		}
		return true
	}
	if !check(r.literal[name]) || name != Wildcard && !check(r.literal[Wildcard]) {
		return false
	}
	for i := range r.prefixed {
		if strings.HasPrefix(name, r.prefixed[i].prefix) && !check(r.prefixed[i].entries) {
			return false
		}
	}
	return allowed || !found && a.allowIfNone
}

// AuthorizedOperations is KIP-430's bit set (bit n: operation n) of the operations of rt that
// principal may perform on name.
func (a *Authorizer) AuthorizedOperations(principal, host string, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range Operations(rt) {
		if a.Authorize(principal, host, rt, name, op) {
			bits |= 1 << op
		}
	}
	return bits
}

// AuthorizeAny tells whether principal may perform op on some resource of type rt (Kafka's
// Authorizer.authorizeByResourceType, which InitProducerId uses for idempotent producers): an
// ALLOW of op applies to it on some pattern that no DENY of op covers, and no DENY of op
// covers every name.
func (a *Authorizer) AuthorizeAny(principal, host string, rt ResourceType, op Operation) bool {
	if a.IsSuperUser(principal) {
		return true
	}
	r := a.byType[rt]
	if r == nil {
		return a.allowIfNone
	}
	denies := func(es []entry) bool {
		for i := range es {
			if es[i].perm == Deny && (es[i].op == op || es[i].op == All) && es[i].appliesTo(principal, host) {
				return true
			}
		}
		return false
	}
	allows := func(es []entry) bool {
		for i := range es {
			if es[i].perm == Allow && (es[i].op == op || es[i].op == All) && es[i].appliesTo(principal, host) {
				return true
			}
		}
		return false
	}
	if denies(r.literal[Wildcard]) {
		return false
	}
	// covered tells whether a DENY of a prefix of name (or of name itself) applies.
	covered := func(name string, literal bool) bool {
		if literal && denies(r.literal[name]) {
			return true
		}
		for _, p := range r.prefixed {
			if strings.HasPrefix(name, p.prefix) && denies(p.entries) {
				return true
			}
		}
		return false
	}
	for name, es := range r.literal {
		if allows(es) && !covered(name, true) {
			return true
		}
	}
	for _, p := range r.prefixed {
		if allows(p.entries) && !covered(p.prefix, false) {
			return true
		}
	}
	return false
}
