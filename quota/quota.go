// Package quota holds each user's produce and fetch byte rates to its quota, Kafka's client
// quotas (producer_byte_rate, consumer_byte_rate), and says how long a user over its quota
// is throttled.
//
// Each user and kind has a token bucket: a user may run ahead of its quota by one quota
// window (quota.window.size.seconds, Kafka's default 1 s) of bytes; a request that takes it
// further is recorded and answered with the time until the user is back within that window
// (at most MaxThrottle at a time; the rest of the debt throttles its next requests), which the
// server writes in the response's ThrottleTimeMs and waits out before it handles
// anything more of the connection (Kafka mutes the channel). Kafka measures the rate instead
// over quota.window.num sampled windows counted as at least ten seconds, so a quiet user there
// may send ten seconds of quota at once, and a throttled one again every eleven seconds as its
// oldest sample expires; the bucket holds every ten seconds of a client that waits out its
// throttle to the quota, within one window's burst.
//
// All of a user's connections share its buckets. Bounds are per user, falling back to the
// default user's ("<default>", Kafka's --entity-default), and change at run time: Set
// publishes a new table that the next request reads. A request costs one atomic load when no
// quota of its kind is set, and a read-locked map lookup and a compare-and-swap otherwise; it
// allocates nothing after its user's first request.
package quota

import (
	"sync"
	"sync/atomic"
	"time"
)

// Kafka's quota keys (QuotaConfig) that this node enforces.
const (
	ProducerByteRate = "producer_byte_rate"
	ConsumerByteRate = "consumer_byte_rate"
)

// DefaultUser is the entity name of the default user quota (Kafka's <default>).
const DefaultUser = "<default>"

// Kind is what a quota bounds.
type Kind int

const (
	Produce Kind = iota // request bytes of Produce
	Fetch               // response bytes of Fetch
	kinds
)

// KindOf maps a quota key to the kind it bounds.
func KindOf(key string) (Kind, bool) {
	switch key {
	case ProducerByteRate:
		return Produce, true
	case ConsumerByteRate:
		return Fetch, true
	}
	return 0, false
}

// Key is the quota key of k.
func (k Kind) Key() string {
	if k == Produce {
		return ProducerByteRate
	}
	return ConsumerByteRate
}

// DefaultWindow is Kafka's default quota.window.size.seconds: how far ahead of its quota a
// user may run.
const DefaultWindow = time.Second

// Bounds are quotas by entity (a user name, or DefaultUser) and key.
type Bounds map[string]map[string]float64

// Put sets entity's quota for key.
func (b Bounds) Put(entity, key string, v float64) {
	if b[entity] == nil {
		b[entity] = map[string]float64{}
	}
	b[entity][key] = v
}

// Manager holds every user's buckets and the bounds in force.
type Manager struct {
	window int64 // ns

	bounds atomic.Pointer[Bounds]
	on     [kinds]atomic.Bool // some bound of the kind is set

	mu    sync.RWMutex
	users map[string]*user
}

// user is one user's buckets: for each kind, the time (ns) at which every byte recorded
// would have been sent at exactly the bound (the theoretical arrival time of GCRA).
type user struct {
	due [kinds]atomic.Int64
}

// NewManager returns a manager with Kafka's default window and no bounds.
func NewManager() *Manager {
	m := &Manager{window: int64(DefaultWindow), users: map[string]*user{}}
	m.Set(Bounds{})
	return m
}

// Set makes b the bounds in force (b is kept: the caller must not change it after).
func (m *Manager) Set(b Bounds) {
	m.bounds.Store(&b)
	for k := Kind(0); k < kinds; k++ {
		on := false
		for _, keys := range b {
			if _, ok := keys[k.Key()]; ok {
				on = true
			}
		}
		m.on[k].Store(on)
	}
}

// On tells whether any bound of kind k is set: when none is, nothing need be recorded. A nil
// Manager has none.
func (m *Manager) On(k Kind) bool { return m != nil && m.on[k].Load() }

// Bounds returns the bounds in force (not to be changed).
func (m *Manager) Bounds() Bounds { return *m.bounds.Load() }

// Bound is the quota of kind k for name: its own, else the default user's; ok is false when
// neither is set.
func (m *Manager) Bound(name string, k Kind) (bound float64, ok bool) {
	b := *m.bounds.Load()
	if v, ok := b[name][k.Key()]; ok {
		return v, true
	}
	v, ok := b[DefaultUser][k.Key()]
	return v, ok
}

// MaxThrottle bounds one throttle: below the 30 s request.timeout.ms of Kafka's clients, so a
// request queued behind a throttle does not time out. A user deeper in debt is throttled
// again on its next request (the debt is kept whole, up to debtHorizon): Fetch holds to its
// quota, as a throttled fetch is answered empty, but Produce is appended whatever the debt,
// so a producer whose single requests carry more than MaxThrottle of its quota gets more than
// its quota (one request per MaxThrottle).
const MaxThrottle = 10 * time.Second

// debtHorizon bounds how far ahead of now a bucket may run, so that nanosecond arithmetic
// cannot overflow (a zero quota, or a tiny one and a huge request).
const debtHorizon = time.Hour

// Record counts n bytes of kind k for name at now and returns how long the client is to be
// throttled: 0 unless this takes it more than a window ahead of its bound.
func (m *Manager) Record(name string, k Kind, n int, now time.Time) time.Duration {
	if !m.on[k].Load() {
		return 0
	}
	bound, ok := m.Bound(name, k)
	if !ok {
		return 0
	}
	due := &m.user(name).due[k]
	t := now.UnixNano()
	cost := float64(debtHorizon)
	if bound > 0 {
		cost = min(float64(n)/bound*float64(time.Second), float64(debtHorizon))
	}
	for {
		old := due.Load()
		next := min(max(old, t)+int64(cost), t+int64(debtHorizon))
		if due.CompareAndSwap(old, next) {
			return min(time.Duration(max(next-t-m.window, 0)), MaxThrottle)
		}
	}
}

// Throttled is how long name stays throttled for kind k at now (0: not throttled).
func (m *Manager) Throttled(name string, k Kind, now time.Time) time.Duration {
	if !m.on[k].Load() {
		return 0
	}
	if _, ok := m.Bound(name, k); !ok {
		return 0
	}
	return min(time.Duration(max(m.user(name).due[k].Load()-now.UnixNano()-m.window, 0)), MaxThrottle)
}

func (m *Manager) user(name string) *user {
	m.mu.RLock()
	u := m.users[name]
	m.mu.RUnlock()
	if u != nil {
		return u
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if u = m.users[name]; u == nil {
		u = &user{}
		m.users[name] = u
	}
	return u
}
