package groups

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/meta"
	"inlet/wire"
)

// clock is an injected time for commit times, state times and expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// node is a coordinator over a real catalog in dir, reopened by restart.
type node struct {
	t    *testing.T
	dir  string
	clk  *clock
	cfg  Config
	blog *meta.Store
	c    *Coordinator
}

func newNode(t *testing.T, cfg Config) *node {
	n := &node{t: t, dir: t.TempDir(), clk: &clock{now: time.UnixMilli(1_700_000_000_000)}, cfg: cfg}
	n.open()
	t.Cleanup(n.close)
	return n
}

func (n *node) open() {
	blog, err := meta.Open(meta.Options{Dir: n.dir, MemTableSize: 8 << 20})
	if err != nil {
		n.t.Fatal(err)
	}
	cfg := n.cfg
	cfg.Now = n.clk.Now
	cfg.OffsetsRetentionCheckInterval = -1 // the test calls ExpireOffsets
	c, err := New(blog, cfg)
	if err != nil {
		blog.Close()
		n.t.Fatal(err)
	}
	n.blog, n.c = blog, c
}

func (n *node) close() {
	if n.c != nil {
		n.c.Close()
		n.blog.Close()
		n.c, n.blog = nil, nil
	}
}

func (n *node) restart() { n.close(); n.open() }

func (n *node) expire() (int, int) { return n.c.ExpireOffsets(n.clk.Now()) }

func commitReq(group string, gen int32, member string, topic string, partitions ...int32) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.Generation, r.MemberID = group, gen, member
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 100+int64(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

func commitCode(t *testing.T, c *Coordinator, r *kmsg.OffsetCommitRequest) int16 {
	t.Helper()
	resp := c.Commit(r)
	code := resp.Topics[0].Partitions[0].ErrorCode
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != code {
				t.Fatalf("mixed codes in one commit: %+v", resp)
			}
		}
	}
	return code
}

// committed returns the group's committed offset of topic/partition, -1 for none.
func committed(c *Coordinator, group, topic string, partition int32) int64 {
	ts := c.FetchOffsets(group, map[string][]int32{topic: {partition}}, false)
	return ts[0].Partitions[0].Offset
}

func listed(c *Coordinator, group string) bool {
	for _, g := range c.List() {
		if g.Name == group {
			return true
		}
	}
	return false
}

// joinStable makes member the only member of a Stable consumer group subscribed to topics.
func joinStable(t *testing.T, c *Coordinator, group string, topics ...string) (string, int32) {
	t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 3
	r.Group = group
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 30000, 30000
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	r.Protocols = append(r.Protocols, p)
	done := make(chan struct{})
	defer close(done)
	jr := c.Join(r, "client", "/127.0.0.1", done, nil)
	if jr.ErrorCode != 0 {
		t.Fatalf("join %s: %d", group, jr.ErrorCode)
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version = 3
	s.Group, s.MemberID, s.Generation = group, jr.MemberID, jr.Generation
	if sr := c.Sync(s, done, nil); sr.ErrorCode != 0 {
		t.Fatalf("sync %s: %d", group, sr.ErrorCode)
	}
	return jr.MemberID, jr.Generation
}

func leave(t *testing.T, c *Coordinator, group, member string) {
	t.Helper()
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Group, r.MemberID = group, member
	if code := c.Leave(r).ErrorCode; code != 0 {
		t.Fatalf("leave: %d", code)
	}
}

const week = DefaultOffsetsRetention

// TestSimpleCommitsExpireFromTheirCommit: a group made by OffsetCommit with generation -1 has no
// protocol type, so each offset expires offsets.retention.minutes (7 days) after its own commit;
// once none is left the group is gone. The commit times are stored: a restart changes nothing.
func TestSimpleCommitsExpireFromTheirCommit(t *testing.T) {
	n := newNode(t, Config{})
	if code := commitCode(t, n.c, commitReq("simple", -1, "", "t", 0)); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	n.clk.advance(3 * 24 * time.Hour)
	commitCode(t, n.c, commitReq("simple", -1, "", "t", 1))
	n.restart()
	n.clk.advance(4*24*time.Hour - time.Millisecond)
	if o, g := n.expire(); o != 0 || g != 0 {
		t.Fatalf("before 7 days: %d offsets and %d groups expired", o, g)
	}
	n.clk.advance(time.Millisecond)
	if o, g := n.expire(); o != 1 || g != 0 {
		t.Fatalf("7 days after the first commit: %d offsets, %d groups expired, want 1, 0", o, g)
	}
	if committed(n.c, "simple", "t", 0) != -1 || committed(n.c, "simple", "t", 1) != 101 {
		t.Fatal("the wrong offset expired")
	}
	n.restart()
	if committed(n.c, "simple", "t", 0) != -1 {
		t.Fatal("an expired offset came back after a restart")
	}
	n.clk.advance(3 * 24 * time.Hour)
	if o, g := n.expire(); o != 1 || g != 1 {
		t.Fatalf("7 days after the second commit: %d offsets, %d groups, want 1, 1", o, g)
	}
	if listed(n.c, "simple") {
		t.Fatal("a group with no offsets left is still listed")
	}
	n.restart()
	if listed(n.c, "simple") || committed(n.c, "simple", "t", 1) != -1 {
		t.Fatal("the expired group came back after a restart")
	}
}

// TestEmptyGroupOffsetsExpireAfterItEmptied: a consumer group's offsets stay while it has
// members, and expire offsets.retention.minutes after the group became Empty (KIP-211), across a
// restart (the state time is in the group's record). A configured retention applies.
func TestEmptyGroupOffsetsExpireAfterItEmptied(t *testing.T) {
	for _, retention := range []time.Duration{0, time.Hour} {
		want := retention
		if want == 0 {
			want = week
		}
		n := newNode(t, Config{OffsetsRetention: retention})
		member, gen := joinStable(t, n.c, "cg", "t")
		if code := commitCode(t, n.c, commitReq("cg", gen, member, "t", 0, 1)); code != 0 {
			t.Fatalf("commit: %d", code)
		}
		n.clk.advance(2 * want) // members keep the offsets of topics they subscribe to
		if o, g := n.expire(); o != 0 || g != 0 {
			t.Fatalf("stable group: %d offsets, %d groups expired", o, g)
		}
		leave(t, n.c, "cg", member)
		n.restart()
		n.clk.advance(want - time.Millisecond)
		if o, g := n.expire(); o != 0 || g != 0 {
			t.Fatalf("retention %v: expired %d offsets, %d groups before it passed since the group emptied", want, o, g)
		}
		n.clk.advance(time.Millisecond)
		if o, g := n.expire(); o != 2 || g != 1 {
			t.Fatalf("retention %v: %d offsets, %d groups expired, want 2, 1", want, o, g)
		}
		if listed(n.c, "cg") || committed(n.c, "cg", "t", 0) != -1 {
			t.Fatal("the expired group is still there")
		}
	}
}

// TestStableGroupExpiresOffsetsOfTopicsNoLongerSubscribed: a Stable consumer group's offsets
// of a topic no member subscribes to expire from their commit; the subscribed topic's stay.
func TestStableGroupExpiresOffsetsOfTopicsNoLongerSubscribed(t *testing.T) {
	n := newNode(t, Config{})
	commitCode(t, n.c, commitReq("cg", -1, "", "old", 0))
	member, gen := joinStable(t, n.c, "cg", "new")
	commitCode(t, n.c, commitReq("cg", gen, member, "new", 0))
	n.clk.advance(week)
	if o, g := n.expire(); o != 1 || g != 0 {
		t.Fatalf("%d offsets, %d groups expired, want 1, 0", o, g)
	}
	if committed(n.c, "cg", "old", 0) != -1 || committed(n.c, "cg", "new", 0) != 100 {
		t.Fatal("the wrong offsets expired")
	}
}

// TestPendingTransactionalOffsetDoesNotExpire: an offset an open transaction is about to
// commit stays, and so does its group.
func TestPendingTransactionalOffsetDoesNotExpire(t *testing.T) {
	n := newNode(t, Config{
		PendingTxnOffset: func(g, topic string, p int32) bool { return g == "tg" && topic == "t" && p == 0 },
		PendingTxnGroup:  func(g string) bool { return g == "tg" },
	})
	commitCode(t, n.c, commitReq("tg", -1, "", "t", 0, 1))
	n.clk.advance(week)
	if o, g := n.expire(); o != 1 || g != 0 {
		t.Fatalf("%d offsets, %d groups expired, want 1, 0", o, g)
	}
	if committed(n.c, "tg", "t", 0) != 100 {
		t.Fatal("the pending offset expired")
	}
}

// TestGroupIDLimit: a group id longer than Kafka's string limit (32767 bytes) or not UTF-8 is
// INVALID_GROUP_ID for OffsetCommit, JoinGroup and TxnOffsetCommit and nothing is stored; one
// at the limit is committed and read back after a restart.
func TestGroupIDLimit(t *testing.T) {
	n := newNode(t, Config{})
	max := strings.Repeat("g", wire.MaxStringLength)
	for _, bad := range []string{max + "x", strings.Repeat("g", 70000), "g\xff"} {
		if code := commitCode(t, n.c, commitReq(bad, -1, "", "t", 0)); code != wire.ErrInvalidGroupID {
			t.Errorf("commit to a %d-byte group id: %d, want INVALID_GROUP_ID", len(bad), code)
		}
		jr := joinReq("", nil, time.Second)
		jr.Group = bad
		if code := n.c.Join(jr, "c", "/h", nil, nil).ErrorCode; code != wire.ErrInvalidGroupID {
			t.Errorf("join a %d-byte group id: %d", len(bad), code)
		}
		if code := n.c.CheckTxnCommit(bad, "", nil, -1); code != wire.ErrInvalidGroupID {
			t.Errorf("txn commit to a %d-byte group id: %d", len(bad), code)
		}
	}
	jr := joinReq("", nil, time.Second)
	jr.InstanceID = new(string)
	*jr.InstanceID = strings.Repeat("i", wire.MaxStringLength+1)
	if code := n.c.Join(jr, "c", "/h", nil, nil).ErrorCode; code != wire.ErrInvalidRequest {
		t.Errorf("join with an over-long instance id: %d", code)
	}
	if len(n.c.List()) != 0 {
		t.Fatalf("refused groups were made: %v", n.c.List())
	}
	if code := commitCode(t, n.c, commitReq(max, -1, "", "t", 0)); code != 0 {
		t.Fatalf("commit at the limit: %d", code)
	}
	n.restart()
	if committed(n.c, max, "t", 0) != 100 {
		t.Fatal("the offset of a group id at the limit did not survive a restart")
	}
}

// TestMemberIDFromLongClientIDFitsTheProtocol: a member id is the client id, a dash and a
// UUID; a client id at the header's limit is cut so the member id is still a string the
// protocol carries, and a client id that is not UTF-8 is cleaned.
func TestMemberIDFromLongClientIDFitsTheProtocol(t *testing.T) {
	for _, cid := range []string{strings.Repeat("c", wire.MaxStringLength), "c\xff\xfe" + strings.Repeat("é", 20000)} {
		if id := newMemberID(wire.CleanString(cid, wire.MaxStringLength)); !wire.ValidName(id) {
			t.Errorf("member id of %d bytes from a %d-byte client id", len(id), len(cid))
		}
	}
}

// TestGroupRestartedMidRebalanceCountsFromItsEmptying: a group saved mid-rebalance comes back
// with its members, to rejoin; one that no member rejoins empties when its rebalance times
// out, and its offsets expire offsets.retention.minutes after that, not after an older commit.
func TestGroupRestartedMidRebalanceCountsFromItsEmptying(t *testing.T) {
	n := newNode(t, Config{})
	commitCode(t, n.c, commitReq("cg", -1, "", "t", 0))
	r := joinReq("", nil, 30*time.Second)
	r.Version, r.Group, r.RebalanceTimeoutMillis = 3, "cg", 50
	if jr := n.c.Join(r, "c", "/h", nil, nil); jr.ErrorCode != 0 {
		t.Fatalf("join: %d", jr.ErrorCode) // CompletingRebalance: saved with its member, no assignment
	}
	n.clk.advance(6 * 24 * time.Hour)
	n.restart()
	if d := n.c.Describe("cg"); d.State != "PreparingRebalance" || len(d.Members) != 1 {
		t.Fatalf("restarted mid-rebalance: %+v", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n.c.Describe("cg").State != "Empty" {
		if time.Now().After(deadline) {
			t.Fatal("the member that never rejoined was never removed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	n.clk.advance(week - time.Millisecond)
	if o, g := n.expire(); o != 0 || g != 0 {
		t.Fatalf("%d offsets, %d groups expired less than a week after the group emptied", o, g)
	}
	n.clk.advance(time.Millisecond)
	if o, g := n.expire(); o != 1 || g != 1 {
		t.Fatalf("a week after the group emptied: %d offsets, %d groups, want 1, 1", o, g)
	}
}
