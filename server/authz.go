package server

import (
	"inlet/acl"
	"inlet/server/authz"
)

// Authorization is declared where each API is registered (its NN_name.go file), with
// package authz (its Decl, the rules every filter keeps); the shorthands below declare for
// this package's APIs, whose filters take the Server.

func onTopics(op acl.Operation) authz.Need  { return authz.OnTopics(op) }
func onGroups(op acl.Operation) authz.Need  { return authz.OnGroups(op) }
func onTxnIDs(op acl.Operation) authz.Need  { return authz.OnTxnIDs(op) }
func onCluster(op acl.Operation) authz.Need { return authz.OnCluster(op) }

func before(filter authz.Filter[*Server], needs ...authz.Need) authz.Decl[*Server] {
	return authz.Before(filter, needs...)
}

func inHandler(needs ...authz.Need) authz.Decl[*Server] { return authz.InHandler[*Server](needs...) }

func unchecked(why string) authz.Decl[*Server] { return authz.Unchecked[*Server](why) }

// subjectOf is r's subject (package authz).
func (s *Server) subjectOf(r *request) authz.Subject { return authz.Of(r.c, &s.authz) }
