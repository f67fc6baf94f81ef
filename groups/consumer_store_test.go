package groups

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/groups/assign"
	"inlet/groups/validate"
	"inlet/meta"
	"inlet/wire"
)

// openMetaStore opens a catalog on fs (an in-memory file system that outlives the Store, so a
// second Open on it is a restart).
func openMetaStore(t *testing.T, fs vfs.FS) *meta.Store {
	t.Helper()
	s, err := meta.Open(meta.Options{Dir: "db", FS: fs, MemTableSize: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// walBytes is what the catalog has written to Pebble's write-ahead log since it opened: the
// bytes of every batch committed, keys and values.
func walBytes(s *meta.Store) uint64 { return s.DB().Metrics().WAL.BytesIn }

// describe is a group as ConsumerGroupDescribe shows it, members in id order.
func describe(c *Coordinator, name string) kmsg.ConsumerGroupDescribeResponseGroup {
	return c.DescribeConsumer(name).Group
}

// TestConsumerGroupChangeWritesOnlyItsMembersRecords pins what one change costs on disk: with
// 200 members each subscribed to 256 names of 249 bytes (a group whose subscriptions are
// 12.8 MB), a member joining writes about its own subscription and a member's heartbeat that
// moves its epoch writes a few hundred bytes, measured as Pebble's WAL bytes, instead of the
// whole group's record each time. The group then comes back from its records as it was.
func TestConsumerGroupChangeWritesOnlyItsMembersRecords(t *testing.T) {
	const members, names = 200, DefaultConsumerMaxSubscribedTopics
	fs := vfs.NewMem()
	store := openMetaStore(t, fs)
	defer func() { store.Close() }()
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, store, ts, nil)
	subscription := func(i int) []string {
		out := []string{"a"}
		for j := 1; j < names; j++ {
			out = append(out, fmt.Sprintf("%s-%04d-%04d", strings.Repeat("t", validate.MaxTopicNameLength-10), i, j))
		}
		return out
	}
	// encoded is what a subscription costs in JSON: each name quoted, with a comma.
	encoded := func(subs []string) (n int) {
		for _, s := range subs {
			n += len(s) + 3
		}
		return n
	}
	joinWith := func(id string, subs []string) *cmember {
		m := &cmember{t: t, c: c, id: id, owned: assign.Partitions{}}
		if resp := m.beat(subs); resp.ErrorCode != wire.ErrNone {
			t.Fatalf("%s joins: %d", id, resp.ErrorCode)
		}
		return m
	}
	var ms []*cmember
	for i := range members {
		ms = append(ms, joinWith(fmt.Sprintf("m%03d", i), subscription(i)))
	}
	groupBytes := encoded(subscription(0)) * members

	// One more member joins: its two records and the group's epochs.
	subs := subscription(members)
	before := walBytes(store)
	late := joinWith("late", subs)
	joinCost := walBytes(store) - before
	if bound := uint64(encoded(subs) + 4096); joinCost > bound {
		t.Errorf("a join wrote %d bytes; its subscription is %d (bound %d), the group's %d", joinCost, encoded(subs), bound, groupBytes)
	}

	// A member holding no partitions heartbeats and moves to the group's epoch: its assignment
	// record only.
	first := ms[members/2]
	epoch := first.epoch
	before = walBytes(store)
	if resp := first.beat(nil); resp.ErrorCode != wire.ErrNone || first.epoch == epoch {
		t.Fatalf("heartbeat: error %d, epoch %d -> %d; want it moved", resp.ErrorCode, epoch, first.epoch)
	}
	beatCost := walBytes(store) - before
	if beatCost > 4096 {
		t.Errorf("a heartbeat moving one member's epoch wrote %d bytes (bound 4096), the group's subscriptions are %d", beatCost, groupBytes)
	}
	// A heartbeat that changes nothing writes nothing.
	before = walBytes(store)
	late.beat(nil)
	late.beat(nil)
	if n := walBytes(store) - before; n != 0 {
		t.Errorf("heartbeats that change nothing wrote %d bytes", n)
	}
	t.Logf("group of %d members, subscriptions %d bytes: a join wrote %d bytes, an epoch-moving heartbeat %d", members+1, groupBytes, joinCost, beatCost)

	// A member leaves: its records go in the change's batch.
	lr := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	lr.Version, lr.Group, lr.MemberID, lr.MemberEpoch = 1, "g", ms[1].id, -1
	if resp := c.ConsumerHeartbeat(lr, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrNone {
		t.Fatalf("leave: %d", resp.ErrorCode)
	}
	want := describe(c, "g")
	c.Close()
	store.Close()

	store = openMetaStore(t, fs)
	stored, err := store.LoadGroups()
	if err != nil {
		t.Fatal(err)
	}
	if sg := stored["g"]; sg == nil || len(sg.ConsumerMembers) != members || sg.ConsumerMembers[ms[1].id] != nil {
		t.Fatalf("stored members: %d, the one that left kept: %v", len(sg.ConsumerMembers), sg.ConsumerMembers[ms[1].id] != nil)
	}
	c = newConsumerCoordinator(t, store, ts, nil)
	if got := describe(c, "g"); !reflect.DeepEqual(got, want) {
		t.Errorf("after a restart the group is\n%+v\nwant\n%+v", got, want)
	}
}

// TestConsumerGroupSingleRecordFormatConverts: a group stored whole in its group record (the
// format of earlier releases) comes back as it was, and its next change stores it in the
// per-member layout, which comes back as it was too.
func TestConsumerGroupSingleRecordFormatConverts(t *testing.T) {
	fs := vfs.NewMem()
	store := openMetaStore(t, fs)
	defer func() { store.Close() }()
	// Written by the previous release's encoder (consumerRecord with members) for a group
	// at epoch 3: A holds partitions 0 and 1 of topic a, B holds 3 and is revoking 2.
	const old = `{"epoch":3,"assign_epoch":3,"assignor":"uniform",` +
		`"topics":[{"name":"a","id":"01000000000000000000000000000000","partitions":4}],` +
		`"members":[` +
		`{"id":"A","client_id":"c","client_host":"/h","rebalance_ms":30000,"subscribed":["a"],"assignor":"uniform","principal":"User:p",` +
		`"epoch":3,"prev_epoch":2,"state":0,"assigned":{"01000000000000000000000000000000":[0,1]},"target":{"01000000000000000000000000000000":[0,1]}},` +
		`{"id":"B","client_id":"c","client_host":"/h","rebalance_ms":30000,"subscribed":["a"],"principal":"User:p",` +
		`"epoch":2,"prev_epoch":1,"state":1,"assigned":{"01000000000000000000000000000000":[3]},"revoking":{"01000000000000000000000000000000":[2]},` +
		`"target":{"01000000000000000000000000000000":[2,3]}}]}`
	if err := store.SaveGroup("g", meta.GroupRecord{ProtocolType: "consumer", Generation: 3, Consumer: json.RawMessage(old)}); err != nil {
		t.Fatal(err)
	}
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, store, ts, nil)
	d := describe(c, "g")
	if d.ErrorCode != 0 || d.Epoch != 3 || d.AssignmentEpoch != 3 || len(d.Members) != 2 || d.State != "Reconciling" {
		t.Fatalf("restored from the single record: error %d, epoch %d/%d, %d members, %s", d.ErrorCode, d.Epoch, d.AssignmentEpoch, len(d.Members), d.State)
	}
	if a := d.Members[0]; a.MemberID != "A" || len(a.Assignment.TopicPartitions) != 1 || !reflect.DeepEqual(a.Assignment.TopicPartitions[0].Partitions, []int32{0, 1}) {
		t.Fatalf("A restored as %+v", a)
	}
	if b := d.Members[1]; b.MemberID != "B" || b.MemberEpoch != 2 || !reflect.DeepEqual(b.Assignment.TopicPartitions[0].Partitions, []int32{2, 3}) {
		t.Fatalf("B restored as %+v (holding 3 and revoking 2)", b)
	}
	// A heartbeat that changes nothing leaves the record as it is.
	a := &cmember{t: t, c: c, id: "A", epoch: 3, owned: assign.Partitions{topicA.ID: {0, 1}}}
	before := walBytes(store)
	if resp := a.beat(nil); resp.ErrorCode != wire.ErrNone {
		t.Fatalf("A's heartbeat: %d", resp.ErrorCode)
	}
	if n := walBytes(store) - before; n != 0 {
		t.Errorf("a heartbeat that changes nothing wrote %d bytes", n)
	}
	// B confirms its revocation: the group's first write converts it.
	b := &cmember{t: t, c: c, id: "B", epoch: 2, owned: assign.Partitions{topicA.ID: {3}}}
	if resp := b.beat(nil); resp.ErrorCode != wire.ErrNone || b.epoch != 3 {
		t.Fatalf("B's heartbeat: error %d, epoch %d", resp.ErrorCode, b.epoch)
	}
	want := describe(c, "g")
	c.Close()
	stored, err := store.LoadGroups()
	if err != nil {
		t.Fatal(err)
	}
	sg := stored["g"]
	var rec consumerRecord
	if err := json.Unmarshal(sg.Record.Consumer, &rec); err != nil || !rec.PerMember || len(rec.Members) != 0 || len(rec.Topics) != 0 {
		t.Fatalf("group record after the change: %s (%v)", sg.Record.Consumer, err)
	}
	if len(sg.ConsumerMembers) != 2 || sg.ConsumerTopics == nil {
		t.Fatalf("after the change: %d member records, topics %q", len(sg.ConsumerMembers), sg.ConsumerTopics)
	}
	for id, m := range sg.ConsumerMembers {
		if m.Subscription == nil || m.Assignment == nil {
			t.Errorf("member %s: subscription %q, assign.Partitions %q", id, m.Subscription, m.Assignment)
		}
	}
	store.Close()
	store = openMetaStore(t, fs)
	c = newConsumerCoordinator(t, store, ts, nil)
	if got := describe(c, "g"); !reflect.DeepEqual(got, want) {
		t.Errorf("after a restart the group is\n%+v\nwant\n%+v", got, want)
	}
}

// TestConsumerGroupTurnedClassicDropsItsRecords: an empty consumer group that a classic member
// joins stores a classic record, and its consumer records (the topics record an empty group
// keeps) go in the same write, so a restart does not find them beside a classic group.
func TestConsumerGroupTurnedClassicDropsItsRecords(t *testing.T) {
	store := openMetaStore(t, vfs.NewMem())
	defer store.Close()
	ts := &topicSet{m: map[string]TopicMeta{"a": topicA}}
	c := newConsumerCoordinator(t, store, ts, nil)
	join(t, c, "A", nil)
	lr := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	lr.Version, lr.Group, lr.MemberID, lr.MemberEpoch = 1, "g", "A", -1
	if resp := c.ConsumerHeartbeat(lr, ConsumerHeartbeat{}); resp.ErrorCode != wire.ErrNone {
		t.Fatalf("leave: %d", resp.ErrorCode)
	}
	load := func() *meta.StoredGroup {
		t.Helper()
		stored, err := store.LoadGroups()
		if err != nil || stored["g"] == nil {
			t.Fatalf("load: %v, %v", stored, err)
		}
		return stored["g"]
	}
	if sg := load(); sg.ConsumerTopics == nil || len(sg.ConsumerMembers) != 0 {
		t.Fatalf("empty consumer group: topics %q, %d member records; want its topics record and none", sg.ConsumerTopics, len(sg.ConsumerMembers))
	}
	done := make(chan struct{})
	defer close(done)
	r := c.Join(joinReq("", nil, 10*time.Second), "c", "/h", done, nil)
	if r.ErrorCode != wire.ErrMemberIDRequired {
		t.Fatalf("classic join: %d, want MEMBER_ID_REQUIRED", r.ErrorCode)
	}
	if r = c.Join(joinReq(r.MemberID, nil, 10*time.Second), "c", "/h", done, nil); r.ErrorCode != wire.ErrNone {
		t.Fatalf("classic join with its id: %d", r.ErrorCode)
	}
	sg := load()
	if sg.Record.Consumer != nil || sg.ConsumerTopics != nil || len(sg.ConsumerMembers) != 0 || len(sg.Record.Members) != 1 {
		t.Errorf("after a classic member joined: consumer %s, topics %q, %d consumer member records, %d classic members",
			sg.Record.Consumer, sg.ConsumerTopics, len(sg.ConsumerMembers), len(sg.Record.Members))
	}
}
