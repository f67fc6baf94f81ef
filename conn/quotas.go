package conn

import (
	"time"

	"inlet/quota"
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
// (kept by package tenants); package server makes a new table current in the quota.Manager the
// node is given (Config.Quotas).

// AnonymousUser is Kafka's principal name for a client that did not authenticate
// (KafkaPrincipal.ANONYMOUS): quotas set for it, or the default, apply to such clients.
const AnonymousUser = "ANONYMOUS"

// quotaUser is the user c's quotas are counted for.
func (c *Conn) quotaUser() string {
	if sec := c.sec; sec != nil && sec.principal != nil {
		return sec.principal.Name
	}
	return AnonymousUser
}

// User is the user the connection acts as, as quotas count it: its principal's name, or
// ANONYMOUS. Read on the connection's worker.
func (c *Conn) User() string { return c.quotaUser() }

// quotaClientID is a request's client id (the header's; "" when null), as a string kept on
// the connection while the client sends the same one.
func (c *Conn) quotaClientID(id []byte) string {
	if p := c.quotaClient.Load(); p != nil && *p == string(id) {
		return *p
	}
	str := string(id)
	c.quotaClient.Store(&str)
	return str
}

// Throttle records n bytes of kind k for the connection's user and a request's client id and
// returns the throttle to answer with (ms); when there is one, the connection is muted for
// that long.
func (c *Conn) Throttle(k quota.Kind, clientID []byte, n int) int32 {
	q := c.n.cfg.Quotas
	if !q.On(k) {
		return 0
	}
	now := time.Now()
	d := q.Record(c.quotaUser(), c.quotaClientID(clientID), k, n, now)
	if d <= 0 {
		return 0
	}
	c.mutedUntil.Store(now.Add(d).UnixNano())
	return int32(d.Milliseconds())
}

// Throttled is how long the connection's user stays throttled for kind k (ms; 0: not
// throttled); when it is, the connection is muted for that long, as after any throttled
// answer.
func (c *Conn) Throttled(k quota.Kind, clientID []byte) int32 {
	q := c.n.cfg.Quotas
	if !q.On(k) {
		return 0
	}
	now := time.Now()
	d := q.Throttled(c.quotaUser(), c.quotaClientID(clientID), k, now)
	if d <= 0 {
		return 0
	}
	c.mutedUntil.Store(now.Add(d).UnixNano())
	return int32(d.Milliseconds())
}

// waitMuted holds the connection's worker until a throttle that muted it has passed, the
// connection is gone, or the node drains (a throttle then buys nothing).
func (c *Conn) waitMuted(until int64) {
	if d := time.Until(time.Unix(0, until)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
		case <-c.n.drainCh:
			t.Stop()
		}
	}
	c.mutedUntil.CompareAndSwap(until, 0)
}
