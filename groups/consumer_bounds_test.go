package groups

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/groups/validate"
	"inlet/wire"
)

// joinReq is a v1 join of member id to group with the given subscription.
func cgJoin(group, id string, names []string, regex *string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, group, id, 30000
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r.SubscribedTopicNames, r.SubscribedTopicRegex = names, regex
	return r
}

func cgLeave(group, id string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, group, id, -1
	return r
}

// TestConsumerMembersPerPrincipalBounded: a principal's members over every group stop at
// MaxMembersPerPrincipal (GROUP_MAX_SIZE_REACHED) while another principal still joins; a
// member leaving frees its place; the count comes back with the members after a restart.
func TestConsumerMembersPerPrincipalBounded(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	store := newRecStore()
	bound := func(cc *ConsumerConfig) { cc.MaxMembersPerPrincipal = 3 }
	c := newConsumerCoordinator(t, store, ts, bound)
	mallory := ConsumerHeartbeat{Principal: "User:mallory"}
	for i := range 3 {
		if resp := c.ConsumerHeartbeat(cgJoin(fmt.Sprintf("g%d", i), fmt.Sprintf("m%d", i), []string{"a"}, nil), mallory); resp.ErrorCode != 0 {
			t.Fatalf("join %d: %d", i, resp.ErrorCode)
		}
	}
	resp := c.ConsumerHeartbeat(cgJoin("g9", "m9", []string{"a"}, nil), mallory)
	if resp.ErrorCode != wire.ErrGroupMaxSizeReached || resp.ErrorMessage == nil {
		t.Fatalf("member past the principal's bound: %d %v, want GROUP_MAX_SIZE_REACHED with a message", resp.ErrorCode, resp.ErrorMessage)
	}
	// Rejoining under an id it holds does not count twice.
	if resp := c.ConsumerHeartbeat(cgJoin("g0", "m0", []string{"a"}, nil), mallory); resp.ErrorCode != 0 {
		t.Fatalf("rejoin under a held id: %d", resp.ErrorCode)
	}
	if resp := c.ConsumerHeartbeat(cgJoin("g9", "b", []string{"a"}, nil), ConsumerHeartbeat{Principal: "User:bob"}); resp.ErrorCode != 0 {
		t.Fatalf("another principal: %d", resp.ErrorCode)
	}
	if resp := c.ConsumerHeartbeat(cgLeave("g1", "m1"), mallory); resp.ErrorCode != 0 {
		t.Fatalf("leave: %d", resp.ErrorCode)
	}
	if resp := c.ConsumerHeartbeat(cgJoin("g9", "m9", []string{"a"}, nil), mallory); resp.ErrorCode != 0 {
		t.Fatalf("join after a leave: %d", resp.ErrorCode)
	}
	if n := c.MembersOf("User:mallory"); n != 3 {
		t.Fatalf("mallory holds %d members, want 3", n)
	}
	// At the bound, a static member's next instance still takes over its place.
	inst := "static-1"
	c.ConsumerHeartbeat(cgLeave("g9", "m9"), mallory)
	sj := cgJoin("g9", "s1", []string{"a"}, nil)
	sj.InstanceID = &inst
	if resp := c.ConsumerHeartbeat(sj, mallory); resp.ErrorCode != 0 {
		t.Fatalf("static member at the bound's last place: %d", resp.ErrorCode)
	}
	sl := cgLeave("g9", "s1")
	sl.MemberEpoch, sl.InstanceID = -2, &inst
	if resp := c.ConsumerHeartbeat(sl, mallory); resp.ErrorCode != 0 {
		t.Fatalf("static leave: %d", resp.ErrorCode)
	}
	sj.MemberID = "s2"
	if resp := c.ConsumerHeartbeat(sj, mallory); resp.ErrorCode != 0 {
		t.Fatalf("static member's next instance at the bound: %d", resp.ErrorCode)
	}
	if n := c.MembersOf("User:mallory"); n != 3 {
		t.Fatalf("mallory holds %d members after the static replacement, want 3", n)
	}
	c.Close()
	c2 := newConsumerCoordinator(t, store, ts, bound)
	if n := c2.MembersOf("User:mallory"); n != 3 {
		t.Fatalf("after a restart mallory holds %d members, want 3", n)
	}
	if resp := c2.ConsumerHeartbeat(cgJoin("g8", "m8", []string{"a"}, nil), mallory); resp.ErrorCode != wire.ErrGroupMaxSizeReached {
		t.Fatalf("after a restart, member past the bound: %d", resp.ErrorCode)
	}
}

// TestConsumerSubscriptionBounded: too many subscribed names, a name no topic can have, and
// over-long ids are INVALID_REQUEST, at a join and at a later heartbeat.
func TestConsumerSubscriptionBounded(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, newRecStore(), ts, func(cc *ConsumerConfig) { cc.MaxSubscribedTopics = 4 })
	many := []string{"a", "b", "c", "d", "e"}
	long := strings.Repeat("x", validate.MaxTopicNameLength+1)
	longID := strings.Repeat("m", validate.MaxIDLength+1)
	for _, tc := range []struct {
		name string
		req  *kmsg.ConsumerGroupHeartbeatRequest
	}{
		{"too many names", cgJoin("g", "m", many, nil)},
		{"a name longer than a topic's", cgJoin("g", "m", []string{long}, nil)},
		{"a long member id", cgJoin("g", longID, []string{"a"}, nil)},
		{"a long instance id", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgJoin("g", "m", []string{"a"}, nil)
			r.InstanceID = &longID
			return r
		}()},
		{"a long rack id", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgJoin("g", "m", []string{"a"}, nil)
			r.RackID = &longID
			return r
		}()},
	} {
		if resp := c.ConsumerHeartbeat(tc.req, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrInvalidRequest || resp.ErrorMessage == nil {
			t.Errorf("%s: %d, want INVALID_REQUEST with a message", tc.name, resp.ErrorCode)
		}
	}
	m := join(t, c, "A", nil)
	r := cgJoin("g", "A", many[:4], nil)
	r.MemberEpoch, r.Topics = m.epoch, nil
	if resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{}); resp.ErrorCode != 0 {
		t.Fatalf("four names: %d", resp.ErrorCode)
	}
	r.SubscribedTopicNames = many
	if resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrInvalidRequest {
		t.Fatalf("five names at a heartbeat: %d", resp.ErrorCode)
	}
	// The client id is cut, not refused.
	r = cgJoin("g", "B", []string{"a"}, nil)
	if resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{ClientID: strings.Repeat("c", 10000)}); resp.ErrorCode != 0 {
		t.Fatalf("long client id: %d", resp.ErrorCode)
	}
	if d := c.DescribeConsumer("g"); len(d.Group.Members) != 2 || len(d.Group.Members[1].ClientID) > validate.MaxIDLength {
		t.Fatalf("long client id kept: %d members", len(d.Group.Members))
	}
}

// TestConsumerRegexBounded: a regular expression that compiles to a blow-up is
// INVALID_REGULAR_EXPRESSION (which expressions are: package validate's tests); a group's distinct expressions stop at MaxRegexes
// (INVALID_REQUEST), however many members share one, and free up as members leave.
func TestConsumerRegexBounded(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, newRecStore(), ts, func(cc *ConsumerConfig) { cc.MaxRegexes = 2 })
	blowup := strings.Repeat("a{1000}", 140) // 980 bytes; 140,000 instructions
	if resp := c.ConsumerHeartbeat(cgJoin("g", "x", nil, &blowup), ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrInvalidRegularExpression {
		t.Fatalf("blow-up regex: %d, want INVALID_REGULAR_EXPRESSION", resp.ErrorCode)
	}
	r1, r2, r3 := "a.*", "b.*", "c.*"
	for i := range 5 {
		if resp := c.ConsumerHeartbeat(cgJoin("g", fmt.Sprintf("s%d", i), nil, &r1), ConsumerHeartbeat{}); resp.ErrorCode != 0 {
			t.Fatalf("member %d sharing a regex: %d", i, resp.ErrorCode)
		}
	}
	resp := c.ConsumerHeartbeat(cgJoin("g", "t", nil, &r2), ConsumerHeartbeat{})
	if resp.ErrorCode != 0 {
		t.Fatalf("second regex: %d", resp.ErrorCode)
	}
	tEpoch := resp.MemberEpoch
	resp = c.ConsumerHeartbeat(cgJoin("g", "u", nil, &r3), ConsumerHeartbeat{})
	if resp.ErrorCode != wire.ErrInvalidRequest || resp.ErrorMessage == nil {
		t.Fatalf("third distinct regex: %d, want INVALID_REQUEST with a message", resp.ErrorCode)
	}
	// A member alone with its regex may change it at the bound.
	beat := cgJoin("g", "t", nil, &r3)
	beat.MemberEpoch, beat.Topics = tEpoch, nil
	resp = c.ConsumerHeartbeat(beat, ConsumerHeartbeat{})
	if resp.ErrorCode != 0 {
		t.Fatalf("the only member of a regex changes it at the bound: %d", resp.ErrorCode)
	}
	beat.SubscribedTopicRegex, beat.MemberEpoch = &r2, resp.MemberEpoch
	if resp := c.ConsumerHeartbeat(beat, ConsumerHeartbeat{}); resp.ErrorCode != 0 {
		t.Fatalf("and back: %d", resp.ErrorCode)
	}
	if resp := c.ConsumerHeartbeat(cgLeave("g", "t"), ConsumerHeartbeat{}); resp.ErrorCode != 0 {
		t.Fatal(resp.ErrorCode)
	}
	if resp := c.ConsumerHeartbeat(cgJoin("g", "u", nil, &r3), ConsumerHeartbeat{}); resp.ErrorCode != 0 {
		t.Fatalf("a regex after another's last member left: %d", resp.ErrorCode)
	}
	g := c.get("g", false)
	g.mu.Lock()
	n := len(g.cg.regexes)
	g.mu.Unlock()
	if n != 2 {
		t.Fatalf("group keeps %d regexes, want 2", n)
	}
}

// TestConsumerHeartbeatCostIsBounded: heartbeats that change nothing look no topic up and
// match no regular expression, however many members and subscriptions the group has; a
// regular expression shared by every member is matched once per topic change.
func TestConsumerHeartbeatCostIsBounded(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	for i := range 50 {
		ts.m[fmt.Sprintf("t%d", i)] = TopicMeta{Name: fmt.Sprintf("t%d", i), ID: [16]byte{2, byte(i)}, Partitions: 1}
	}
	var lookups, listings atomic.Int64
	c := newConsumerCoordinator(t, newRecStore(), ts, func(cc *ConsumerConfig) {
		topic, topics := cc.Topic, cc.Topics
		cc.Topic = func(n string) (TopicMeta, bool) { lookups.Add(1); return topic(n) }
		cc.Topics = func() []TopicMeta { listings.Add(1); return topics() }
	})
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("t%d", i))
	}
	re := "t.*"
	type mem struct {
		id    string
		epoch int32
	}
	var ms []*mem
	for i := range 20 {
		r := cgJoin("g", fmt.Sprintf("m%d", i), names, nil)
		if i%2 == 1 {
			r.SubscribedTopicNames, r.SubscribedTopicRegex = []string{}, &re
		}
		resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{})
		if resp.ErrorCode != 0 {
			t.Fatalf("join %d: %d", i, resp.ErrorCode)
		}
		ms = append(ms, &mem{fmt.Sprintf("m%d", i), resp.MemberEpoch})
	}
	if n := listings.Load(); n != 1 {
		t.Fatalf("ten members sharing one regex: the topics listed %d times, want once", n)
	}
	beat := func() {
		for _, m := range ms {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "g", m.id, m.epoch
			resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{})
			if resp.ErrorCode != 0 {
				t.Fatalf("heartbeat of %s: %d", m.id, resp.ErrorCode)
			}
			m.epoch = resp.MemberEpoch
		}
	}
	beat() // the group settles on its last epoch
	lookups.Store(0)
	listings.Store(0)
	for range 5 {
		beat()
	}
	if l, n := lookups.Load(), listings.Load(); l != 0 || n != 0 {
		t.Fatalf("100 heartbeats that change nothing: %d topic lookups and %d listings, want none", l, n)
	}
	c.TopicsChanged()
	beat()
	if l, n := lookups.Load(), listings.Load(); n != 1 || l > 51 {
		t.Fatalf("after a topic change: %d lookups and %d listings, want at most 51 and 1", l, n)
	}
}
