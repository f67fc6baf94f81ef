// Package quota holds clients' produce and fetch byte rates to Kafka's client quotas
// (producer_byte_rate, consumer_byte_rate) at every level of KIP-55, and says how long a
// client over its quota is throttled.
//
// Each bucket and kind has a token bucket: a client may run ahead of its quota by one quota
// window (quota.window.size.seconds, Kafka's default 1 s) of bytes; a request that takes it
// further is recorded and answered with the time until the bucket is back within that window
// (at most MaxThrottle at a time; the rest of the debt throttles its next requests), which the
// server writes in the response's ThrottleTimeMs and waits out before it handles
// anything more of the connection (Kafka mutes the channel). Kafka measures the rate instead
// over quota.window.num sampled windows counted as at least ten seconds, so a quiet client
// there may send ten seconds of quota at once, and a throttled one again every eleven seconds
// as its oldest sample expires; the bucket holds every ten seconds of a client that waits out
// its throttle to the quota, within one window's burst.
//
// Entities and precedence (KIP-55). A quota is set for a user, a client id, or a (user,
// client id) pair, where either name may be "<default>" (DefaultUser, Kafka's
// --entity-default). A request of user u with client id c takes the first quota of its kind
// set at (Kafka's DefaultQuotaCallback):
//
//  1. /config/users/u/clients/c                  bucket (u, c)
//  2. /config/users/u/clients/<default>          bucket (u, c)
//  3. /config/users/u                            bucket (u)
//  4. /config/users/<default>/clients/c          bucket (u, c)
//  5. /config/users/<default>/clients/<default>  bucket (u, c)
//  6. /config/users/<default>                    bucket (u)
//  7. /config/clients/c                          bucket (c)
//  8. /config/clients/<default>                  bucket (c)
//
// and is counted in the bucket that level names: every connection of u shares (u)'s, every
// connection with client id c whatever its user shares (c)'s. The two kinds resolve apart.
//
// Bounds name an entity by one string (EntityKey): a user alone by its name, as the config
// file and tenants.json have always written it, and an entity with a client id as
// user + "\x00" + client id (user "" for a client-id entity). Names with a NUL byte are
// refused as quota entities, so the keys are unambiguous.
//
// Bounds change at run time: Set publishes a new table that the next request reads. A
// request costs one atomic load when no quota of its kind is set, and otherwise up to eight
// lookups in a map keyed by two strings (three when no entity has a client id), a read-locked
// lookup of its bucket and a compare-and-swap; it allocates nothing after its bucket's first
// request.
package quota

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kafka's quota keys (QuotaConfig) that this node enforces.
const (
	ProducerByteRate = "producer_byte_rate"
	ConsumerByteRate = "consumer_byte_rate"
	// ControllerMutationRate is KIP-599's controller_mutation_rate: partitions created or
	// deleted per second (CreateTopics, CreatePartitions, DeleteTopics, auto-creation).
	ControllerMutationRate = "controller_mutation_rate"
)

// DefaultUser is the entity name of a default quota (Kafka's <default>), user or client id.
const DefaultUser = "<default>"

// entitySep joins the user and the client id of an entity key.
const entitySep = "\x00"

// EntityKey is the Bounds key of the entity of user and clientID ("" for a part the entity
// does not have; DefaultUser for a default).
func EntityKey(user, clientID string) string {
	if clientID == "" {
		return user
	}
	return user + entitySep + clientID
}

// SplitEntityKey is EntityKey's inverse.
func SplitEntityKey(key string) (user, clientID string) {
	user, clientID, _ = strings.Cut(key, entitySep)
	return user, clientID
}

// ValidName tells whether name may name a user or client id in a quota entity: not empty
// (Kafka: "Empty user not supported") and without the NUL byte EntityKey joins with.
func ValidName(name string) bool { return name != "" && !strings.Contains(name, entitySep) }

// Kind is what a quota bounds.
type Kind int

const (
	Produce  Kind = iota // request bytes of Produce
	Fetch                // response bytes of Fetch
	Mutation             // partitions created or deleted (KIP-599)
	kinds
)

// KindOf maps a quota key to the kind it bounds.
func KindOf(key string) (Kind, bool) {
	switch key {
	case ProducerByteRate:
		return Produce, true
	case ConsumerByteRate:
		return Fetch, true
	case ControllerMutationRate:
		return Mutation, true
	}
	return 0, false
}

// Key is the quota key of k.
func (k Kind) Key() string {
	switch k {
	case Produce:
		return ProducerByteRate
	case Mutation:
		return ControllerMutationRate
	}
	return ConsumerByteRate
}

// DefaultWindow is Kafka's default quota.window.size.seconds: how far ahead of its quota a
// user may run.
const DefaultWindow = time.Second

// Bounds are quotas by entity (EntityKey: a user name, DefaultUser, or an entity with a
// client id) and key.
type Bounds map[string]map[string]float64

// Put sets entity's quota for key.
func (b Bounds) Put(entity, key string, v float64) {
	if b[entity] == nil {
		b[entity] = map[string]float64{}
	}
	b[entity][key] = v
}

// Manager holds every bucket and the bounds in force.
type Manager struct {
	window int64 // ns

	bounds atomic.Pointer[Bounds]
	table  atomic.Pointer[table]
	on     [kinds]atomic.Bool // some bound of the kind is set

	mu      sync.RWMutex
	buckets map[entity]*bucket
}

// entity is a quota entity or a bucket: a user, a client id, or both ("" for a part it does
// not have).
type entity struct{ user, client string }

// limit is one entity's bounds by kind.
type limit struct {
	v   [kinds]float64
	set [kinds]bool
}

// table is Bounds as the hot path reads it.
type table struct {
	entities map[entity]limit
	clients  bool // some entity has a client id: levels 1, 2, 4, 5, 7 and 8 are looked at
}

// bucket is one bucket's state: for each kind, the time (ns) at which every byte recorded
// would have been sent at exactly the bound (the theoretical arrival time of GCRA).
type bucket struct {
	due [kinds]atomic.Int64
}

// NewManager returns a manager with Kafka's default window and no bounds.
func NewManager() *Manager {
	m := &Manager{window: int64(DefaultWindow), buckets: map[entity]*bucket{}}
	m.Set(Bounds{})
	return m
}

// Set makes b the bounds in force (b is kept: the caller must not change it after).
func (m *Manager) Set(b Bounds) {
	t := &table{entities: make(map[entity]limit, len(b))}
	var on [kinds]bool
	for key, keys := range b {
		user, client := SplitEntityKey(key)
		var l limit
		for k := Kind(0); k < kinds; k++ {
			if v, ok := keys[k.Key()]; ok {
				l.v[k], l.set[k], on[k] = v, true, true
			}
		}
		t.entities[entity{user, client}] = l
		if client != "" {
			t.clients = true
		}
	}
	m.bounds.Store(&b)
	m.table.Store(t)
	for k := Kind(0); k < kinds; k++ {
		m.on[k].Store(on[k])
	}
}

// On tells whether any bound of kind k is set: when none is, nothing need be recorded. A nil
// Manager has none.
func (m *Manager) On(k Kind) bool { return m != nil && m.on[k].Load() }

// Bounds returns the bounds in force (not to be changed).
func (m *Manager) Bounds() Bounds { return *m.bounds.Load() }

// Bound is the quota of kind k for a request of user with clientID, by KIP-55's precedence
// (package comment), and the bucket it is counted in; ok is false when no level sets one.
func (m *Manager) Bound(user, clientID string, k Kind) (bound float64, ok bool) {
	bound, _, ok = m.resolve(user, clientID, k)
	return bound, ok
}

func (m *Manager) resolve(user, client string, k Kind) (float64, entity, bool) {
	t := m.table.Load()
	at := func(e entity) (float64, bool) {
		l, ok := t.entities[e]
		return l.v[k], ok && l.set[k]
	}
	pair, alone := entity{user, client}, entity{user, ""}
	if t.clients {
		if v, ok := at(entity{user, client}); ok { // 1
			return v, pair, true
		}
		if v, ok := at(entity{user, DefaultUser}); ok { // 2
			return v, pair, true
		}
	}
	if v, ok := at(alone); ok { // 3
		return v, alone, true
	}
	if t.clients {
		if v, ok := at(entity{DefaultUser, client}); ok { // 4
			return v, pair, true
		}
		if v, ok := at(entity{DefaultUser, DefaultUser}); ok { // 5
			return v, pair, true
		}
	}
	if v, ok := at(entity{DefaultUser, ""}); ok { // 6
		return v, alone, true
	}
	if t.clients {
		if v, ok := at(entity{"", client}); ok { // 7
			return v, entity{"", client}, true
		}
		if v, ok := at(entity{"", DefaultUser}); ok { // 8
			return v, entity{"", client}, true
		}
	}
	return 0, entity{}, false
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

// Record counts n bytes of kind k for a request of user with clientID at now and returns
// how long the client is to be throttled: 0 unless this takes its bucket more than a window
// ahead of its bound.
func (m *Manager) Record(user, clientID string, k Kind, n int, now time.Time) time.Duration {
	if !m.on[k].Load() {
		return 0
	}
	bound, e, ok := m.resolve(user, clientID, k)
	if !ok {
		return 0
	}
	due := &m.bucket(e).due[k]
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

// Throttled is how long a request of user with clientID stays throttled for kind k at now
// (0: not throttled).
func (m *Manager) Throttled(user, clientID string, k Kind, now time.Time) time.Duration {
	if !m.on[k].Load() {
		return 0
	}
	_, e, ok := m.resolve(user, clientID, k)
	if !ok {
		return 0
	}
	return min(time.Duration(max(m.bucket(e).due[k].Load()-now.UnixNano()-m.window, 0)), MaxThrottle)
}

func (m *Manager) bucket(e entity) *bucket {
	m.mu.RLock()
	b := m.buckets[e]
	m.mu.RUnlock()
	if b != nil {
		return b
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b = m.buckets[e]; b == nil {
		b = &bucket{}
		m.buckets[e] = b
	}
	return b
}
