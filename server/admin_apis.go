package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server/admin"
	"inlet/server/authz"
)

// The admin APIs (package server/admin) are registered here, at init, like every API: their
// versions, their declarations (a filter runs on the node's admin Server) and a handler that
// calls theirs with it. They are served by the same dispatch (handle.go) and counted by the
// same metrics; TestEveryAPIDeclaresAuthorization and the API table in docs/kafka-compatibility.md see them here.
func init() {
	for _, a := range admin.APIs() {
		register(api{key: a.Key, min: a.Min, max: a.Max,
			handle: func(s *Server, r *request, req kmsg.Request) (kmsg.Response, error) {
				return a.Handle(s.admin, &admin.Request{Conn: r.c, ClientID: r.hdr.ClientID}, req)
			},
			authz: authz.Adapt(a.Authz, adminOf)})
	}
}

// adminOf is s's admin Server, which the admin APIs' filters and handlers run on.
func adminOf(s *Server) *admin.Server { return s.admin }
