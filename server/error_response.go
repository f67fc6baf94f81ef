package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server/errresp"
)

// ErrorResponse is req's response, at its version, with code in every error field it has:
// per partition, topic, group, transactional id, resource or user, and top level where the
// response has one (package server/errresp). A node that refuses a whole request for one
// reason answers with it: a standby (package server/standby) tells a client that it leads no
// partition, coordinates no group and controls nothing. Nil for ApiVersions, Metadata and
// the SASL requests, which a node answers with what it knows, and for keys it does not
// serve; TestErrorResponseCoversEveryServedAPI keeps every other served API covered.
func ErrorResponse(req kmsg.Request, code int16) kmsg.Response { return errresp.For(req, code) }
