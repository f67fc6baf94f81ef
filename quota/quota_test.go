package quota

import (
	"testing"
	"time"
)

// simulate runs producers that each send size-byte requests back to back, each waiting out
// the throttle its last response carried (as Kafka clients do since KIP-219), for d of
// simulated time; it returns the bytes sent by each second's end.
func simulate(m *Manager, producers, size int, d time.Duration) []int {
	t0 := time.Unix(1000, 0)
	next := make([]time.Time, producers)
	for i := range next {
		next[i] = t0.Add(time.Duration(i) * time.Millisecond)
	}
	var bySecond []int
	total := 0
	const rtt = 2 * time.Millisecond
	for now := t0; now.Before(t0.Add(d)); now = now.Add(time.Millisecond) {
		for i := range next {
			if !now.Before(next[i]) {
				total += size
				next[i] = now.Add(rtt + m.Record("alice", "", Produce, size, now))
			}
		}
		if now.Sub(t0)%time.Second == time.Second-time.Millisecond {
			bySecond = append(bySecond, total)
		}
	}
	return bySecond
}

// TestQuotaHoldsFourProducersToTheBound: four producers of one user, flat out, together send
// the quota's bytes per second: within 10% over every 10 s after the first second (the window
// a quiet user may run ahead by).
func TestQuotaHoldsFourProducersToTheBound(t *testing.T) {
	const bound = 1 << 20
	m := NewManager()
	m.Set(Bounds{"alice": {ProducerByteRate: bound}})
	sent := simulate(m, 4, 64<<10, 60*time.Second)
	t.Logf("bytes by second: %v", sent)
	if sent[0] > 2*bound+4*64<<10 {
		t.Errorf("first second: %d bytes, want at most two windows of the quota and a request each", sent[0])
	}
	for end := 11; end < len(sent); end++ {
		got := float64(sent[end]-sent[end-10]) / 10
		if got < 0.9*bound || got > 1.1*bound {
			t.Errorf("seconds %d-%d: %.0f bytes/s, want %d ±10%%", end-10, end, got, bound)
		}
	}
}

// TestOtherUsersAndDefaults: a user's bound is its own, else the default user's; a user with
// neither is never throttled, and one user's traffic does not count for another.
func TestOtherUsersAndDefaults(t *testing.T) {
	m := NewManager()
	now := time.Unix(1000, 0)
	if d := m.Record("bob", "", Produce, 1<<30, now); d != 0 {
		t.Fatalf("no quotas: throttled %v", d)
	}
	m.Set(Bounds{"alice": {ProducerByteRate: 1000}, DefaultUser: {ConsumerByteRate: 2000}})
	if d := m.Record("bob", "", Produce, 1<<30, now); d != 0 {
		t.Fatalf("bob has no produce quota: throttled %v", d)
	}
	if b, ok := m.Bound("bob", "", Fetch); !ok || b != 2000 {
		t.Fatalf("bob's fetch bound %v %v, want the default 2000", b, ok)
	}
	if d := m.Record("alice", "", Produce, 1000, now); d != 0 {
		t.Fatalf("one window of quota at once: throttled %v, want 0", d)
	}
	// 11 s of quota at once: throttled until it is back within one window, 10 s.
	if d := m.Record("alice", "", Produce, 10_000, now); d != 10*time.Second {
		t.Fatalf("throttle %v, want 10s", d)
	}
	if d := m.Throttled("alice", "", Produce, now.Add(4*time.Second)); d != 6*time.Second {
		t.Fatalf("4 s later still throttled %v, want 6s", d)
	}
	// 30 s more: one throttle is at most MaxThrottle, but the debt stays whole.
	if d := m.Record("alice", "", Produce, 30_000, now); d != MaxThrottle {
		t.Fatalf("throttle %v, want MaxThrottle", d)
	}
	if d := m.Throttled("alice", "", Produce, now.Add(30*time.Second)); d != 10*time.Second {
		t.Fatalf("30 s later still throttled %v, want 10s (40 s of debt, 1 s window)", d)
	}
	if d := m.Record("carol", "", Produce, 1<<20, now); d != 0 {
		t.Fatalf("carol has no quota but was throttled %v by alice's traffic", d)
	}
	// One answer larger than a window passes, and throttles for all of its cost (at most
	// MaxThrottle at a time).
	if d := m.Record("bob", "", Fetch, 30_000, now); d != MaxThrottle {
		t.Fatalf("30 KB over a 2000 B/s default: throttled %v, want MaxThrottle", d)
	}
	if d := m.Throttled("bob", "", Fetch, now.Add(10*time.Second)); d != 4*time.Second {
		t.Fatalf("10 s later: throttled %v, want 4s", d)
	}
}

// TestRecordAllocatesNothing: after a user's first request, recording costs no allocation.
func TestRecordAllocatesNothing(t *testing.T) {
	m := NewManager()
	m.Set(Bounds{"alice": {ProducerByteRate: 1 << 20}})
	now := time.Unix(1000, 0)
	m.Record("alice", "", Produce, 100, now)
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		i++
		m.Record("alice", "", Produce, 100, now.Add(time.Duration(i)*time.Millisecond))
	}); n != 0 {
		t.Fatalf("%v allocations per Record", n)
	}
	// With client-id levels set, a long client id walks all eight levels allocation-free.
	client := "a-client-id-longer-than-any-stack-buffer-of-the-runtime"
	m.Set(Bounds{EntityKey("", DefaultUser): {ProducerByteRate: 1 << 20}})
	m.Record("alice", client, Produce, 100, now)
	if n := testing.AllocsPerRun(1000, func() {
		i++
		m.Record("alice", client, Produce, 100, now.Add(time.Duration(i)*time.Millisecond))
	}); n != 0 {
		t.Fatalf("%v allocations per Record at level 8", n)
	}
}

// TestHugeRequestsCannotOverflow: a tiny quota and huge requests keep the bucket within its
// horizon, and the throttle within MaxThrottle.
func TestHugeRequestsCannotOverflow(t *testing.T) {
	m := NewManager()
	m.Set(Bounds{"alice": {ProducerByteRate: 1}})
	now := time.Unix(1000, 0)
	for i := 0; i < 100; i++ {
		if d := m.Record("alice", "", Produce, 1<<40, now); d != MaxThrottle {
			t.Fatalf("throttle %v", d)
		}
	}
	if due := m.bucket(entity{"alice", ""}).due[Produce].Load(); due > now.UnixNano()+int64(debtHorizon) || due < now.UnixNano() {
		t.Fatalf("bucket at %d, now %d", due, now.UnixNano())
	}
}

// TestPrecedenceFollowsKIP55: with every level of KIP-55's table set, a request takes the
// most specific level's quota, and removing levels one by one from the top walks down the
// table (/config/users/u/clients/c first, /config/clients/<default> last). The two kinds
// resolve apart.
func TestPrecedenceFollowsKIP55(t *testing.T) {
	const d = DefaultUser
	levels := []struct {
		key    string
		bucket entity
	}{
		{EntityKey("alice", "app"), entity{"alice", "app"}}, // 1
		{EntityKey("alice", d), entity{"alice", "app"}},     // 2
		{EntityKey("alice", ""), entity{"alice", ""}},       // 3
		{EntityKey(d, "app"), entity{"alice", "app"}},       // 4
		{EntityKey(d, d), entity{"alice", "app"}},           // 5
		{EntityKey(d, ""), entity{"alice", ""}},             // 6
		{EntityKey("", "app"), entity{"", "app"}},           // 7
		{EntityKey("", d), entity{"", "app"}},               // 8
	}
	m := NewManager()
	for top := range levels {
		b := Bounds{}
		for i := top; i < len(levels); i++ {
			b.Put(levels[i].key, ProducerByteRate, float64(1000*(i+1)))
		}
		b.Put(EntityKey("bob", ""), ConsumerByteRate, 7) // another kind, another user: no effect
		m.Set(b)
		v, e, ok := m.resolve("alice", "app", Produce)
		if !ok || v != float64(1000*(top+1)) || e != levels[top].bucket {
			t.Errorf("levels %d-8 set: bound %v in bucket %+v (%v), want level %d's %d in %+v", top+1, v, e, ok, top+1, 1000*(top+1), levels[top].bucket)
		}
		if _, ok := m.Bound("alice", "app", Fetch); ok {
			t.Errorf("levels %d-8 set: alice has a fetch quota", top+1)
		}
	}
	m.Set(Bounds{})
	if _, ok := m.Bound("alice", "app", Produce); ok {
		t.Error("no level set: alice has a quota")
	}
}

// TestPrecedenceTable: requests of several users and client ids against one set of bounds,
// as Kafka's DefaultQuotaCallback resolves them.
func TestPrecedenceTable(t *testing.T) {
	const d = DefaultUser
	m := NewManager()
	m.Set(Bounds{
		EntityKey("alice", "etl"): {ProducerByteRate: 1},
		EntityKey("alice", ""):    {ProducerByteRate: 2},
		EntityKey(d, "etl"):       {ProducerByteRate: 3},
		EntityKey("", "batch"):    {ProducerByteRate: 4},
		EntityKey("", d):          {ProducerByteRate: 5},
		EntityKey("carol", d):     {ProducerByteRate: 6},
	})
	for _, c := range []struct {
		user, client string
		bound        float64
		bucket       entity
	}{
		{"alice", "etl", 1, entity{"alice", "etl"}},
		{"alice", "batch", 2, entity{"alice", ""}}, // the user's own beats a client-id quota
		{"bob", "etl", 3, entity{"bob", "etl"}},    // <default> user with client etl
		{"bob", "batch", 4, entity{"", "batch"}},   // client-id quota, shared by every user
		{"ANONYMOUS", "batch", 4, entity{"", "batch"}},
		{"bob", "other", 5, entity{"", "other"}}, // <default> client
		{"bob", "", 5, entity{"", ""}},
		{"carol", "x", 6, entity{"carol", "x"}}, // carol's <default> client: one bucket per client
	} {
		v, e, ok := m.resolve(c.user, c.client, Produce)
		if !ok || v != c.bound || e != c.bucket {
			t.Errorf("user %q client %q: bound %v in %+v (%v), want %v in %+v", c.user, c.client, v, e, ok, c.bound, c.bucket)
		}
	}
}

// TestClientIDBucketIsShared: a client-id quota holds every user's connections with that
// client id together; a (user, <default>) quota gives each client id its own bucket.
func TestClientIDBucketIsShared(t *testing.T) {
	m := NewManager()
	m.Set(Bounds{EntityKey("", "app"): {ProducerByteRate: 1000}, EntityKey("carol", DefaultUser): {ProducerByteRate: 1000}})
	now := time.Unix(1000, 0)
	if d := m.Record("alice", "app", Produce, 1000, now); d != 0 {
		t.Fatalf("alice's first second: throttled %v", d)
	}
	if d := m.Record("bob", "app", Produce, 1000, now); d != time.Second {
		t.Fatalf("bob with client id app after alice's second: throttled %v, want 1s", d)
	}
	if d := m.Record("carol", "a", Produce, 2000, now); d != time.Second {
		t.Fatalf("carol's client a: throttled %v, want 1s", d)
	}
	if d := m.Record("carol", "b", Produce, 1000, now); d != 0 {
		t.Fatalf("carol's client b (its own bucket): throttled %v, want none", d)
	}
}

// TestEntityKeyRoundTrips pins the key format that tenants.json keeps.
func TestEntityKeyRoundTrips(t *testing.T) {
	for _, c := range []struct{ user, client, key string }{
		{"alice", "", "alice"}, {DefaultUser, "", "<default>"}, {"", "app", "\x00app"}, {"alice", DefaultUser, "alice\x00<default>"},
	} {
		if k := EntityKey(c.user, c.client); k != c.key {
			t.Errorf("EntityKey(%q, %q) = %q, want %q", c.user, c.client, k, c.key)
		}
		if u, cl := SplitEntityKey(c.key); u != c.user || cl != c.client {
			t.Errorf("SplitEntityKey(%q) = %q, %q", c.key, u, cl)
		}
	}
	if ValidName("") || ValidName("a\x00b") || !ValidName("app") {
		t.Error("ValidName")
	}
}
