package conn

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Connection limits, after Kafka's SocketServer and ConnectionQuotas:
//   - max.connections and max.connections.per.ip (with max.connections.per.ip.overrides): a
//     connection over either limit is closed as soon as it is accepted (Kafka's
//     TooManyConnectionsException; Kafka's broker-wide limit blocks the acceptor instead,
//     which gnet cannot do per listener).
//   - connections.max.idle.ms: a connection with no request outstanding and no bytes in or
//     replies out for that long is closed (Kafka's Selector idle expiry).
//   - connection.failed.authentication.delay.ms: a failed SASL authentication is answered and
//     closed only after a delay, which doubles with each further failure from the same
//     address within failedAuthWindow (Kafka's delay is fixed; a growing one makes guessing
//     passwords from one address slower still), up to maxFailedAuthDelay.
//
// Every refusal is logged once with the peer's address: a flood of refusals from one address
// (a client reconnecting in a loop) is one line per refusalLogEvery with the count suppressed.
//
// The reaper goroutine ticks the node's clock (a coarse time connections stamp their activity
// with, so the framing path pays one atomic store and no time.Now) and closes idle
// connections. Lock order: connMu is never held while taking any other lock.

const (
	failedAuthWindow   = time.Minute
	maxFailedAuthDelay = 5 * time.Second
	refusalLogEvery    = time.Minute
)

// connTable is the node's live connections, by address.
type connTable struct {
	mu      sync.Mutex
	all     map[*Conn]struct{}
	perIP   map[string]int
	authBad map[string]failedAuth      // recent authentication failures by address
	logged  map[refusalKey]*refusalLog // the last log line of each kind of refusal per address
	refused map[string]int64           // refusals by reason since start (metrics)
}

type failedAuth struct {
	count int
	last  time.Time
}

type refusalKey struct{ reason, ip string }

type refusalLog struct {
	at         time.Time
	suppressed int
}

func (t *connTable) init() {
	t.all = map[*Conn]struct{}{}
	t.perIP = map[string]int{}
	t.authBad = map[string]failedAuth{}
	t.logged = map[refusalKey]*refusalLog{}
	t.refused = map[string]int64{}
}

// hostOf is an address without its port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// admitConn counts a new connection against max.connections and max.connections.per.ip; a
// connection over either is refused (logged; the caller closes it).
func (n *Node) admitConn(c *Conn, l *listener) bool {
	t := &n.connTab
	t.mu.Lock()
	reason := ""
	switch {
	case len(t.all) >= n.cfg.MaxConnections:
		reason = "max.connections reached"
	case t.perIP[c.ip] >= n.perIPLimit(c.ip):
		reason = "max.connections.per.ip reached"
	default:
		t.all[c] = struct{}{}
		t.perIP[c.ip]++
	}
	t.mu.Unlock()
	if reason != "" {
		n.refused(c.remote, reason, "listener", l.Name)
		return false
	}
	return true
}

// perIPLimit is max.connections.per.ip for ip, or its override.
func (n *Node) perIPLimit(ip string) int {
	if n, ok := n.cfg.MaxConnectionsPerIPOverrides[ip]; ok {
		return n
	}
	return n.cfg.MaxConnectionsPerIP
}

// ParsePerIPOverrides parses Kafka's max.connections.per.ip.overrides: a comma-separated list
// of address:limit ("127.0.0.1:200,::1:200"; the limit follows the last colon). Kafka also
// takes host names, resolved when the setting is read; Inlet takes only IP addresses, so an
// override never depends on what a name resolves to later.
func ParsePerIPOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want address:limit", item)
		}
		ip := net.ParseIP(strings.Trim(item[:i], "[]"))
		if ip == nil {
			return nil, fmt.Errorf("%q: %q is not an IP address (host names are not taken)", item, item[:i])
		}
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the limit must be a number of connections, 0 or more", item)
		}
		out[ip.String()] = n
	}
	return out, nil
}

// dropConn uncounts a connection admitConn counted.
func (n *Node) dropConn(c *Conn) {
	t := &n.connTab
	t.mu.Lock()
	if _, ok := t.all[c]; ok {
		delete(t.all, c)
		if t.perIP[c.ip]--; t.perIP[c.ip] <= 0 {
			delete(t.perIP, c.ip)
		}
	}
	t.mu.Unlock()
}

// refused logs a refused connection or request once (see the file comment).
func (n *Node) refused(remote, reason string, attrs ...any) {
	key := refusalKey{reason, hostOf(remote)}
	now := time.Now()
	t := &n.connTab
	t.mu.Lock()
	t.refused[reason]++
	e := t.logged[key]
	if e != nil && now.Sub(e.at) < refusalLogEvery {
		e.suppressed++
		t.mu.Unlock()
		return
	}
	suppressed := 0
	if e == nil {
		e = &refusalLog{}
		t.logged[key] = e
	}
	suppressed, e.at, e.suppressed = e.suppressed, now, 0
	t.mu.Unlock()
	attrs = append([]any{"remote", remote}, attrs...)
	if suppressed > 0 {
		attrs = append(attrs, "refused_since_last_line", suppressed)
	}
	n.log.Warn(refusalMessage(reason), attrs...)
}

// refusalMessage is the log message of a refusal: "refused: " and the reason, unless the reason
// says itself what happened ("closing connection: ...").
func refusalMessage(reason string) string {
	if strings.HasPrefix(reason, "closing connection: ") {
		return reason
	}
	return "refused: " + reason
}

// failedAuthDelay records a failed authentication from ip and returns how long to wait before
// answering it and closing the connection.
func (n *Node) failedAuthDelay(ip string) time.Duration {
	base := n.cfg.FailedAuthenticationDelay
	if base <= 0 {
		return 0
	}
	now := time.Now()
	t := &n.connTab
	t.mu.Lock()
	f := t.authBad[ip]
	if now.Sub(f.last) > failedAuthWindow {
		f.count = 0
	}
	f.count++
	f.last = now
	t.authBad[ip] = f
	t.mu.Unlock()
	d := base
	for i := 1; i < f.count && d < maxFailedAuthDelay; i++ {
		d *= 2
	}
	return min(d, maxFailedAuthDelay)
}

// authSucceeded forgets the failures of ip.
func (n *Node) authSucceeded(ip string) {
	t := &n.connTab
	t.mu.Lock()
	delete(t.authBad, ip)
	t.mu.Unlock()
}

// reapInterval is how often the reaper ticks for an idle limit: a tenth of it, between 10 ms
// and 1 s (the clock's resolution is the tick).
func reapInterval(idle time.Duration) time.Duration {
	if idle <= 0 {
		return time.Second
	}
	return min(max(idle/10, 10*time.Millisecond), time.Second)
}

// reap runs until stop is closed: it ticks the clock, closes idle connections and forgets old
// authentication failures and refusal log entries.
func (n *Node) reap(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	idle := n.cfg.ConnectionsMaxIdle
	tick := time.NewTicker(reapInterval(idle))
	defer tick.Stop()
	var idleConns []*Conn
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			n.clock.Store(now.UnixNano())
			t := &n.connTab
			t.mu.Lock()
			idleConns = idleConns[:0]
			if idle > 0 {
				for c := range t.all {
					if c.t.Pending() == 0 && now.UnixNano()-c.t.LastActive() > int64(idle) {
						idleConns = append(idleConns, c)
					}
				}
			}
			for ip, f := range t.authBad {
				if now.Sub(f.last) > failedAuthWindow {
					delete(t.authBad, ip)
				}
			}
			for k, e := range t.logged {
				if now.Sub(e.at) > refusalLogEvery {
					if e.suppressed > 0 {
						n.log.Warn(refusalMessage(k.reason), "remote", k.ip, "refused_since_last_line", e.suppressed)
					}
					delete(t.logged, k)
				}
			}
			t.mu.Unlock()
			for _, c := range idleConns {
				n.log.Debug("closing idle connection", "remote", c.remote, "idle_ms", idle.Milliseconds())
				c.Close()
			}
			clear(idleConns)
		}
	}
}

// CloseUserConns closes every connection authenticated as user (a user deleted at run time).
func (n *Node) CloseUserConns(user string) {
	t := &n.connTab
	t.mu.Lock()
	var conns []*Conn
	for c := range t.all {
		if u := c.user.Load(); u != nil && *u == user {
			conns = append(conns, c)
		}
	}
	t.mu.Unlock()
	for _, c := range conns {
		n.log.Info("closing connection of a deleted user", "remote", c.remote, "user", user)
		c.Close()
	}
}
