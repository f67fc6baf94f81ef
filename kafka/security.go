package kafka

import (
	"errors"
	"time"

	"inlet/auth"
	"inlet/transport"
	"inlet/wire"
)

// connSecurity is a connection's authentication and authorization state. It is created with
// the connection and touched only by the connection's worker (handle runs requests one at a
// time, in order), so it needs no lock.
//
// On a SASL listener a connection starts unauthenticated: only ApiVersions, SaslHandshake and
// SaslAuthenticate are served (SaslServerAuthenticator), anything else closes it. A successful
// exchange sets the principal; with a session lifetime set (KIP-368) the session expires, the
// client re-authenticates on the same connection (SaslHandshake v1 + SaslAuthenticate again,
// as the same principal), and a request after expiry without re-authentication closes the
// connection (Kafka's SocketServer does the same: "expired session").
type connSecurity struct {
	l             *listener
	principal     *auth.Principal // nil: unrestricted
	user          string          // the configured user principal belongs to ("" for none): see currentPrincipal
	authenticated bool

	mechanism  string        // chosen by the last SaslHandshake
	handshakeV int16         // its version; 0 means raw SASL tokens follow (no SaslAuthenticate)
	exchange   auth.Exchange // in progress after a handshake
	raw        bool          // the next frame is a raw SASL token (SaslHandshake v0)
	expiry     time.Time     // zero: the session does not expire
	closeAfter bool          // close the connection once the current reply is queued
	closeDelay time.Duration // ... after this long (a failed authentication)

	aclPrincipal string // User:<name> as ACLs name it, set on the first check (acls.go)
}

// newConnSecurity returns nil for a connection that needs no checks at all: a listener without
// SASL whose clients are unrestricted (and no restricting client certificate).
func newConnSecurity(s *Server, l *listener, cert *auth.Principal) *connSecurity {
	if l == nil {
		return nil
	}
	if !l.sasl {
		p := cert
		if p == nil {
			p = l.Anonymous
		}
		if p == nil {
			return nil
		}
		return &connSecurity{l: l, principal: p, authenticated: true}
	}
	return &connSecurity{l: l}
}

// admit decides whether r may be served on a SASL connection; when not, it closes the
// connection (answering nothing, as Kafka does) and returns false.
func (s *Server) admit(r *request, sec *connSecurity) bool {
	if !sec.l.sasl {
		return true
	}
	switch r.hdr.APIKey {
	case apiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
		return true
	}
	if !sec.authenticated {
		s.protocolError(r, "request before SASL authentication", errors.New("only ApiVersions, SaslHandshake and SaslAuthenticate are served before authentication"))
		return false
	}
	if !sec.expiry.IsZero() && time.Now().After(sec.expiry) {
		s.protocolError(r, "SASL session expired", errors.New("the client did not re-authenticate (KIP-368)"))
		return false
	}
	return true
}

// completeAuth records a finished exchange. Re-authentication must keep the principal
// (KIP-368: "the principal must not change").
func (s *Server) completeAuth(r *request, sec *connSecurity, p *auth.Principal) error {
	if p == nil {
		return auth.ErrAuthenticationFailed
	}
	if sec.authenticated && sec.principal != nil && sec.principal.Name != p.Name {
		return errors.New("re-authentication as a different principal is not allowed (KIP-368)")
	}
	sec.principal, sec.authenticated, sec.user = p, true, p.Name
	name := p.Name
	r.c.user.Store(&name)
	sec.expiry = time.Time{}
	if s.cfg.SessionLifetime > 0 {
		sec.expiry = time.Now().Add(s.cfg.SessionLifetime)
	}
	r.c.saslPending.Store(false) // frames may now be as large as socket.request.max.bytes
	r.c.t.SetMaxFrame(s.cfg.MaxRequestBytes)
	r.c.t.SetPreAuth(false) // and are charged to the in-flight budget
	s.authSucceeded(r.c.ip)
	s.log.Debug("sasl authenticated", "remote", r.c.remote, "principal", p.Name, "mechanism", sec.mechanism)
	return nil
}

// saslRawToken answers a frame after SaslHandshake v0: a raw SASL token (length prefixed, no
// request header), answered the same way (SaslServerAuthenticator's legacy path). A failed
// exchange closes the connection without an answer.
func (s *Server) saslRawToken(r *request) {
	c := r.c
	sec := c.sec
	resp, done, err := sec.exchange.Step(r.frame())
	if err == nil && done {
		err = s.completeAuth(r, sec, sec.exchange.Principal())
	}
	if err != nil {
		sec.raw, sec.exchange = false, nil
		if !errors.Is(err, auth.ErrTooManyFailures) { // plainGate logged it, once a minute
			s.log.Info("sasl authentication failed", "remote", c.remote, "mechanism", sec.mechanism, "err", err)
		}
		sec.closeAfter = true
		s.finishAndClose(r, nil, s.failedAuthDelay(c.ip))
		return
	}
	if done {
		sec.raw, sec.exchange = false, nil
	}
	out := transport.GetOut(4 + len(resp))
	out.B = append(out.B, 0, 0, 0, 0)
	out.B = append(out.B, resp...)
	wire.PatchFrameLength(out.B)
	s.finish(r, out)
}
