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
				next[i] = now.Add(rtt + m.Record("alice", Produce, size, now))
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
	if d := m.Record("bob", Produce, 1<<30, now); d != 0 {
		t.Fatalf("no quotas: throttled %v", d)
	}
	m.Set(Bounds{"alice": {ProducerByteRate: 1000}, DefaultUser: {ConsumerByteRate: 2000}})
	if d := m.Record("bob", Produce, 1<<30, now); d != 0 {
		t.Fatalf("bob has no produce quota: throttled %v", d)
	}
	if b, ok := m.Bound("bob", Fetch); !ok || b != 2000 {
		t.Fatalf("bob's fetch bound %v %v, want the default 2000", b, ok)
	}
	if d := m.Record("alice", Produce, 1000, now); d != 0 {
		t.Fatalf("one window of quota at once: throttled %v, want 0", d)
	}
	// 11 s of quota at once: throttled until it is back within one window, 10 s.
	if d := m.Record("alice", Produce, 10_000, now); d != 10*time.Second {
		t.Fatalf("throttle %v, want 10s", d)
	}
	if d := m.Throttled("alice", Produce, now.Add(4*time.Second)); d != 6*time.Second {
		t.Fatalf("4 s later still throttled %v, want 6s", d)
	}
	// 30 s more: one throttle is at most MaxThrottle, but the debt stays whole.
	if d := m.Record("alice", Produce, 30_000, now); d != MaxThrottle {
		t.Fatalf("throttle %v, want MaxThrottle", d)
	}
	if d := m.Throttled("alice", Produce, now.Add(30*time.Second)); d != 10*time.Second {
		t.Fatalf("30 s later still throttled %v, want 10s (40 s of debt, 1 s window)", d)
	}
	if d := m.Record("carol", Produce, 1<<20, now); d != 0 {
		t.Fatalf("carol has no quota but was throttled %v by alice's traffic", d)
	}
	// One answer larger than a window passes, and throttles for all of its cost (at most
	// MaxThrottle at a time).
	if d := m.Record("bob", Fetch, 30_000, now); d != MaxThrottle {
		t.Fatalf("30 KB over a 2000 B/s default: throttled %v, want MaxThrottle", d)
	}
	if d := m.Throttled("bob", Fetch, now.Add(10*time.Second)); d != 4*time.Second {
		t.Fatalf("10 s later: throttled %v, want 4s", d)
	}
}

// TestRecordAllocatesNothing: after a user's first request, recording costs no allocation.
func TestRecordAllocatesNothing(t *testing.T) {
	m := NewManager()
	m.Set(Bounds{"alice": {ProducerByteRate: 1 << 20}})
	now := time.Unix(1000, 0)
	m.Record("alice", Produce, 100, now)
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		i++
		m.Record("alice", Produce, 100, now.Add(time.Duration(i)*time.Millisecond))
	}); n != 0 {
		t.Fatalf("%v allocations per Record", n)
	}
}

// TestHugeRequestsCannotOverflow: a tiny quota and huge requests keep the bucket within its
// horizon, and the throttle within MaxThrottle.
func TestHugeRequestsCannotOverflow(t *testing.T) {
	m := NewManager()
	m.Set(Bounds{"alice": {ProducerByteRate: 1}})
	now := time.Unix(1000, 0)
	for i := 0; i < 100; i++ {
		if d := m.Record("alice", Produce, 1<<40, now); d != MaxThrottle {
			t.Fatalf("throttle %v", d)
		}
	}
	if due := m.user("alice").due[Produce].Load(); due > now.UnixNano()+int64(debtHorizon) || due < now.UnixNano() {
		t.Fatalf("bucket at %d, now %d", due, now.UnixNano())
	}
}
