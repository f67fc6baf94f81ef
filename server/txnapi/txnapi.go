// Package txnapi is Inlet's transaction APIs, the client's side of package txn's
// coordinator: 22 InitProducerId (also the idempotent producers' ids), 24
// AddPartitionsToTxn, 25 AddOffsetsToTxn, 26 EndTxn, 28 TxnOffsetCommit, 65
// DescribeTransactions and 66 ListTransactions. One file per API key, in the manner of
// franz-go's kfake, each registering its API with the versions it serves, its authorization
// (package server/authz) and its handler, as package server/admin's do.
//
// Path: package server's registry takes every API here at init (APIs, server/txn.go) ->
// server's dispatch decodes a request, runs its filter and calls its handler with the node's
// Server (built by server.Server.Start) and the Request -> the handler asks the transaction
// coordinator (txn.Coordinator), which writes markers through server's batch log and
// offsets through its group coordinator, and answers by return value; server encodes the
// reply.
package txnapi

import (
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/batchlog"
	"inlet/groups"
	"inlet/server/authz"
	"inlet/txn"
	"inlet/wire"
)

// Server is the node's parts the transaction APIs act on, built by package server.
type Server struct {
	Log    *batchlog.Log       // the topics a transaction names; producer ids
	Txns   *txn.Coordinator    // the transactions
	Groups *groups.Coordinator // TxnOffsetCommit's checks against the group
	Logger *slog.Logger
}

// Request is what a handler knows of the request it answers.
type Request struct {
	Subject authz.Subject // the connection's principal and the bindings in force
	// AdmitGroup and OwnGroup apply max.groups.per.principal to a request that may create a
	// group (server/group_bounds.go): AdmitGroup reports whether the call may go on and
	// whether the group existed, OwnGroup records that the call created it.
	AdmitGroup func(group string, creates bool) (existed, ok bool)
	OwnGroup   func(group string, existed bool)
}

// API is one transaction API key as package server's registry takes it.
type API struct {
	Key, Min, Max int16 // the versions advertised in ApiVersions
	// Handle answers a request decoded by kmsg; server encodes its response.
	Handle func(s *Server, r *Request, req kmsg.Request) (kmsg.Response, error)
	// Authz declares what the API checks and where; every API has one.
	Authz authz.Decl[*Server]
}

// apis is every API of the package, registered by its file's init.
var apis []API

func register(a API) { apis = append(apis, a) }

// APIs is every transaction API, sorted by key.
func APIs() []API {
	out := append([]API(nil), apis...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// The authorization shorthands of this package's declarations, whose filters take its Server.

func onTopics(op acl.Operation) authz.Need  { return authz.OnTopics(op) }
func onGroups(op acl.Operation) authz.Need  { return authz.OnGroups(op) }
func onTxnIDs(op acl.Operation) authz.Need  { return authz.OnTxnIDs(op) }
func onCluster(op acl.Operation) authz.Need { return authz.OnCluster(op) }

func before(filter authz.Filter[*Server], needs ...authz.Need) authz.Decl[*Server] {
	return authz.Before(filter, needs...)
}

func inHandler(needs ...authz.Need) authz.Decl[*Server] { return authz.InHandler[*Server](needs...) }

// fenced answers PRODUCER_FENCED to clients that know it and INVALID_PRODUCER_EPOCH to older
// ones (KIP-588: the versions below since brings it).
func fenced(code int16, version, since int16) int16 {
	if code == wire.ErrProducerFenced && version < since {
		return wire.ErrInvalidProducerEpoch
	}
	return code
}
