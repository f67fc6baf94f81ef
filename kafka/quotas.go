package kafka

import (
	"time"

	"inlet/quota"
	"inlet/tenants"
)

// Quotas (package quota): a request's Produce request bytes and Fetch response bytes are
// recorded against the producer_byte_rate and consumer_byte_rate of its user and client id
// (the request header's), resolved by KIP-55's eight levels of precedence. A request that takes its
// user over the quota is answered with ThrottleTimeMs, and the connection's worker handles
// nothing more of that connection until the throttle has passed (conn.mutedUntil), as Kafka
// mutes the channel: a client that waits out the throttle itself (KIP-219: Produce v6+,
// Fetch v8+) finds nothing muted, and one that does not is held back all the same. Kafka
// stops reading a muted channel, so the client's sends wait in TCP; gnet reads every
// connection it serves, so a muted connection whose queued requests hold more than a quarter
// of the in-flight budget (a client that ignores throttles: an acks=0 producer gets none to
// honour) is closed instead of filling the budget every connection shares. A mute ends
// early when the node drains.
//
// A Fetch that arrives while its user is throttled (its other connections took it over) is
// answered at once, empty, with the throttle left. Otherwise the answer is sent whatever its
// size and then counted: Kafka instead answers empty any fetch whose answer would take the
// user over, which with the bucket's one-window burst would starve for ever a consumer whose
// max.partition.fetch.bytes exceeds a second of its quota.
//
// The quotas in force are the config file's with the changes made through AlterClientQuotas
// (kept by package tenants); publishQuotas makes a new table current.

// anonymousUser is Kafka's principal name for a client that did not authenticate
// (KafkaPrincipal.ANONYMOUS): quotas set for it, or the default, apply to such clients.
const anonymousUser = "ANONYMOUS"

// quotaUser is the user r's quotas are counted for.
func quotaUser(r *request) string {
	if sec := r.c.sec; sec != nil && sec.principal != nil {
		return sec.principal.Name
	}
	return anonymousUser
}

// quotaClientID is r's client id (the header's; "" when null), as a string kept on the
// connection while the client sends the same one.
func quotaClientID(r *request) string {
	id := r.hdr.ClientID
	if p := r.c.quotaClient.Load(); p != nil && *p == string(id) {
		return *p
	}
	str := string(id)
	r.c.quotaClient.Store(&str)
	return str
}

// throttle records n bytes of kind k for r's user and client id and returns the throttle to
// answer with (ms); when there is one, the connection is muted for that long.
func (s *Server) throttle(r *request, k quota.Kind, n int) int32 {
	if !s.quotas.On(k) {
		return 0
	}
	now := time.Now()
	d := s.quotas.Record(quotaUser(r), quotaClientID(r), k, n, now)
	if d <= 0 {
		return 0
	}
	r.c.mutedUntil.Store(now.Add(d).UnixNano())
	return int32(d.Milliseconds())
}

// throttled is how long r's user stays throttled for kind k (ms; 0: not throttled); when it
// is, the connection is muted for that long, as after any throttled answer.
func (s *Server) throttled(r *request, k quota.Kind) int32 {
	if !s.quotas.On(k) {
		return 0
	}
	now := time.Now()
	d := s.quotas.Throttled(quotaUser(r), quotaClientID(r), k, now)
	if d <= 0 {
		return 0
	}
	r.c.mutedUntil.Store(now.Add(d).UnixNano())
	return int32(d.Milliseconds())
}

// waitMuted holds the connection's worker until a throttle that muted it has passed, the
// connection is gone, or the node drains (a throttle then buys nothing).
func (c *conn) waitMuted(until int64) {
	if d := time.Until(time.Unix(0, until)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
		case <-c.s.drainCh:
			t.Stop()
		}
	}
	c.mutedUntil.CompareAndSwap(until, 0)
}

// publishQuotas makes the config file's quotas with st's changes the quotas in force.
func (s *Server) publishQuotas(st *tenants.State) {
	s.quotas.Set(tenants.ApplyQuotas(s.cfg.Quotas, st))
}
