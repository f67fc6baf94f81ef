package groups

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/meta"
	"inlet/wire"
)

type memStore struct {
	mu      sync.Mutex
	offsets map[string]map[meta.OffsetKey]meta.CommittedOffset
}

func (m *memStore) CommitOffsets(g string, o map[meta.OffsetKey]meta.CommittedOffset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.offsets[g] == nil {
		m.offsets[g] = map[meta.OffsetKey]meta.CommittedOffset{}
	}
	for k, v := range o {
		m.offsets[g][k] = v
	}
	return nil
}
func (m *memStore) DeleteOffsets(string, []meta.OffsetKey) error            { return nil }
func (m *memStore) DeleteGroup(string) error                                { return nil }
func (m *memStore) SaveGroup(string, meta.GroupRecord) error                { return nil }
func (m *memStore) SaveConsumerGroup(string, meta.ConsumerGroupWrite) error { return nil }
func (m *memStore) LoadGroups() (map[string]*meta.StoredGroup, error)       { return nil, nil }

func newTestCoordinator(t *testing.T) *Coordinator {
	c, err := New(&memStore{offsets: map[string]map[meta.OffsetKey]meta.CommittedOffset{}},
		Config{MinSessionTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func joinReq(member string, instance *string, session time.Duration) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 5
	r.Group = "g"
	r.MemberID = member
	r.InstanceID = instance
	r.SessionTimeoutMillis = int32(session / time.Millisecond)
	r.RebalanceTimeoutMillis = 2000
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{1}
	r.Protocols = append(r.Protocols, p)
	return r
}

func heartbeat(c *Coordinator, member string, gen int32, instance *string) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation, r.InstanceID = "g", member, gen, instance
	return c.Heartbeat(r)
}

// waitRebalance heartbeats as member until the group answers REBALANCE_IN_PROGRESS (5 s at most).
func waitRebalance(t *testing.T, c *Coordinator, member string, gen int32, instance *string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for heartbeat(c, member, gen, instance) != wire.ErrRebalanceInProgress {
		if time.Now().After(deadline) {
			t.Fatal("heartbeat never reported the rebalance")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func syncReq(member string, gen int32, assign map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 3
	r.Group, r.MemberID, r.Generation = "g", member, gen
	for m, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, a
		r.GroupAssignment = append(r.GroupAssignment, ga)
	}
	return r
}

// TestGroupFencingErrorCodes walks a group through the classic protocol's error paths:
// MEMBER_ID_REQUIRED on a v4+ first join, REBALANCE_IN_PROGRESS when a second member joins,
// ILLEGAL_GENERATION for a stale generation, UNKNOWN_MEMBER_ID for strangers,
// FENCED_INSTANCE_ID for a replaced static member, and session expiry.
func TestGroupFencingErrorCodes(t *testing.T) {
	c := newTestCoordinator(t)
	done := make(chan struct{})
	defer close(done)
	session := 5 * time.Second

	r := c.Join(joinReq("", nil, session), "c", "/h", done, nil)
	if r.ErrorCode != wire.ErrMemberIDRequired || r.MemberID == "" {
		t.Fatalf("first v4+ join: error %d member %q, want MEMBER_ID_REQUIRED and an id", r.ErrorCode, r.MemberID)
	}
	a := r.MemberID
	r = c.Join(joinReq(a, nil, session), "c", "/h", done, nil)
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != a || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
	if s := c.Sync(syncReq(a, 1, map[string][]byte{a: []byte("A")}), done, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("leader sync: %+v", s)
	}
	if code := heartbeat(c, a, 0, nil); code != wire.ErrIllegalGeneration {
		t.Fatalf("stale generation heartbeat: %d", code)
	}
	if code := heartbeat(c, "stranger", 1, nil); code != wire.ErrUnknownMemberID {
		t.Fatalf("unknown member heartbeat: %d", code)
	}

	// A static member joins: the group rebalances and the first member learns it from its
	// heartbeat.
	inst := "i1"
	bch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { bch <- c.Join(joinReq("", &inst, session), "c", "/h", done, nil) }()
	waitRebalance(t, c, a, 1, nil)
	r = c.Join(joinReq(a, nil, session), "c", "/h", done, nil)
	rb := <-bch
	if r.ErrorCode != 0 || rb.ErrorCode != 0 || r.Generation != 2 || rb.Generation != 2 {
		t.Fatalf("second generation: %+v / %+v", r, rb)
	}
	b := rb.MemberID

	// A new instance of the static member fences the old one.
	r2 := c.Join(joinReq("", &inst, session), "c", "/h", done, nil)
	if r2.MemberID == b {
		t.Fatalf("replacement kept the old member id")
	}
	if code := heartbeat(c, b, 2, &inst); code != wire.ErrFencedInstanceID {
		t.Fatalf("replaced static member heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}

	// Offsets: a member of the wrong generation cannot commit; a stranger neither.
	commit := func(member string, gen int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 7
		req.Group, req.MemberID, req.Generation = "g", member, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 5
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.Commit(req).Topics[0].Partitions[0].ErrorCode
	}
	// The replacement rebalanced the group; the first member did not rejoin within the
	// rebalance timeout and was removed.
	if r2.ErrorCode != 0 || r2.Generation != 3 {
		t.Fatalf("replacement join: %+v", r2)
	}
	if code := commit(r2.MemberID, 2); code != wire.ErrIllegalGeneration {
		t.Fatalf("commit with a stale generation: %d", code)
	}
	if code := commit(a, 3); code != wire.ErrUnknownMemberID {
		t.Fatalf("commit by a removed member: %d", code)
	}
	if code := commit("", -1); code != wire.ErrUnknownMemberID {
		t.Fatalf("simple commit into a group with members: %d", code)
	}
	if code := c.Delete("g"); code != wire.ErrNonEmptyGroup {
		t.Fatalf("delete a group with members: %d", code)
	}
}

// TestSessionExpiryRemovesMember guards the session timeout: a member that stops
// heartbeating leaves the group, which becomes Empty and then accepts simple commits.
func TestSessionExpiryRemovesMember(t *testing.T) {
	c := newTestCoordinator(t)
	done := make(chan struct{})
	defer close(done)
	req := joinReq("", nil, 50*time.Millisecond)
	req.Version = 3 // no MEMBER_ID_REQUIRED round trip
	r := c.Join(req, "c", "/h", done, nil)
	if r.ErrorCode != 0 {
		t.Fatalf("join: %d", r.ErrorCode)
	}
	c.Sync(syncReq(r.MemberID, r.Generation, map[string][]byte{r.MemberID: {1}}), done, nil)
	deadline := time.Now().Add(5 * time.Second)
	for c.Describe("g").State != "Empty" {
		if time.Now().After(deadline) {
			t.Fatalf("group still %s after the session timeout", c.Describe("g").State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := heartbeat(c, r.MemberID, r.Generation, nil); code != wire.ErrUnknownMemberID {
		t.Fatalf("expired member heartbeat: %d", code)
	}
	if code := c.Delete("g"); code != 0 {
		t.Fatalf("delete the empty group: %d", code)
	}
}

// TestCommittedOffsetsListsLiveGroups: CommittedOffsets (what metrics read) lists every
// committed offset of every group, and nothing of a deleted one.
func TestCommittedOffsetsListsLiveGroups(t *testing.T) {
	c := newTestCoordinator(t)
	commit := func(group string, partition int32, offset int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = partition, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if code := c.Commit(req).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit %s/%d: error %d", group, partition, code)
		}
	}
	commit("a", 0, 5)
	commit("a", 1, 7)
	commit("b", 0, 9)
	if code := c.Delete("b"); code != 0 {
		t.Fatalf("delete b: %d", code)
	}
	got := map[CommittedOffset]bool{}
	for _, o := range c.CommittedOffsets() {
		got[o] = true
	}
	want := map[CommittedOffset]bool{{"a", "t", 0, 5}: true, {"a", "t", 1, 7}: true}
	if len(got) != len(want) {
		t.Fatalf("CommittedOffsets = %v, want %v", got, want)
	}
	for o := range want {
		if !got[o] {
			t.Fatalf("CommittedOffsets = %v, want %v", got, want)
		}
	}
}

// savingStore keeps the last record SaveGroup got per group and gives them back on load, as
// the batch log does across a restart.
type savingStore struct {
	memStore
	recs map[string]meta.GroupRecord
}

func (s *savingStore) SaveGroup(g string, r meta.GroupRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[g] = r
	return nil
}

func (s *savingStore) LoadGroups() (map[string]*meta.StoredGroup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*meta.StoredGroup{}
	for g, r := range s.recs {
		out[g] = &meta.StoredGroup{Record: r, Offsets: map[meta.OffsetKey]meta.CommittedOffset{}}
	}
	return out, nil
}

// TestStableGroupSurvivesARestart: a group that completed its rebalance comes back after a
// restart with its members, generation and assignments, so its members go on heartbeating
// (as after a Kafka coordinator moves) instead of getting UNKNOWN_MEMBER_ID and rejoining; a
// group caught between JoinGroup and SyncGroup comes back Empty at its generation.
func TestStableGroupSurvivesARestart(t *testing.T) {
	store := &savingStore{memStore: memStore{offsets: map[string]map[meta.OffsetKey]meta.CommittedOffset{}}, recs: map[string]meta.GroupRecord{}}
	open := func() *Coordinator {
		c, err := New(store, Config{MinSessionTimeout: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	done := make(chan struct{})
	defer close(done)
	c := open()
	inst := "static-1"
	r := c.Join(joinReq("", &inst, 5*time.Second), "client", "/h", done, nil)
	a := r.MemberID
	if r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("join: %+v", r)
	}
	if s := c.Sync(syncReq(a, 1, map[string][]byte{a: []byte("A")}), done, nil); s.ErrorCode != 0 {
		t.Fatalf("sync: %+v", s)
	}
	c.Close()

	c = open()
	if code := heartbeat(c, a, 1, &inst); code != wire.ErrNone {
		t.Fatalf("heartbeat after a restart: error %d", code)
	}
	if s := c.Sync(syncReq(a, 1, nil), done, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("sync after a restart: %+v", s)
	}
	if d := c.Describe("g"); d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != a || d.Members[0].ClientID != "client" {
		t.Fatalf("described after a restart: %+v", d)
	}
	// The static member restarts and takes its instance id back under a new member id, with
	// no rebalance; after a node restart the new id is the one known.
	r = c.Join(joinReq("", &inst, 5*time.Second), "client", "/h", done, nil)
	if r.ErrorCode != 0 || r.MemberID == a {
		t.Fatalf("static rejoin: %+v", r)
	}
	a = r.MemberID
	c.Close()
	c = open()
	if code := heartbeat(c, a, 1, &inst); code != wire.ErrNone {
		t.Fatalf("heartbeat of the static member's new id after a restart: error %d", code)
	}
	// A second member starts a rebalance; the node stops before the SyncGroup.
	bch := make(chan *kmsg.JoinGroupResponse, 1)
	inst2 := "static-2"
	go func() { bch <- c.Join(joinReq("", &inst2, 5*time.Second), "client", "/h", done, nil) }()
	waitRebalance(t, c, a, 1, &inst)
	c.Join(joinReq(a, &inst, 5*time.Second), "client", "/h", done, nil)
	b := (<-bch).MemberID
	c.Close()
	// Back mid-rebalance: both members are known and asked to rejoin, under the ids they hold.
	c = open()
	if code := heartbeat(c, a, 2, &inst); code != wire.ErrRebalanceInProgress {
		t.Fatalf("heartbeat after a restart mid-rebalance: error %d, want REBALANCE_IN_PROGRESS", code)
	}
	if d := c.Describe("g"); d.State != "PreparingRebalance" || len(d.Members) != 2 {
		t.Fatalf("after a restart mid-rebalance: %+v", d)
	}
	// A member that got its JoinGroup answer before the restart syncs as that answer said.
	sr := syncReq(a, 2, nil)
	sr.Protocol = kmsg.StringPtr("range")
	sr.ProtocolType = kmsg.StringPtr("consumer")
	if s := c.Sync(sr, done, nil); s.ErrorCode != wire.ErrRebalanceInProgress {
		t.Fatalf("sync after a restart mid-rebalance: error %d, want REBALANCE_IN_PROGRESS", s.ErrorCode)
	}
	go func() { bch <- c.Join(joinReq(b, &inst2, 5*time.Second), "client", "/h", done, nil) }()
	r = c.Join(joinReq(a, &inst, 5*time.Second), "client", "/h", done, nil)
	rb := <-bch
	if r.ErrorCode != 0 || rb.ErrorCode != 0 || r.Generation != 3 || r.MemberID != a || rb.MemberID != b {
		t.Fatalf("rejoin after a restart mid-rebalance: %+v / %+v", r, rb)
	}
	// A static member replaced mid-rebalance is known by its new id after a restart.
	c.Close()
	c = open()
	go func() { c.Join(joinReq("", &inst, 5*time.Second), "client", "/h", done, nil) }()
	deadline := time.Now().Add(5 * time.Second)
	for heartbeat(c, a, 3, &inst) != wire.ErrFencedInstanceID {
		if time.Now().After(deadline) {
			t.Fatal("the static member's old id was never fenced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.Close()
	c = open()
	d := c.Describe("g")
	if len(d.Members) != 2 {
		t.Fatalf("after a restart following a static replacement mid-rebalance: %+v", d)
	}
	for _, m := range d.Members {
		if m.MemberID == a {
			t.Fatalf("the replaced member id %s came back after a restart: %+v", a, d)
		}
	}
}

// TestTxnOffsetsDoNotOverwriteALaterCommit: a transaction's offset, given before a plain
// commit of the same partition, does not replace it when the transaction commits; one given
// after does.
func TestTxnOffsetsDoNotOverwriteALaterCommit(t *testing.T) {
	c := newTestCoordinator(t)
	k := meta.OffsetKey{Topic: "t", Partition: 0}
	given := time.Now().UnixNano()
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation = 8, "g", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = 50
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	if resp := c.Commit(r); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("plain commit: %+v", resp)
	}
	if err := c.ApplyTxnOffsets("g", map[meta.OffsetKey]meta.CommittedOffset{k: {Offset: 40}}, map[meta.OffsetKey]int64{k: given}); err != nil {
		t.Fatal(err)
	}
	if got := c.FetchOffsets("g", map[string][]int32{"t": {0}}, false)[0].Partitions[0].Offset; got != 50 {
		t.Fatalf("offset %d after an older transaction's commit, want the later plain 50", got)
	}
	if err := c.ApplyTxnOffsets("g", map[meta.OffsetKey]meta.CommittedOffset{k: {Offset: 60}}, map[meta.OffsetKey]int64{k: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	if got := c.FetchOffsets("g", map[string][]int32{"t": {0}}, false)[0].Partitions[0].Offset; got != 60 {
		t.Fatalf("offset %d after a newer transaction's commit, want 60", got)
	}
}

// TestSimpleCommitWithOwnMemberID: a generation -1 commit naming a member id of the client's
// own making is taken by an Empty (or new) group, as Kafka 4's coordinator takes it; once the
// group has members, it is refused.
func TestSimpleCommitWithOwnMemberID(t *testing.T) {
	c := newTestCoordinator(t)
	commit := func(member string) int16 {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group, r.Generation, r.MemberID = 8, "g", -1, member
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 5
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return c.Commit(r).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("rdkafka-0a1b2c3d"); code != wire.ErrNone {
		t.Fatalf("simple commit with a member id to a new group: %d, want NONE", code)
	}
	if code := commit("rdkafka-0a1b2c3d"); code != wire.ErrNone {
		t.Fatalf("simple commit with a member id to an Empty group: %d, want NONE", code)
	}
	resp := c.Join(joinReq("", nil, time.Second), "c", "h", nil, nil)
	resp = c.Join(joinReq(resp.MemberID, nil, time.Second), "c", "h", nil, nil)
	if resp.ErrorCode != wire.ErrNone {
		t.Fatalf("join: %d", resp.ErrorCode)
	}
	if code := commit("rdkafka-0a1b2c3d"); code != wire.ErrUnknownMemberID {
		t.Fatalf("simple commit with a stranger's member id to a group with members: %d, want UNKNOWN_MEMBER_ID", code)
	}
}
