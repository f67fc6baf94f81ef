package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/auth"
	"inlet/wire"
)

// SaslAuthenticate v0-v2 (KIP-152; v1 SessionLifetimeMs for KIP-368 re-authentication; v2
// flexible). Each request carries one client message of the exchange begun by SaslHandshake
// v1. A failed exchange is SASL_AUTHENTICATION_FAILED with Kafka's message and the connection
// is closed after the reply, both after connection.failed.authentication.delay.ms, which grows
// with repeated failures from one address (limits.go); a SaslAuthenticate without a handshake is ILLEGAL_SASL_STATE.
// The failure's reason (unknown user, bad password) is logged, never sent: the client learns
// only that authentication failed.
const saslAuthenticateKey = 36

func init() {
	register(api{key: saslAuthenticateKey, min: 0, max: 2, handle: handleSaslAuthenticate,
		authz: unchecked("served before authentication")})
}

func handleSaslAuthenticate(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	sec := r.c.sec
	if sec == nil || !sec.l.sasl || sec.exchange == nil || sec.handshakeV == 0 {
		msg := "SaslAuthenticate without a SaslHandshake v1 before it"
		resp.ErrorCode, resp.ErrorMessage = wire.ErrIllegalSaslState, &msg
		if sec != nil {
			sec.closeAfter = true
		}
		return resp, nil
	}
	out, done, err := sec.exchange.Step(req.SASLAuthBytes)
	if err == nil && done {
		err = s.completeAuth(r, sec, sec.exchange.Principal())
	}
	if err != nil {
		if !errors.Is(err, auth.ErrTooManyFailures) { // plainGate logged it, once a minute
			s.log.Info("sasl authentication failed", "remote", r.c.remote, "mechanism", sec.mechanism, "err", err)
		}
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + sec.mechanism
		if !errors.Is(err, auth.ErrAuthenticationFailed) {
			msg = "Authentication failed: " + err.Error()
		}
		resp.ErrorCode, resp.ErrorMessage = wire.ErrSaslAuthenticationFailed, &msg
		sec.exchange = nil
		sec.closeAfter = true
		sec.closeDelay = s.failedAuthDelay(r.c.ip)
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if done {
		sec.exchange = nil
		if !sec.expiry.IsZero() {
			resp.SessionLifetimeMillis = int64(time.Until(sec.expiry) / time.Millisecond)
		}
	}
	return resp, nil
}
