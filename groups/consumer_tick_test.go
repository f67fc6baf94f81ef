package groups

import (
	"testing"
	"time"

	"inlet/groups/assign"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerStableHeartbeatsShareTick: stable members answered at different times are told
// intervals that bring their next heartbeats to the same tick of the group (every
// group.consumer.heartbeat.interval.ms from the group's first stable answer), so that
// members asked to revoke after a join all learn it at that one tick. A tick closer than
// the floor is skipped for the next one; no answer is under half a second or over
// interval+floor.
func TestConsumerStableHeartbeatsShareTick(t *testing.T) {
	clk := &clock{now: time.UnixMilli(1_700_000_000_000)}
	cc := ConsumerConfig{Enabled: true, HeartbeatInterval: 5 * time.Second,
		Topic:  func(n string) (TopicMeta, bool) { return topicA, n == "a" },
		Topics: func() []TopicMeta { return []TopicMeta{topicA} }}
	c, err := New(newRecStore(), Config{Consumer: cc, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	t0 := clk.Now()
	at := func(d time.Duration) { t.Helper(); clk.advance(t0.Add(d).Sub(clk.Now())) }
	// beat heartbeats at t0+when and checks when the member's next heartbeat falls (t0+next).
	beat := func(what string, m *cmember, topics []string, when, next time.Duration) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		at(when)
		resp := m.beat(topics)
		got := when + time.Duration(resp.HeartbeatIntervalMillis)*time.Millisecond
		if resp.ErrorCode != 0 || got != next {
			t.Fatalf("%s at +%v: error %d, interval %d ms, next heartbeat at +%v; want +%v",
				what, when, resp.ErrorCode, resp.HeartbeatIntervalMillis, got, next)
		}
		return resp
	}
	a := &cmember{t: t, c: c, id: "A", owned: assign.Partitions{}}
	beat("A joins alone and holds everything", a, []string{"a"}, 0, 5*time.Second)
	b := &cmember{t: t, c: c, id: "B", owned: assign.Partitions{}}
	beat("B joins while A holds its share", b, []string{"a"}, 1300*time.Millisecond, 1800*time.Millisecond)
	beat("B waiting", b, nil, 1800*time.Millisecond, 2300*time.Millisecond)
	beat("A on the tick, told to revoke", a, nil, 5*time.Second, 5500*time.Millisecond)
	if a.owned.Count() != 2 {
		t.Fatalf("A told to keep %d partitions; want 2", a.owned.Count())
	}
	beat("A confirming its revocation", a, nil, 5500*time.Millisecond, 10*time.Second)
	beat("B getting what A released", b, nil, 5800*time.Millisecond, 10*time.Second)
	if b.owned.Count() != 2 {
		t.Fatalf("B holds %d partitions; want 2", b.owned.Count())
	}
	// Late on the tick by a few milliseconds (a round trip): the next tick, not one more.
	beat("A just after the tick", a, nil, 10*time.Second+3*time.Millisecond, 15*time.Second)
	// Closer to the next tick than the floor (500 ms at a 5 s interval): the tick after it.
	beat("B 300 ms before a tick", b, nil, 14700*time.Millisecond, 20*time.Second)
	beat("B 500 ms before a tick", b, nil, 19500*time.Millisecond, 20*time.Second)
	// A clock that runs back re-anchors instead of answering more than the interval.
	at(-time.Second)
	if resp := a.beat(nil); resp.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("A after the clock ran back: interval %d ms; want 5000", resp.HeartbeatIntervalMillis)
	}
}

// TestConsumerTickBounds: every answer is within [max(500 ms, interval/10), interval+floor],
// the next heartbeat it gives lands on a tick, and intervals of 500 ms or less are answered
// as configured.
func TestConsumerTickBounds(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	for _, interval := range []time.Duration{time.Second, 3 * time.Second, 5 * time.Second, 45 * time.Second} {
		cg := newConsumerGroup()
		floor := max(500*time.Millisecond, interval/10)
		for step := time.Duration(0); step < 3*interval; step += 7 * time.Millisecond {
			got := time.Duration(cg.untilTick(t0.Add(step), interval)) * time.Millisecond
			if got < floor || got > interval+floor {
				t.Fatalf("interval %v, +%v: told %v; want within [%v, %v]", interval, step, got, floor, interval+floor)
			}
			if (step+got)%interval != 0 {
				t.Fatalf("interval %v, +%v: told %v, next heartbeat at +%v, not on a tick", interval, step, got, step+got)
			}
		}
	}
	for _, interval := range []time.Duration{200 * time.Millisecond, 500 * time.Millisecond} {
		if got := newConsumerGroup().untilTick(t0, interval); got != int32(interval.Milliseconds()) {
			t.Fatalf("interval %v: told %d ms", interval, got)
		}
	}
}
