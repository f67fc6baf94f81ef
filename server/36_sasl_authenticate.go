package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate v0-v2 (KIP-152; v1 SessionLifetimeMs for KIP-368 re-authentication; v2
// flexible). Each request carries one client message of the exchange begun by SaslHandshake
// v1. A failed exchange is SASL_AUTHENTICATION_FAILED with Kafka's message and the connection
// is closed after the reply, both after connection.failed.authentication.delay.ms, which grows
// with repeated failures from one address (conn/limits.go); a SaslAuthenticate without a handshake is ILLEGAL_SASL_STATE.
// The failure's reason (unknown user, bad password) is logged, never sent: the client learns
// only that authentication failed.
const saslAuthenticateKey = 36

func init() {
	register(api{key: saslAuthenticateKey, min: 0, max: 2, handle: handleSaslAuthenticate,
		authz: unchecked("served before authentication")})
}

// handleSaslAuthenticate answers with the connection's step (conn.Conn.Authenticate, where
// the exchange's state lives).
func handleSaslAuthenticate(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SASLAuthBytes, resp.ErrorCode, resp.ErrorMessage, resp.SessionLifetimeMillis = r.c.Authenticate(req.SASLAuthBytes)
	return resp, nil
}
