package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/transport"
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

// handleSaslHandshake answers with the connection's step (conn.Conn.Handshake, where the
// exchange's state lives).
func handleSaslHandshake(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms, resp.ErrorCode = r.c.Handshake(req.Mechanism, req.Version)
	return resp, nil
}

// saslRawToken answers a frame after SaslHandshake v0: a raw SASL token (length prefixed, no
// request header), answered the same way (SaslServerAuthenticator's legacy path). A failed
// exchange closes the connection without an answer.
func (s *Server) saslRawToken(r *request) {
	resp, delay, ok := r.c.RawToken(r.frame())
	if !ok {
		s.finishAndClose(r, nil, delay)
		return
	}
	out := transport.GetOut(4 + len(resp))
	out.B = append(out.B, 0, 0, 0, 0)
	out.B = append(out.B, resp...)
	wire.PatchFrameLength(out.B)
	s.finish(r, out)
}
