package conn

import (
	"errors"
	"time"

	"inlet/auth"
	"inlet/wire"
)

// Security is a connection's authentication and authorization state. It is created with
// the connection and touched only by the connection's worker (the Handler serves requests
// one at a time, in order), so it needs no lock.
//
// On a SASL listener a connection starts unauthenticated: only ApiVersions, SaslHandshake and
// SaslAuthenticate are served (SaslServerAuthenticator), anything else closes it (Admit). A
// successful exchange sets the principal; with a session lifetime set (KIP-368) the session
// expires, the client re-authenticates on the same connection (SaslHandshake v1 +
// SaslAuthenticate again, as the same principal), and a request after expiry without
// re-authentication closes the connection (Kafka's SocketServer does the same: "expired
// session").
type Security struct {
	l             *Listener
	sasl          bool
	principal     *auth.Principal // nil: unrestricted
	user          string          // the configured user principal belongs to ("" for none): see CurrentPrincipal
	authenticated bool

	mechanism  string        // chosen by the last SaslHandshake
	handshakeV int16         // its version; 0 means raw SASL tokens follow (no SaslAuthenticate)
	exchange   auth.Exchange // in progress after a handshake
	raw        bool          // the next frame is a raw SASL token (SaslHandshake v0)
	expiry     time.Time     // zero: the session does not expire
	closeAfter bool          // close the connection once the current reply is queued
	closeDelay time.Duration // ... after this long (a failed authentication)

	aclPrincipal string // User:<name> as ACLs name it, set on the first check (ACLPrincipal)
}

// newSecurity returns nil for a connection that needs no checks at all: a listener without
// SASL whose clients are unrestricted (and no restricting client certificate).
func newSecurity(l *Listener, sasl bool, cert *auth.Principal) *Security {
	if !sasl {
		p := cert
		if p == nil {
			p = l.Anonymous
		}
		if p == nil {
			return nil
		}
		return &Security{l: l, principal: p, authenticated: true}
	}
	return &Security{l: l, sasl: true}
}

// Principal is the connection's principal; nil when it may use everything.
func (sec *Security) Principal() *auth.Principal { return sec.principal }

// Raw tells whether the next frame is a raw SASL token (after SaslHandshake v0): RawToken
// answers it.
func (sec *Security) Raw() bool { return sec.raw }

// Closing tells whether the connection closes once the current reply is queued (a failed or
// illegal SASL step), and after how long.
func (sec *Security) Closing() (bool, time.Duration) { return sec.closeAfter, sec.closeDelay }

// FollowsUser tells whether the principal is a configured user's, which CurrentPrincipal
// keeps up to date.
func (sec *Security) FollowsUser() bool { return sec.user != "" }

// ACLPrincipal is the principal as ACLs name it, User:<name>: the SASL or certificate user's,
// else the listener's anonymous principal's. false: unrestricted (no principal, or a
// certificate naming no user on a listener without anonymous prefixes). Made a string once
// per connection.
func (sec *Security) ACLPrincipal() (string, bool) {
	if sec.principal == nil {
		return "", false
	}
	if sec.aclPrincipal == "" {
		switch {
		case sec.user != "":
			sec.aclPrincipal = "User:" + sec.user
		case sec.l.Anonymous != nil:
			sec.aclPrincipal = "User:" + sec.l.Anonymous.Name
		default:
			return "", false
		}
	}
	return sec.aclPrincipal, true
}

// Principal is the connection's restricted principal, or nil when it may use everything.
func (c *Conn) Principal() *auth.Principal {
	if c.sec == nil {
		return nil
	}
	return c.sec.principal
}

// Admit decides whether a request may be served on a SASL connection: servedBeforeAuth says
// whether its API is one served before authentication. When not, what and err say why, and
// the Handler closes the connection (answering nothing, as Kafka does).
func (c *Conn) Admit(servedBeforeAuth bool) (what string, err error) {
	sec := c.sec
	if !sec.sasl || servedBeforeAuth {
		return "", nil
	}
	if !sec.authenticated {
		return "request before SASL authentication", errors.New("only ApiVersions, SaslHandshake and SaslAuthenticate are served before authentication")
	}
	if !sec.expiry.IsZero() && time.Now().After(sec.expiry) {
		return "SASL session expired", errors.New("the client did not re-authenticate (KIP-368)")
	}
	return "", nil
}

// CurrentPrincipal brings the principal up to date with its user's current one; false when
// the user is gone, after closing the connection (the Handler drops the request).
func (c *Conn) CurrentPrincipal() bool {
	sec := c.sec
	u, ok := c.n.cfg.Users.Lookup(sec.user)
	if !ok {
		c.n.refused(c.remote, "closing connection: the user was deleted", "user", sec.user)
		c.Close()
		return false
	}
	sec.principal = &u.Principal
	return true
}

// Handshake is SaslHandshake's step: it chooses mechanism for the exchange that follows
// (raw tokens after version 0, SaslAuthenticate requests after 1) and returns the listener's
// mechanisms and the error code to answer with. An error closes the connection after the
// reply, except on a listener without SASL.
func (c *Conn) Handshake(mechanism string, version int16) (mechanisms []string, code int16) {
	sec := c.sec
	if sec == nil || !sec.sasl {
		return nil, wire.ErrIllegalSaslState
	}
	mechanisms = sec.l.Mechanisms
	switch {
	case sec.exchange != nil:
		sec.closeAfter = true
		return mechanisms, wire.ErrIllegalSaslState
	case sec.authenticated && version == 0:
		// Re-authentication needs SaslAuthenticate (KIP-368 requires v1).
		sec.closeAfter = true
		return mechanisms, wire.ErrIllegalSaslState
	}
	offered := false
	for _, m := range sec.l.Mechanisms {
		if m == mechanism {
			offered = true
		}
	}
	if !offered || (sec.authenticated && mechanism != sec.mechanism) {
		// KIP-368: re-authentication uses the same mechanism.
		sec.closeAfter = true
		return mechanisms, wire.ErrUnsupportedSaslMechanism
	}
	// PLAIN's derivations are limited per address (sasl_limits.go).
	x, err := c.n.cfg.Users.StartGated(mechanism, plainGate{c.n, c.ip})
	if err != nil {
		sec.closeAfter = true
		return mechanisms, wire.ErrUnsupportedSaslMechanism
	}
	sec.mechanism, sec.handshakeV, sec.exchange = mechanism, version, x
	sec.raw = version == 0
	return mechanisms, wire.ErrNone
}

// Authenticate is SaslAuthenticate's step: one client message of the exchange begun by
// SaslHandshake v1. It returns the server's message, the error code and message to answer
// with, and once the exchange is done with a session lifetime set, the session's remaining
// lifetime (ms). A failure closes the connection after the reply, after
// connection.failed.authentication.delay.ms, which grows with repeated failures from one
// address (limits.go). The failure's reason (unknown user, bad password) is logged, never
// sent: the client learns only that authentication failed.
func (c *Conn) Authenticate(msg []byte) (out []byte, code int16, errMsg *string, lifetimeMs int64) {
	sec := c.sec
	if sec == nil || !sec.sasl || sec.exchange == nil || sec.handshakeV == 0 {
		m := "SaslAuthenticate without a SaslHandshake v1 before it"
		if sec != nil {
			sec.closeAfter = true
		}
		return nil, wire.ErrIllegalSaslState, &m, 0
	}
	out, done, err := sec.exchange.Step(msg)
	if err == nil && done {
		err = c.completeAuth(sec.exchange.Principal())
	}
	if err != nil {
		if !errors.Is(err, auth.ErrTooManyFailures) { // plainGate logged it, once a minute
			c.n.log.Info("sasl authentication failed", "remote", c.remote, "mechanism", sec.mechanism, "err", err)
		}
		m := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + sec.mechanism
		if !errors.Is(err, auth.ErrAuthenticationFailed) {
			m = "Authentication failed: " + err.Error()
		}
		sec.exchange = nil
		sec.closeAfter = true
		sec.closeDelay = c.n.failedAuthDelay(c.ip)
		return nil, wire.ErrSaslAuthenticationFailed, &m, 0
	}
	if done {
		sec.exchange = nil
		if !sec.expiry.IsZero() {
			lifetimeMs = int64(time.Until(sec.expiry) / time.Millisecond)
		}
	}
	return out, wire.ErrNone, nil, lifetimeMs
}

// completeAuth records a finished exchange. Re-authentication must keep the principal
// (KIP-368: "the principal must not change").
func (c *Conn) completeAuth(p *auth.Principal) error {
	sec := c.sec
	if p == nil {
		return auth.ErrAuthenticationFailed
	}
	if sec.authenticated && sec.principal != nil && sec.principal.Name != p.Name {
		return errors.New("re-authentication as a different principal is not allowed (KIP-368)")
	}
	sec.principal, sec.authenticated, sec.user = p, true, p.Name
	name := p.Name
	c.user.Store(&name)
	sec.expiry = time.Time{}
	if c.n.cfg.SessionLifetime > 0 {
		sec.expiry = time.Now().Add(c.n.cfg.SessionLifetime)
	}
	c.saslPending.Store(false) // frames may now be as large as socket.request.max.bytes
	c.t.SetMaxFrame(c.n.cfg.MaxRequestBytes)
	c.t.SetPreAuth(false) // and are charged to the in-flight budget
	c.n.authSucceeded(c.ip)
	c.n.log.Debug("sasl authenticated", "remote", c.remote, "principal", p.Name, "mechanism", sec.mechanism)
	return nil
}

// RawToken steps the exchange with a frame after SaslHandshake v0: a raw SASL token (length
// prefixed, no request header), answered the same way (SaslServerAuthenticator's legacy
// path). ok false: the exchange failed, and the Handler closes the connection without an
// answer after delay.
func (c *Conn) RawToken(frame []byte) (reply []byte, delay time.Duration, ok bool) {
	sec := c.sec
	resp, done, err := sec.exchange.Step(frame)
	if err == nil && done {
		err = c.completeAuth(sec.exchange.Principal())
	}
	if err != nil {
		sec.raw, sec.exchange = false, nil
		if !errors.Is(err, auth.ErrTooManyFailures) { // plainGate logged it, once a minute
			c.n.log.Info("sasl authentication failed", "remote", c.remote, "mechanism", sec.mechanism, "err", err)
		}
		sec.closeAfter = true
		return nil, c.n.failedAuthDelay(c.ip), false
	}
	if done {
		sec.raw, sec.exchange = false, nil
	}
	return resp, 0, true
}
