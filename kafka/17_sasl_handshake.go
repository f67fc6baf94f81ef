package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

// SaslHandshake v0-v1 (KIP-43; v1 with KIP-152: the exchange continues in SaslAuthenticate
// requests instead of raw tokens). The mechanisms offered are the listener's. An unknown
// mechanism is UNSUPPORTED_SASL_MECHANISM and the connection is closed after the reply; a
// handshake on a listener without SASL, or while an exchange is in progress, is
// ILLEGAL_SASL_STATE (KafkaApis.handleSaslHandshakeRequest, SaslServerAuthenticator).
const saslHandshakeKey = 17

func init() {
	register(api{key: saslHandshakeKey, min: 0, max: 1, handle: handleSaslHandshake,
		authz: unchecked("served before authentication")})
}

func handleSaslHandshake(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	sec := r.c.sec
	if sec == nil || !sec.l.sasl {
		resp.ErrorCode = wire.ErrIllegalSaslState
		return resp, nil
	}
	resp.SupportedMechanisms = sec.l.Mechanisms
	switch {
	case sec.exchange != nil:
		resp.ErrorCode = wire.ErrIllegalSaslState
		sec.closeAfter = true
		return resp, nil
	case sec.authenticated && req.Version == 0:
		// Re-authentication needs SaslAuthenticate (KIP-368 requires v1).
		resp.ErrorCode = wire.ErrIllegalSaslState
		sec.closeAfter = true
		return resp, nil
	}
	offered := false
	for _, m := range sec.l.Mechanisms {
		if m == req.Mechanism {
			offered = true
		}
	}
	if !offered || (sec.authenticated && req.Mechanism != sec.mechanism) {
		// KIP-368: re-authentication uses the same mechanism.
		resp.ErrorCode = wire.ErrUnsupportedSaslMechanism
		sec.closeAfter = true
		return resp, nil
	}
	// PLAIN's derivations are limited per address (sasl_limits.go).
	x, err := s.cfg.Users.StartGated(req.Mechanism, plainGate{s, r.c.ip})
	if err != nil {
		resp.ErrorCode = wire.ErrUnsupportedSaslMechanism
		sec.closeAfter = true
		return resp, nil
	}
	sec.mechanism, sec.handshakeV, sec.exchange = req.Mechanism, req.Version, x
	sec.raw = req.Version == 0
	return resp, nil
}
