// Package authz is how the Kafka APIs authorize: the subject a request acts as (subject.go:
// its principal, its host and the ACL bindings in force) with the one check every API goes
// through (Subject.May, package acl's evaluator), and the declaration each API makes where it
// is registered (Decl: what it checks and where). Package server and package server/admin
// declare their APIs with it; server's registry holds both (server/handle.go) and
// TestEveryAPIDeclaresAuthorization checks every declaration.
//
// Path: server's dispatch makes a request's Subject (Of) and, for a restricted one, runs the
// API's filter (Decl.Filter) on the decoded request before the handler; handlers that check
// themselves (Decl.InHandler) ask the same Subject.
//
// Files: authz.go (Need, Decl, SplitAllowed), subject.go (Subject, Of). No locks: the
// bindings in force are an acl.Authorizer read through one atomic load per request.
package authz

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
)

// Authorization is declared where each API is registered (its NN_name.go file): Decl names
// the resource types and operations the API checks (Kafka's table in KafkaApis), and either a
// filter that applies them to the decoded request before the handler (Before), or that the
// handler checks them itself (InHandler: Produce's hand-written path, the transaction and
// admin APIs), or why nothing is checked (Unchecked: the APIs served before authentication).
// A registered API without a declaration fails TestEveryAPIDeclaresAuthorization (package
// kafka). Every check, wherever made, is Subject.May (subject.go): one evaluator, package
// acl.
//
// A filter runs for restricted subjects only: entries naming a topic, group or
// transactional id the principal may not use are taken out of the request, so the handler
// neither sees nor auto-creates them, and the returned deny function adds them back to the
// response with Kafka's authorization error (TOPIC_AUTHORIZATION_FAILED per partition for
// the topic-naming APIs). Requests about a single group or transactional id that is refused
// are answered at once (the first result), without calling the handler. Listings are
// filtered to what the principal may DESCRIBE (KafkaApis does the same).
//
// The rule every filter keeps: an answer about a name the principal may not use never
// depends on whether it exists (Kafka checks authorization before the metadata cache), so
// the entry is taken out before the handler can look it up. The group and transaction APIs
// that also name topics check each topic as well as the group or id.
// TestTenantLearnsNothingOutsideItsPrefix and TestDeniedDescribeLearnsNothing (e2e) ask the
// APIs about names the principal may not describe and about names that exist nowhere, and
// compare the answers.

// Need is one check an API makes: Op on each named resource of type RT (or on the cluster).
type Need struct {
	RT acl.ResourceType
	Op acl.Operation
}

func OnTopics(op acl.Operation) Need  { return Need{acl.Topic, op} }
func OnGroups(op acl.Operation) Need  { return Need{acl.Group, op} }
func OnTxnIDs(op acl.Operation) Need  { return Need{acl.TransactionalID, op} }
func OnCluster(op acl.Operation) Need { return Need{acl.Cluster, op} }

// Filter applies an API's needs to a decoded request before the handler, for a restricted
// subject p; s is the server of the package that registers the API. A non-nil response
// answers the whole request (the handler is not called); otherwise deny, when not nil, adds
// the refused entries to the handler's response.
type Filter[S any] func(s S, p Subject, req kmsg.Request) (resp kmsg.Response, deny func(kmsg.Response))

// Decl is an API's declaration.
type Decl[S any] struct {
	Needs []Need
	// Filter applies Needs to a decoded request before the handler, for restricted subjects.
	Filter Filter[S]
	// InHandler: the handler checks Needs itself.
	InHandler bool
	// Unchecked says why the API checks nothing.
	Unchecked string
}

// Before declares an API whose filter applies needs.
func Before[S any](filter Filter[S], needs ...Need) Decl[S] {
	return Decl[S]{Needs: needs, Filter: filter}
}

// InHandler declares an API whose handler checks needs.
func InHandler[S any](needs ...Need) Decl[S] { return Decl[S]{Needs: needs, InHandler: true} }

// Unchecked declares an API that checks nothing, and why.
func Unchecked[S any](why string) Decl[S] { return Decl[S]{Unchecked: why} }

// Declared tells whether d is a complete declaration (what the test checks).
func (d Decl[S]) Declared() bool {
	if d.Unchecked != "" {
		return len(d.Needs) == 0 && d.Filter == nil && !d.InHandler
	}
	return len(d.Needs) > 0 && (d.Filter != nil) != d.InHandler
}

// Adapt is d declared for a registry whose server is S: its filter runs on the T that to
// gives for the S (package server holds package admin's APIs this way). The declaration is
// otherwise the same, so a missing one stays missing.
func Adapt[S, T any](d Decl[T], to func(S) T) Decl[S] {
	out := Decl[S]{Needs: d.Needs, InHandler: d.InHandler, Unchecked: d.Unchecked}
	if f := d.Filter; f != nil {
		out.Filter = func(s S, p Subject, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
			return f(to(s), p, req)
		}
	}
	return out
}

// SplitAllowed separates the entries of a request that pass allowed from the others, keeping
// order. kept reuses xs's backing array (each entry is read before its slot is rewritten);
// denied is a new slice, so both stay valid.
func SplitAllowed[T any](xs []T, allowed func(T) bool) (kept, denied []T) {
	kept = xs[:0]
	for _, x := range xs {
		if allowed(x) {
			kept = append(kept, x)
		} else {
			denied = append(denied, x)
		}
	}
	return kept, denied
}
