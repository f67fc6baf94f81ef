package diskless

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"inlet/acl"
	"inlet/meta"
	"inlet/objstore"
	"inlet/tenants"
)

func TestGroupOpRoundTrip(t *testing.T) {
	for _, op := range []groupOp{
		{Op: opCommit, Group: "g", Offsets: []groupOffset{{Topic: "a", Partition: 1, Offset: 9, LeaderEpoch: -1, CommitTime: 77, Metadata: "md"}, {Topic: "b"}}},
		{Op: opDeleteOffsets, Group: "grp", Offsets: []groupOffset{{Topic: "a", Partition: 3}}},
		{Op: opDeleteGroup, Group: "x"},
	} {
		b := encodeGroupOp(nil, op)
		got, err := decodeGroupOp(b)
		if err != nil || !bytes.Equal(encodeGroupOp(nil, got), b) || got.Group != op.Group || len(got.Offsets) != len(op.Offsets) {
			t.Fatalf("%+v: %+v %v", op, got, err)
		}
		for i := range len(b) {
			if _, err := decodeGroupOp(b[:i]); err == nil {
				t.Fatalf("%+v cut at %d decoded", op, i)
			}
		}
		if _, err := decodeGroupOp(append(b, 0)); err == nil {
			t.Fatalf("%+v with a byte more decoded", op)
		}
	}
}

// FuzzGroupOp: decodeGroupOp never panics; what it accepts re-encodes to the same bytes.
func FuzzGroupOp(f *testing.F) {
	f.Add(encodeGroupOp(nil, groupOp{Op: opCommit, Group: "g", Offsets: []groupOffset{{Topic: "t", Partition: 2, Offset: 5, Metadata: "m"}}}))
	f.Add(encodeGroupOp(nil, groupOp{Op: opDeleteOffsets, Group: "g", Offsets: []groupOffset{{Topic: "t"}}}))
	f.Add(encodeGroupOp(nil, groupOp{Op: opDeleteGroup, Group: "g"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := decodeGroupOp(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeGroupOp(nil, op), b) {
			t.Fatal("accepted bytes do not re-encode the same")
		}
	})
}

func offsetsOf(t *testing.T, m *meta.Store, group string) map[meta.OffsetKey]meta.CommittedOffset {
	t.Helper()
	gs, err := m.LoadGroups()
	if err != nil {
		t.Fatal(err)
	}
	if g := gs[group]; g != nil {
		return g.Offsets
	}
	return nil
}

// TestGroupCommitWaitsForTheBucket: an offset commit returns only once a commit object holds
// it, in the same window as the batches; with the bucket down it fails and the catalog does
// not take it.
func TestGroupCommitWaitsForTheBucket(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{CommitInterval: 50 * time.Millisecond, RequestTimeout: 300 * time.Millisecond}, false)
	defer n.close()
	d := n.topic("d", true)
	gs := n.c.GroupStore(n.l.Meta())
	k := meta.OffsetKey{Topic: "d", Partition: 1}

	m.SetDelay(80 * time.Millisecond)
	pr := n.send(appendOf(d.Partitions[0], -1, 0, 1, 1))
	began := time.Now()
	if err := gs.CommitOffsets("g", map[meta.OffsetKey]meta.CommittedOffset{k: {Offset: 5, LeaderEpoch: -1, Metadata: "x"}}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 80*time.Millisecond {
		t.Fatalf("commit returned after %v, before its PUT (80 ms) could land", took)
	}
	if pr.wait(t, 5*time.Second).Err != 0 {
		t.Fatal("produce failed")
	}
	m.SetDelay(0)
	objs := objects(t, m)
	var state int
	for _, es := range objs {
		for _, e := range es {
			if e.State != nil {
				state++
			}
		}
	}
	if len(objs) > 2 || state != 1 {
		t.Fatalf("%d objects, %d state entries: want the commit once, beside the produce's batch", len(objs), state)
	}
	if o := offsetsOf(t, n.l.Meta(), "g")[k]; o.Offset != 5 || o.Metadata != "x" {
		t.Fatalf("catalog holds %+v", o)
	}

	m.SetDown(errDown)
	if err := gs.CommitOffsets("g", map[meta.OffsetKey]meta.CommittedOffset{k: {Offset: 9}}); err == nil {
		t.Fatal("a commit with the bucket down returned success")
	}
	if o := offsetsOf(t, n.l.Meta(), "g")[k]; o.Offset != 5 {
		t.Fatalf("the catalog took a commit the bucket does not hold: %+v", o)
	}
	if err := gs.DeleteGroup("g"); err == nil {
		t.Fatal("a group deletion with the bucket down returned success")
	}
	m.SetDown(nil)
}

// TestRestoreBringsBackGroupOffsets: a node on an empty disk restored from the bucket has
// every group's offsets as last committed (deletions included), for topics it has.
func TestRestoreBringsBackGroupOffsets(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{}, false)
	n.topic("d", true)
	n.topic("local", false)
	gs := n.c.GroupStore(n.l.Meta())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	d0, d1, l0 := meta.OffsetKey{Topic: "d"}, meta.OffsetKey{Topic: "d", Partition: 1}, meta.OffsetKey{Topic: "local"}
	must(gs.CommitOffsets("a", map[meta.OffsetKey]meta.CommittedOffset{d0: {Offset: 1}, d1: {Offset: 2}, l0: {Offset: 3}}))
	must(gs.CommitOffsets("a", map[meta.OffsetKey]meta.CommittedOffset{d0: {Offset: 10, LeaderEpoch: 4, CommitTime: 1234, Metadata: "m"}}))
	must(gs.DeleteOffsets("a", []meta.OffsetKey{d1}))
	must(gs.CommitOffsets("gone", map[meta.OffsetKey]meta.CommittedOffset{d0: {Offset: 7}}))
	must(gs.DeleteGroup("gone"))
	must(gs.CommitOffsets("again", map[meta.OffsetKey]meta.CommittedOffset{d0: {Offset: 7}, d1: {Offset: 8}}))
	must(gs.DeleteGroup("again"))
	must(gs.CommitOffsets("again", map[meta.OffsetKey]meta.CommittedOffset{d1: {Offset: 9}}))
	n.close()

	r := openNode(t, t.TempDir(), m, Config{}, true)
	got := offsetsOf(t, r.l.Meta(), "a")
	if len(got) != 1 || got[d0] != (meta.CommittedOffset{Offset: 10, LeaderEpoch: 4, CommitTime: 1234, Metadata: "m"}) {
		t.Fatalf("group a restored as %+v", got)
	}
	if got := offsetsOf(t, r.l.Meta(), "gone"); len(got) != 0 {
		t.Fatalf("a deleted group came back: %+v", got)
	}
	if got := offsetsOf(t, r.l.Meta(), "again"); len(got) != 1 || got[d1].Offset != 9 {
		t.Fatalf("a group deleted and committed again restored as %+v", got)
	}

	// The node's own disk: its catalog missing a change the bucket holds (a commit that
	// landed after its wait gave up) gets it at the next start; the rest stays.
	dir := t.TempDir()
	r.close()
	s := openNode(t, dir, m, Config{}, true)
	gs = s.c.GroupStore(s.l.Meta())
	must(gs.CommitOffsets("a", map[meta.OffsetKey]meta.CommittedOffset{d0: {Offset: 20}}))
	must(s.l.Meta().CommitOffsets("a", map[meta.OffsetKey]meta.CommittedOffset{d0: {Offset: 15}})) // the catalog behind
	s.close()
	s = openNode(t, dir, m, Config{}, false)
	defer s.close()
	if got := offsetsOf(t, s.l.Meta(), "a"); got[d0].Offset != 20 {
		t.Fatalf("restart: %+v", got)
	}
}

// TestRestoreBringsBackTenantsAndBrokerConfigs: the last tenants state and each level's last
// dynamic broker configs in the log come back at a restore; with the bucket down a change
// fails.
func TestRestoreBringsBackTenantsAndBrokerConfigs(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{RequestTimeout: 300 * time.Millisecond, CloseTimeout: 100 * time.Millisecond}, false)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bind := func(principal string) *tenants.State {
		return &tenants.State{ACLs: []acl.Binding{{ResourceType: acl.Topic, Name: "t", Pattern: acl.Literal, Principal: principal, Host: "*",
			Operation: acl.Read, Permission: acl.Allow}}}
	}
	must(n.c.KeepTenants(bind("User:old")))
	must(n.c.KeepTenants(bind("User:new")))
	must(n.c.KeepBrokerConfigs(meta.BrokerNode, map[string]string{"log.retention.ms": "1000"}))
	must(n.c.KeepBrokerConfigs(meta.BrokerNode, map[string]string{"log.retention.ms": "2000"}))
	must(n.c.KeepBrokerConfigs(meta.BrokerClusterDefault, map[string]string{"log.segment.bytes": "1048576"}))
	m.SetDown(errDown)
	if err := n.c.KeepTenants(bind("User:never")); err == nil {
		t.Fatal("a tenants change with the bucket down returned success")
	}
	if err := n.c.KeepBrokerConfigs(meta.BrokerNode, map[string]string{"log.retention.ms": "3"}); err == nil {
		t.Fatal("a broker config change with the bucket down returned success")
	}
	n.c.Close() // before the bucket is back: the failed changes never land
	m.SetDown(nil)
	if err := n.l.Close(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	r := openNode(t, dir, m, Config{}, true)
	defer r.close()
	if got := r.l.BrokerConfigs(meta.BrokerNode); len(got) != 1 || got["log.retention.ms"] != "2000" {
		t.Fatalf("broker configs restored as %v", got)
	}
	if got := r.l.BrokerConfigs(meta.BrokerClusterDefault); got["log.segment.bytes"] != "1048576" {
		t.Fatalf("cluster default configs restored as %v", got)
	}
	ts, err := tenants.Open(filepath.Join(dir, tenants.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if acls := ts.State().ACLs; len(acls) != 1 || acls[0].Principal != "User:new" {
		t.Fatalf("tenants restored as %+v", acls)
	}
}
