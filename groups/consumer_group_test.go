package groups

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/groups/assign"
	"inlet/groups/validate"
	"inlet/meta"
	"inlet/wire"
)

// recStore keeps group records, as meta.Store does, so a second coordinator can load what the
// first saved.
type recStore struct {
	memStore
	rmu     sync.Mutex
	recs    map[string]meta.GroupRecord
	topics  map[string][]byte
	members map[string]map[string]*meta.StoredConsumerMember
}

func (s *recStore) SaveGroup(g string, r meta.GroupRecord) error {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.recs[g] = r
	return nil
}

func (s *recStore) SaveConsumerGroup(g string, w meta.ConsumerGroupWrite) error {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if w.Clear {
		delete(s.topics, g)
		delete(s.members, g)
	}
	if w.Record != nil {
		s.recs[g] = *w.Record
	}
	switch {
	case w.DropTopics:
		delete(s.topics, g)
	case w.Topics != nil:
		s.topics[g] = w.Topics
	}
	ms := s.members[g]
	if ms == nil {
		ms = map[string]*meta.StoredConsumerMember{}
		s.members[g] = ms
	}
	get := func(id string) *meta.StoredConsumerMember {
		if ms[id] == nil {
			ms[id] = &meta.StoredConsumerMember{}
		}
		return ms[id]
	}
	for id, v := range w.Subscriptions {
		get(id).Subscription = v
	}
	for id, v := range w.Assignments {
		get(id).Assignment = v
	}
	for _, id := range w.Deleted {
		delete(ms, id)
	}
	return nil
}

func (s *recStore) LoadGroups() (map[string]*meta.StoredGroup, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	out := map[string]*meta.StoredGroup{}
	for g, r := range s.recs {
		sg := &meta.StoredGroup{Record: r, Offsets: map[meta.OffsetKey]meta.CommittedOffset{}, ConsumerTopics: s.topics[g]}
		if len(s.members[g]) > 0 {
			sg.ConsumerMembers = map[string]*meta.StoredConsumerMember{}
			for id, m := range s.members[g] {
				c := *m
				sg.ConsumerMembers[id] = &c
			}
		}
		out[g] = sg
	}
	return out, nil
}

var topicA = TopicMeta{Name: "a", ID: [16]byte{1}, Partitions: 4}

type topicSet struct {
	mu sync.Mutex
	m  map[string]TopicMeta
}

func (ts *topicSet) set(t TopicMeta) { ts.mu.Lock(); ts.m[t.Name] = t; ts.mu.Unlock() }

func newConsumerCoordinator(t *testing.T, store Store, ts *topicSet, mod func(*ConsumerConfig)) *Coordinator {
	cc := ConsumerConfig{Enabled: true,
		Topic: func(n string) (TopicMeta, bool) { ts.mu.Lock(); defer ts.mu.Unlock(); x, ok := ts.m[n]; return x, ok },
		Topics: func() []TopicMeta {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			var out []TopicMeta
			for _, x := range ts.m {
				out = append(out, x)
			}
			return out
		}}
	if mod != nil {
		mod(&cc)
	}
	c, err := New(store, Config{Consumer: cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newRecStore() *recStore {
	return &recStore{memStore: memStore{offsets: map[string]map[meta.OffsetKey]meta.CommittedOffset{}}, recs: map[string]meta.GroupRecord{},
		topics: map[string][]byte{}, members: map[string]map[string]*meta.StoredConsumerMember{}}
}

// cmember drives one KIP-848 member as a client would: it reports what it owns and applies
// each assignment it is sent.
type cmember struct {
	t     *testing.T
	c     *Coordinator
	id    string
	inst  *string
	epoch int32
	owned assign.Partitions
}

func (m *cmember) beat(topics []string) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch, r.InstanceID = 1, "g", m.id, m.epoch, m.inst
	r.RebalanceTimeoutMillis = 30000
	r.SubscribedTopicNames = topics
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for t, ps := range m.owned {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = t, ps
		r.Topics = append(r.Topics, rt)
	}
	resp := m.c.ConsumerHeartbeat(r, ConsumerHeartbeat{ClientID: "c", ClientHost: "/h"})
	if resp.ErrorCode == wire.ErrNone {
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.owned = assign.Partitions{}
			for _, at := range resp.Assignment.Topics {
				for _, p := range at.Partitions {
					m.owned.Add(at.TopicID, p)
				}
			}
		}
	}
	return resp
}

func join(t *testing.T, c *Coordinator, id string, inst *string) *cmember {
	t.Helper()
	m := &cmember{t: t, c: c, id: id, inst: inst, owned: assign.Partitions{}}
	if resp := m.beat([]string{"a"}); resp.ErrorCode != wire.ErrNone {
		t.Fatalf("%s joins: %d", id, resp.ErrorCode)
	}
	return m
}

// noDoubleOwnership fails if a partition is owned by two members.
func noDoubleOwnership(t *testing.T, ms ...*cmember) int {
	t.Helper()
	seen := map[tp]string{}
	for _, m := range ms {
		for tid, ps := range m.owned {
			for _, p := range ps {
				if o, ok := seen[tp{tid, p}]; ok {
					t.Fatalf("partition %d owned by %s and %s", p, o, m.id)
				}
				seen[tp{tid, p}] = m.id
			}
		}
	}
	return len(seen)
}

// TestConsumerGroupRevokesBeforeAssigning: a second member gets its share only once the first
// has revoked it; no partition is ever owned twice; epochs follow the group's.
func TestConsumerGroupRevokesBeforeAssigning(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, newRecStore(), ts, nil)
	a := join(t, c, "A", nil)
	if a.epoch != 1 || a.owned.Count() != 4 {
		t.Fatalf("first member: epoch %d, %d partitions; want 1, 4", a.epoch, a.owned.Count())
	}
	b := join(t, c, "B", nil)
	if b.owned.Count() != 0 || b.epoch != 2 {
		t.Fatalf("second member at join: epoch %d, %d partitions; want 2 and none (held by A)", b.epoch, b.owned.Count())
	}
	// A's heartbeat: told to revoke two, epoch unchanged.
	a.beat(nil)
	noDoubleOwnership(t, a, b)
	if a.owned.Count() != 2 || a.epoch != 1 {
		t.Fatalf("A after revocation request: epoch %d, %d partitions; want 1, 2", a.epoch, a.owned.Count())
	}
	// B cannot have them before A confirms: A's next heartbeat reports 2 owned and moves on.
	b.beat(nil)
	noDoubleOwnership(t, a, b)
	a.beat(nil)
	if a.epoch != 2 {
		t.Fatalf("A after confirming: epoch %d, want 2", a.epoch)
	}
	b.beat(nil)
	if n := noDoubleOwnership(t, a, b); n != 4 || b.owned.Count() != 2 {
		t.Fatalf("after reconciliation: %d owned, B %d", n, b.owned.Count())
	}
	// Commits: the current epoch only.
	commit := func(m string, epoch int32) int16 {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group, r.MemberID, r.Generation = 9, "g", m, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "a"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return c.Commit(r).Topics[0].Partitions[0].ErrorCode
	}
	for _, x := range []struct {
		m     string
		epoch int32
		want  int16
	}{{"A", 2, wire.ErrNone}, {"A", 1, wire.ErrStaleMemberEpoch}, {"A", 3, wire.ErrFencedMemberEpoch}, {"Z", 2, wire.ErrUnknownMemberID}} {
		if got := commit(x.m, x.epoch); got != x.want {
			t.Errorf("commit as %s at epoch %d: %d, want %d", x.m, x.epoch, got, x.want)
		}
	}
	if got := c.CheckOffsetFetch("g", &b.id, 1); got != wire.ErrStaleMemberEpoch {
		t.Errorf("offset fetch at an old epoch: %d, want STALE_MEMBER_EPOCH", got)
	}
	// A leaves: B takes everything, the group epoch moves.
	lr := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	lr.Version, lr.Group, lr.MemberID, lr.MemberEpoch = 1, "g", "A", -1
	if resp := c.ConsumerHeartbeat(lr, ConsumerHeartbeat{}); resp.ErrorCode != 0 || resp.MemberEpoch != -1 {
		t.Fatalf("leave: %d epoch %d", resp.ErrorCode, resp.MemberEpoch)
	}
	b.beat(nil)
	if b.owned.Count() != 4 || b.epoch != 3 {
		t.Fatalf("B alone: epoch %d, %d partitions", b.epoch, b.owned.Count())
	}
	// A stale epoch is fenced.
	b.epoch = 7
	if resp := b.beat(nil); resp.ErrorCode != wire.ErrFencedMemberEpoch {
		t.Fatalf("heartbeat at a later epoch: %d, want FENCED_MEMBER_EPOCH", resp.ErrorCode)
	}
}

// TestConsumerGroupTopicGrowthAndRestart: partitions added to a subscribed topic raise the
// epoch and are assigned; a restarted coordinator resumes epochs and assignments.
func TestConsumerGroupTopicGrowthAndRestart(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	store := newRecStore()
	c := newConsumerCoordinator(t, store, ts, nil)
	a := join(t, c, "A", nil)
	grown := topicA
	grown.Partitions = 6
	ts.set(grown)
	c.TopicsChanged()
	a.beat(nil)
	if a.owned.Count() != 6 || a.epoch != 2 {
		t.Fatalf("after growth: epoch %d, %d partitions; want 2, 6", a.epoch, a.owned.Count())
	}
	c.Close()
	c2 := newConsumerCoordinator(t, store, ts, nil)
	a.c = c2
	if resp := a.beat(nil); resp.ErrorCode != 0 || a.epoch != 2 || a.owned.Count() != 6 {
		t.Fatalf("after restart: code %d epoch %d, %d partitions", resp.ErrorCode, a.epoch, a.owned.Count())
	}
	l := c2.List()
	if len(l) != 1 || l[0].Type != "consumer" || l[0].StateName != "Stable" {
		t.Fatalf("listing: %+v", l)
	}
	if d := c2.Describe("g"); d.ErrorCode != wire.ErrGroupIDNotFound {
		t.Fatalf("DescribeGroups of a consumer group: %d, want GROUP_ID_NOT_FOUND", d.ErrorCode)
	}
	d := c2.DescribeConsumer("g")
	if d.Group.ErrorCode != 0 || d.Group.Epoch != 2 || len(d.Group.Members) != 1 || d.Group.AssignorName != AssignorUniform {
		t.Fatalf("ConsumerGroupDescribe: %+v", d.Group)
	}
}

// TestConsumerGroupStaticMember: a static member leaving with epoch -2 keeps its partitions
// (another member does not get them); its next instance takes them over; a second instance
// while the first is active is UNRELEASED_INSTANCE_ID.
func TestConsumerGroupStaticMember(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, newRecStore(), ts, nil)
	inst := "i1"
	s1 := join(t, c, "S1", &inst)
	dup := &cmember{t: t, c: c, id: "S2", inst: &inst, owned: assign.Partitions{}}
	if resp := dup.beat([]string{"a"}); resp.ErrorCode != wire.ErrUnreleasedInstanceID {
		t.Fatalf("second instance while the first is active: %d", resp.ErrorCode)
	}
	lr := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	lr.Version, lr.Group, lr.MemberID, lr.MemberEpoch, lr.InstanceID = 1, "g", "S1", -2, &inst
	if resp := c.ConsumerHeartbeat(lr, ConsumerHeartbeat{}); resp.ErrorCode != 0 || resp.MemberEpoch != -2 {
		t.Fatalf("static leave: %d %d", resp.ErrorCode, resp.MemberEpoch)
	}
	o := join(t, c, "O", nil)
	o.beat(nil)
	if n := o.owned.Count(); n != 0 {
		t.Fatalf("other member took %d partitions of a static member away", n)
	}
	s2 := join(t, c, "S2", &inst)
	if s2.owned.Count() != 4-0 && s2.owned.Count() == 0 {
		t.Fatalf("new instance got nothing")
	}
	s1.owned = assign.Partitions{} // the old instance is gone
	for i := 0; i < 4; i++ {
		s2.beat(nil)
		o.beat(nil)
		noDoubleOwnership(t, s2, o)
	}
	if s2.owned.Count() != 2 || o.owned.Count() != 2 {
		t.Fatalf("after the static member came back: %d and %d", s2.owned.Count(), o.owned.Count())
	}
}

// TestConsumerGroupBounds: members beyond group.consumer.max.size, unknown assignors, bad
// regular expressions and the protocol turned off are refused with Kafka's codes.
func TestConsumerGroupBounds(t *testing.T) {
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, newRecStore(), ts, func(cc *ConsumerConfig) { cc.MaxSize = 1 })
	join(t, c, "A", nil)
	m := &cmember{t: t, c: c, id: "B", owned: assign.Partitions{}}
	if resp := m.beat([]string{"a"}); resp.ErrorCode != wire.ErrGroupMaxSizeReached {
		t.Fatalf("member over the bound: %d", resp.ErrorCode)
	}
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, "h", "X", 1000
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	bad := "a(("
	r.SubscribedTopicRegex = &bad
	if resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrInvalidRegularExpression {
		t.Fatalf("bad regex: %d", resp.ErrorCode)
	}
	long := string(make([]byte, validate.MaxRegexLength+1))
	r.SubscribedTopicRegex = &long
	if resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrInvalidRegularExpression {
		t.Fatalf("long regex: %d", resp.ErrorCode)
	}
	good, nope := "a.*", "sticky"
	r.SubscribedTopicRegex, r.ServerAssignor = &good, &nope
	if resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrUnsupportedAssignor {
		t.Fatalf("unknown assignor: %d", resp.ErrorCode)
	}
	beat := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	beat.Version, beat.Group, beat.MemberID, beat.MemberEpoch = 1, "nowhere", "X", 3
	if resp := c.ConsumerHeartbeat(beat, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrGroupIDNotFound {
		t.Fatalf("heartbeat to a group that does not exist: %d, want GROUP_ID_NOT_FOUND", resp.ErrorCode)
	}
	off := newConsumerCoordinator(t, newRecStore(), ts, func(cc *ConsumerConfig) { cc.Enabled = false })
	r.ServerAssignor = nil
	if resp := off.ConsumerHeartbeat(r, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrUnsupportedVersion {
		t.Fatalf("protocol off: %d", resp.ErrorCode)
	}
	// A regex member gets the topics it matches and may see.
	r.ServerAssignor = nil
	resp := c.ConsumerHeartbeat(r, ConsumerHeartbeat{Allowed: func(string) bool { return true }})
	if resp.ErrorCode != 0 || resp.Assignment == nil || len(resp.Assignment.Topics) != 1 {
		t.Fatalf("regex member: %+v", resp)
	}
	r.Group, r.MemberID = "h2", "Y"
	resp = c.ConsumerHeartbeat(r, ConsumerHeartbeat{Allowed: func(string) bool { return false }})
	if resp.ErrorCode != 0 || resp.Assignment == nil || len(resp.Assignment.Topics) != 0 {
		t.Fatalf("regex member who may not see the topic: %+v", resp)
	}
}

var _ = time.Second
