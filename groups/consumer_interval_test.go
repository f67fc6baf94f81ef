package groups

import (
	"testing"
	"time"

	"inlet/groups/assign"
)

// TestConsumerHeartbeatIntervalWhileReconciling: a member waiting for partitions others still
// hold, or asked to revoke some, is told to come back within reconcilingHeartbeatInterval;
// stable members get up to group.consumer.heartbeat.interval.ms; a configured interval shorter
// than that is kept for everyone.
func TestConsumerHeartbeatIntervalWhileReconciling(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, newRecStore(), ts, nil)
	const stable, reconciling = int32(5000), int32(500)
	interval := func(what string, m *cmember, want int32) {
		t.Helper()
		resp := m.beat(nil)
		// A stable member is told the time until the group's next tick (untilTick, tested
		// in consumer_tick_test.go): the interval less what the test has taken so far.
		got := resp.HeartbeatIntervalMillis
		if want == stable && got > stable-1000 && got <= stable {
			got = stable
		}
		if resp.ErrorCode != 0 || got != want {
			t.Fatalf("%s: error %d, interval %d ms; want %d ms", what, resp.ErrorCode, resp.HeartbeatIntervalMillis, want)
		}
	}
	a := join(t, c, "A", nil)
	interval("A alone, holding everything", a, stable)
	b := &cmember{t: t, c: c, id: "B", owned: assign.Partitions{}}
	if resp := b.beat([]string{"a"}); resp.HeartbeatIntervalMillis != reconciling || b.owned.Count() != 0 {
		t.Fatalf("B joining while A holds its share: interval %d ms, %d partitions; want %d ms, none",
			resp.HeartbeatIntervalMillis, b.owned.Count(), reconciling)
	}
	interval("B still waiting for A", b, reconciling)
	interval("A told to revoke", a, reconciling)
	interval("A confirming its revocation", a, stable)
	interval("B getting what A released", b, stable)
	if b.owned.Count() != 2 || a.owned.Count() != 2 {
		t.Fatalf("after reconciliation: A %d, B %d partitions; want 2 each", a.owned.Count(), b.owned.Count())
	}

	fast := newConsumerCoordinator(t, newRecStore(), ts, func(cc *ConsumerConfig) { cc.HeartbeatInterval = 200 * time.Millisecond })
	a = join(t, fast, "A", nil)
	b = &cmember{t: t, c: fast, id: "B", owned: assign.Partitions{}}
	if resp := b.beat([]string{"a"}); resp.HeartbeatIntervalMillis != 200 {
		t.Fatalf("a configured 200 ms interval while waiting: %d ms", resp.HeartbeatIntervalMillis)
	}
}
