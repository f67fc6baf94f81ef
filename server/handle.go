package server

import (
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server/authz"
	"inlet/transport"
	"inlet/wire"
)

// api is one served API key: the versions advertised in ApiVersions, how it is served and
// what it checks. Each file named NN_name.go registers its API in init (45_ and 50_ register
// two related ones each), stating the versions it serves and why.
type api struct {
	key      int16
	min, max int16
	// handle answers a request decoded by kmsg; its response is encoded by kmsg (dispatch).
	handle func(s *Server, r *request, req kmsg.Request) (kmsg.Response, error)
	// serve, set instead of handle, serves an API with a path of its own: Produce (the
	// hand-written decoder and encoder, nothing allocated) and Fetch (a reply whose batches are
	// read as it is encoded). It runs once the header is parsed and the version checked, and
	// answers r itself.
	serve func(s *Server, r *request, a *api)
	// authz declares what the API checks and where (package authz, authz.go); every API has one.
	authz authz.Decl[*Server]
}

// apis is every registered API; byKey indexes the same by key for dispatch (an array, so
// finding a request's API costs one bounds check, no map lookup).
var (
	apis  = map[int16]*api{}
	byKey [kmsg.MaxKey + 1]*api
)

func register(a api) {
	if _, dup := apis[a.key]; dup {
		panic(fmt.Sprintf("BUG: kafka: api key %d registered twice", a.key))
	}
	if a.key < 0 || int(a.key) >= len(byKey) || (a.handle == nil) == (a.serve == nil) {
		panic(fmt.Sprintf("BUG: kafka: api key %d: a key kmsg knows, and one of handle or serve", a.key))
	}
	apis[a.key] = &a
	byKey[a.key] = &a
}

// served is the API of key at version, or nil when the node does not serve that.
func served(key, version int16) *api {
	if key < 0 || int(key) >= len(byKey) {
		return nil
	}
	a := byKey[key]
	if a == nil || version < a.min || version > a.max {
		return nil
	}
	return a
}

// SupportedAPIs lists the served API keys and versions, sorted by key: what ApiVersions
// advertises (the API table in docs/kafka-compatibility.md is checked against it).
func SupportedAPIs() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// handle runs on the connection's worker goroutine.
func (s *Server) handle(r *request) {
	sec := r.c.Security() // nil on a listener without security: nothing below costs more than this check
	if sec != nil {
		if closing, _ := sec.Closing(); closing {
			// The connection is being closed (a failed SASL step): nothing more is served.
			s.finish(r, nil)
			return
		}
		if sec.Raw() {
			s.saslRawToken(r)
			return
		}
		if sec.FollowsUser() && !r.c.CurrentPrincipal() {
			// The user was deleted: the connection is closed, r dropped.
			s.finish(r, nil)
			return
		}
	}
	frame := r.frame()
	hdr, err := wire.ParseRequestHeader(frame)
	if err != nil {
		s.protocolError(r, "bad request header", err)
		return
	}
	r.hdr = hdr
	if sec != nil {
		if what, err := r.c.Admit(servedBeforeAuth(hdr.APIKey)); err != nil {
			s.protocolError(r, what, err)
			return
		}
	}
	a := served(hdr.APIKey, hdr.APIVersion)
	if a == nil {
		if hdr.APIKey == apiVersionsKey {
			// KIP-511: an ApiVersions version the broker does not know is answered at v0 with
			// UNSUPPORTED_VERSION and the broker's ranges, so the client can pick one.
			r.served = true
			if m := s.m; m != nil {
				m.Error(apiVersionsKey, wire.ErrUnsupportedVersion)
			}
			s.finish(r, apiVersionsUnsupported(hdr.CorrelationID))
			return
		}
		// Kafka closes the connection on an unknown API or version (SocketServer).
		s.protocolError(r, "unsupported api or version", fmt.Errorf("api key %d version %d", hdr.APIKey, hdr.APIVersion))
		return
	}
	// From here on r is a request of a served API: release counts it (metrics), whatever
	// becomes of it. The metrics of every API are hooked here and in release, so an API
	// registered later is counted without a line of its own.
	r.served = true
	if a.serve != nil {
		a.serve(s, r, a)
		return
	}
	req, ok := s.decode(r)
	if !ok {
		return
	}
	deny, answered := s.filter(r, a, req)
	if answered {
		return
	}
	resp, err := a.handle(s, r, req)
	if err != nil {
		s.protocolError(r, "request refused", err)
		return
	}
	if deny != nil {
		deny(resp)
	}
	if m := s.m; m != nil {
		m.ResponseErrors(hdr.APIKey, resp)
	}
	s.respond(r, encodeResponse(hdr, resp))
}

// decode decodes r's body with kmsg; on a bad body it closes the connection and reports false.
func (s *Server) decode(r *request) (kmsg.Request, bool) {
	req := kmsg.RequestForKey(r.hdr.APIKey)
	req.SetVersion(r.hdr.APIVersion)
	if err := req.ReadFrom(r.frame()[r.hdr.BodyOffset:]); err != nil {
		s.protocolError(r, "bad request body", err)
		return nil, false
	}
	return req, true
}

// filter applies a's authorization filter to req for a restricted subject (authz.go): the
// entries the principal may not use are taken out of req before the handler sees it (so
// nothing is auto-created) and deny adds their refusals to the response. answered: the filter
// refused the whole request and r has been answered.
func (s *Server) filter(r *request, a *api, req kmsg.Request) (deny func(kmsg.Response), answered bool) {
	sub := s.subjectOf(r)
	if !sub.Restricted() || a.authz.Filter == nil {
		return nil, false
	}
	resp, deny := a.authz.Filter(s, sub, req)
	if resp == nil {
		return deny, false
	}
	if m := s.m; m != nil {
		m.ResponseErrors(r.hdr.APIKey, resp)
	}
	s.finish(r, encodeResponse(r.hdr, resp))
	return nil, true
}

// respond answers r with out; after a failed or illegal SASL step it also closes the
// connection.
func (s *Server) respond(r *request, out *transport.Out) {
	if sec := r.c.Security(); sec != nil {
		if closing, delay := sec.Closing(); closing {
			s.finishAndClose(r, out, delay)
			return
		}
	}
	s.finish(r, out)
}

// finishAndClose answers r with out (nil: nothing) and closes its connection, after delay
// (a failed authentication, conn/limits.go). The reply is queued before the close: gnet runs
// AsyncWrite before Close, streamConn flushes before closing. While the delay runs r is in
// flight (Shutdown waits for it) and the connection's later requests are dropped by handle.
func (s *Server) finishAndClose(r *request, out *transport.Out, delay time.Duration) {
	done := func() {
		c := r.c
		s.finish(r, out)
		c.Close()
	}
	if delay <= 0 {
		done()
		return
	}
	time.AfterFunc(delay, done)
}

func encodeResponse(hdr wire.RequestHeader, resp kmsg.Response) *transport.Out {
	resp.SetVersion(hdr.APIVersion)
	out := newReply(hdr.CorrelationID, wire.ResponseHeaderFlexible(hdr.APIKey, hdr.APIVersion), 4096)
	out.B = resp.AppendTo(out.B)
	wire.PatchFrameLength(out.B)
	return out
}

// protocolError closes the connection (the first tier of errors: the stream cannot be
// trusted any more; conn.Conn.ProtocolError counts and logs it) and drops r.
func (s *Server) protocolError(r *request, what string, err error) {
	r.c.ProtocolError(what, err, r.frame())
	s.finish(r, nil)
}

// servedBeforeAuth tells whether an API is served on a SASL listener before authentication
// (SaslServerAuthenticator): ApiVersions, SaslHandshake and SaslAuthenticate.
func servedBeforeAuth(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}
