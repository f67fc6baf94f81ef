package server

import (
	"testing"

	"inlet/acl"
	"inlet/auth"
	"inlet/conn"
)

// restrictProducePath makes the produce path's connection the anonymous principal of a
// listener, authorized by bindings.
func restrictProducePath(s *Server, c *conn.Conn, bindings []acl.Binding) {
	anon := &auth.Principal{Name: "ANONYMOUS"}
	c.Secure(&conn.Listener{Anonymous: anon}, nil, "")
	s.authz.Store(acl.New(bindings, nil, false))
}

// TestProducePathACLAllocatesNothing: with ACLs in force (a prefix allowing the topic, a DENY
// elsewhere), a produce request still allocates nothing: the check of each topic aliases
// the request's name and the principal is made a string once per connection.
func TestProducePathACLAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items at random: allocation counts mean nothing under it")
	}
	frame := produceFrame("bench", 16, testBatch(150, 100, -1, 0))
	var s *Server
	var c *conn.Conn
	run, _ := producePathWith(t, "discard", false, nil, frame, func(srv *Server, cn *conn.Conn) {
		s, c = srv, cn
		restrictProducePath(srv, cn, []acl.Binding{
			{ResourceType: acl.Topic, Name: "ben", Pattern: acl.Prefixed, Principal: "User:ANONYMOUS", Host: "*", Operation: acl.Write, Permission: acl.Allow},
			{ResourceType: acl.Topic, Name: "bench.secret", Pattern: acl.Literal, Principal: "User:ANONYMOUS", Host: "*", Operation: acl.All, Permission: acl.Deny},
		})
	})
	for i := 0; i < 100; i++ {
		run()
	}
	if _, ok := s.blog.Topic("bench"); !ok {
		t.Fatal("the allowed produce did not create its topic: refused?")
	}
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Fatalf("%v allocations per produce request with ACLs in force", n)
	}
	// The check is real: without the ALLOW the topic is refused.
	restrictProducePath(s, c, nil)
	if sub := s.subjectOf(&request{c: c}); sub.Topic(acl.Write, "bench") || !sub.Restricted() {
		t.Fatal("with no binding the anonymous principal may still write bench")
	}
}
