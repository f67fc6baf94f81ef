package e2e

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"inlet/conn"
	"inlet/diskless"
	"inlet/groups"
	"inlet/meta"
	"inlet/objstore"
	"inlet/server"
)

// withBucketGroups wires the group coordinator's store as cmd/inlet does on a node with the
// diskless commit log: offset changes go to the bucket before they are answered.
func withBucketGroups(cfg *server.Config) {
	c := cfg.Diskless.(*diskless.Committer)
	cfg.GroupStore = func(m *meta.Store) groups.Store { return c.GroupStore(m) }
}

// TestDisklessGroupOffsetsComeBackFromTheBucket: a franz-go consumer group commits on a
// diskless topic; the node is closed and its data directory deleted; a node restored from the
// bucket answers OffsetFetch with the last commits, and the group resumes from them. A commit
// is not answered before its commit object is PUT, and not answered success while the bucket
// is down.
func TestDisklessGroupOffsetsComeBackFromTheBucket(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false, withBucketGroups)
	addr := n.addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tierClient(t, &broker{addr: addr}))
	if r, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, "d"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	pc := tierClient(t, &broker{addr: addr}, kgo.DefaultProduceTopic("d"))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := pc.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(0, 30)

	// The group reads 30 records and commits them.
	consume := func(addr string, want int) map[string]bool {
		cl := tierClient(t, &broker{addr: addr}, kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("d"),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		seen := map[string]bool{}
		for len(seen) < want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", len(seen), want)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
		began := time.Now()
		bucket.SetDelay(150 * time.Millisecond)
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		bucket.SetDelay(0)
		if took := time.Since(began); took < 150*time.Millisecond {
			t.Fatalf("commit answered after %v, before its PUT (150 ms) could land", took)
		}
		return seen
	}
	if got := consume(addr, 30); len(got) != 30 {
		t.Fatalf("%d records", len(got))
	}
	before, err := adm.FetchOffsets(ctx, "cg")
	if err != nil || before.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, before.Error())
	}
	var total int64
	before.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 30 {
		t.Fatalf("committed offsets sum to %d, want 30", total)
	}

	n.stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), addr, true, withBucketGroups)

	after, err := adm.FetchOffsets(ctx, "cg")
	if err != nil || after.Error() != nil {
		t.Fatalf("fetch offsets after the restore: %v %v", err, after.Error())
	}
	before.Each(func(o kadm.OffsetResponse) {
		if a, ok := after.Lookup(o.Topic, o.Partition); !ok || a.At != o.At {
			t.Fatalf("%s %d: committed %d, restored %d (%v)", o.Topic, o.Partition, o.At, a.At, ok)
		}
	})
	// The group resumes where it committed: it reads only what came after.
	produce(30, 36)
	got := consume(r.addr, 6)
	for v := range got {
		if i, _ := strconv.Atoi(v); i < 30 {
			t.Fatalf("the group read record %s again after the restore", v)
		}
	}

	// A commit while the bucket is down is not answered success, and not served.
	bucket.SetDown(errors.New("injected: bucket down"))
	defer bucket.SetDown(nil) // before the node stops (t.Cleanup): its queue lands
	down := kadm.Offsets{}
	down.Add(kadm.Offset{Topic: "d", Partition: 0, At: 1000, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "cg", down)
	if err == nil && resp.Error() == nil {
		t.Fatal("an offset commit with the bucket down was answered success")
	}
	if o, err := adm.FetchOffsets(ctx, "cg"); err != nil || o.Error() != nil {
		t.Fatal(err)
	} else if r, _ := o.Lookup("d", 0); r.At == 1000 {
		t.Fatal("an offset the bucket does not hold is served")
	}
}

// TestDisklessTenantsAndBrokerConfigsComeBackFromTheBucket: ACLs, SCRAM users and dynamic
// broker configs changed through the admin APIs on a node with a bucket; the node is closed
// and its data directory deleted; a node restored from the bucket describes them all. A
// change while the bucket is down is refused.
func TestDisklessTenantsAndBrokerConfigsComeBackFromTheBucket(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	sasl := func(c *server.Config) {
		c.Users = tenantUsers(t)
		c.SuperUsers = []string{"admin"}
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
	}
	admin := func(n *disklessNode) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.srv.ListenerAddr("sasl")),
			kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism()), kgo.RequestRetries(2))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false, sasl)
	adm := admin(n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("orders").Allow("User:bob").Operations(kadm.OpRead))
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-secret"}}); err != nil || altered["carol"].Err != nil {
		t.Fatalf("upsert carol: %v %+v", err, altered)
	}
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("3600000")}}); err != nil || rs[0].Err != nil {
		t.Fatalf("alter broker configs: %v %+v", err, rs)
	}

	n.stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), "127.0.0.1:0", true, sasl)
	adm = admin(r)

	res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().AllowHosts().Deny().DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range res {
		for _, d := range r.Described {
			found = found || d.Principal == "User:bob" && d.Name == "orders" && d.Operation == kadm.OpRead
		}
	}
	if !found {
		t.Fatalf("bob's binding not restored: %+v", res)
	}
	described, err := adm.DescribeUserSCRAMs(ctx, "carol")
	if err != nil || len(described["carol"].CredInfos) != 1 || described["carol"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("carol restored as %+v (%v)", described, err)
	}
	if got := r.blog.BrokerConfigs(meta.BrokerClusterDefault); got["log.retention.ms"] != "3600000" {
		t.Fatalf("cluster default broker configs restored as %v", got)
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok := false
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			ok = ok || c.Key == "log.retention.ms" && c.Value != nil && *c.Value == "3600000"
		}
	}
	if !ok {
		t.Fatalf("DescribeConfigs of the broker after the restore: %+v", rcs)
	}

	// With the bucket down, a change is not answered success, nor made.
	bucket.SetDown(errors.New("injected: bucket down"))
	defer bucket.SetDown(nil) // before the node stops (t.Cleanup): its queue lands
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("5")}}); err == nil && rs[0].Err == nil {
		t.Fatal("a broker config change with the bucket down was answered success")
	}
	if cr, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("more").Allow("User:bob").Operations(kadm.OpRead)); err == nil {
		if len(cr) != 1 || cr[0].Err == nil {
			t.Fatalf("an ACL creation with the bucket down was answered success: %+v", cr)
		}
		if res, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("more").ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().AllowHosts()); err != nil || len(res) == 0 || len(res[0].Described) != 0 {
			t.Fatalf("an ACL created with the bucket down is in force: %+v %v", res, err)
		}
	}
	if got := r.blog.BrokerConfigs(meta.BrokerClusterDefault); got["log.retention.ms"] != "3600000" {
		t.Fatalf("a broker config change the bucket does not hold is in force: %v", got)
	}
}

// TestDisklessProducerIDsNeverHandedOutTwice: an idempotent producer given an id by a node that
// is then lost with its disk, before it wrote anything, must not share that id with a producer
// of the node restored from the bucket (the id is in no batch and no transaction: only the
// block of ids reserved in the bucket says it was handed out). With the bucket down, no id is
// handed out, and the refusal is retriable (COORDINATOR_LOAD_IN_PROGRESS).
func TestDisklessProducerIDsNeverHandedOutTwice(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	initPID := func(n *disklessNode) (int64, int16) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ProducerID, resp.ErrorCode
	}
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false)
	first, code := initPID(n)
	if code != 0 {
		t.Fatalf("InitProducerId: error %d", code)
	}
	n.stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), "127.0.0.1:0", true)
	if again, code := initPID(r); code != 0 || again <= first {
		t.Fatalf("after the restore: producer id %d (error %d); the lost node had handed out %d", again, code, first)
	}
	// Down: the ids left in the block are handed out; past it, nothing until the bucket is back.
	bucket.SetDown(errors.New("injected: bucket down"))
	var code2 int16
	for i := 0; i < 2000 && code2 == 0; i++ {
		_, code2 = initPID(r)
	}
	if code2 != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("InitProducerId past the block with the bucket down: error %d", code2)
	}
	bucket.SetDown(nil)
	if _, code := initPID(r); code != 0 {
		t.Fatalf("InitProducerId with the bucket back: error %d", code)
	}
}

// TestDisklessGroupRecordsComeBackFromTheBucket: a classic group's generation and member, and
// a KIP-848 group's member with its epoch and assignment, as they were answered before the
// loss of the node and its disk, are the restored node's: the classic member's heartbeat in
// its generation is answered, and the consumer member's heartbeat in its epoch keeps its
// assignment (no UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH, no rebalance).
func TestDisklessGroupRecordsComeBackFromTheBucket(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false, withBucketGroups)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tierClient(t, &broker{addr: n.addr}))
	if r, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, "d"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}

	// A classic group of one member, stable in generation 1.
	rc := dialRaw(t, n.addr)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = 5, "classic", 30000, 30000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	jr := rc.roundTrip(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = jr.MemberID
		jr = rc.roundTrip(join).(*kmsg.JoinGroupResponse)
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("join: error %d", jr.ErrorCode)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.Generation, sync.MemberID = 3, "classic", jr.Generation, jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("mine")}}
	if sr := rc.roundTrip(sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("sync: error %d", sr.ErrorCode)
	}
	// A KIP-848 group of one member, which owns both partitions once it acknowledges them.
	cgh := func(rc *rawConn, id string, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = 1, "next", id, epoch, 30000
		r.SubscribedTopicNames, r.Topics = []string{"d"}, owned
		if epoch > 0 {
			r.SubscribedTopicNames, r.RebalanceTimeoutMillis = nil, -1
		}
		return rc.roundTrip(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	hb := cgh(rc, "m-848", 0, []kmsg.ConsumerGroupHeartbeatRequestTopic{})
	if hb.ErrorCode != 0 || hb.Assignment == nil || len(hb.Assignment.Topics) != 1 || len(hb.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("consumer group join: error %d, assignment %+v", hb.ErrorCode, hb.Assignment)
	}
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: hb.Assignment.Topics[0].TopicID, Partitions: hb.Assignment.Topics[0].Partitions}}
	epoch := hb.MemberEpoch
	if hb = cgh(rc, "m-848", epoch, owned); hb.ErrorCode != 0 {
		t.Fatalf("consumer group heartbeat: error %d", hb.ErrorCode)
	}
	epoch = hb.MemberEpoch

	n.stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), "127.0.0.1:0", true, withBucketGroups)
	rc = dialRaw(t, r.addr)
	heartbeat := kmsg.NewPtrHeartbeatRequest()
	heartbeat.Version, heartbeat.Group, heartbeat.Generation, heartbeat.MemberID = 3, "classic", jr.Generation, jr.MemberID
	if hr := rc.roundTrip(heartbeat).(*kmsg.HeartbeatResponse); hr.ErrorCode != 0 {
		t.Fatalf("the classic member's heartbeat in generation %d after the restore: error %d", jr.Generation, hr.ErrorCode)
	}
	hb = cgh(rc, "m-848", epoch, owned)
	if hb.ErrorCode != 0 || hb.MemberEpoch != epoch {
		t.Fatalf("the consumer member's heartbeat in epoch %d after the restore: error %d, epoch %d", epoch, hb.ErrorCode, hb.MemberEpoch)
	}
	dg := kmsg.NewPtrConsumerGroupDescribeRequest()
	dg.Groups = []string{"next"}
	dr := rc.roundTrip(dg).(*kmsg.ConsumerGroupDescribeResponse)
	if len(dr.Groups) != 1 || len(dr.Groups[0].Members) != 1 || dr.Groups[0].Members[0].Assignment.TopicPartitions == nil ||
		len(dr.Groups[0].Members[0].Assignment.TopicPartitions[0].Partitions) != 2 {
		t.Fatalf("the consumer group after the restore: %+v", dr.Groups)
	}
}

// TestDisklessDeleteRecordsComesBackFromTheBucket: a DeleteRecords on a diskless topic is
// answered only once its log start is in the bucket, so a node restored from the bucket alone
// keeps it (there is no checkpoint after it here: the commit log alone carries it); with the
// bucket down it is answered REQUEST_TIMED_OUT and the log start does not move (the node is
// stopped before the bucket is back, so its queued entry never lands: one that lands later may
// move the start at a restore, as a timed-out DeleteRecords may still take effect in Kafka).
func TestDisklessDeleteRecordsComesBackFromTheBucket(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false)
	addr := n.addr
	adm := kadm.NewClient(tierClient(t, &broker{addr: addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, "d"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	cl := tierClient(t, &broker{addr: addr}, kgo.DefaultProduceTopic("d"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{"d": {1: {Topic: "d", Partition: 1, At: 6}}})
	if got, _ := dr.Lookup("d", 1); err != nil || got.Err != nil || got.LowWatermark != 6 {
		t.Fatalf("delete records: %+v %v", got, err)
	}
	bucket.SetDown(errors.New("injected: bucket down"))
	dr, err = adm.DeleteRecords(ctx, kadm.Offsets{"d": {1: {Topic: "d", Partition: 1, At: 8}}})
	if got, _ := dr.Lookup("d", 1); err != nil || !errors.Is(got.Err, kerr.RequestTimedOut) {
		t.Fatalf("delete records with the bucket down: %+v %v", got, err)
	}
	starts, err := adm.ListStartOffsets(ctx, "d")
	if o, _ := starts.Lookup("d", 1); err != nil || o.Offset != 6 {
		t.Fatalf("log start %+v (%v) after a refused DeleteRecords, want 6", o, err)
	}

	n.stop()
	bucket.SetDown(nil)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), addr, true)
	starts, err = adm.ListStartOffsets(ctx, "d")
	if o, _ := starts.Lookup("d", 1); err != nil || o.Offset != 6 {
		t.Fatalf("restored log start %+v (%v), want 6", o, err)
	}
	ends, err := adm.ListEndOffsets(ctx, "d")
	if o, _ := ends.Lookup("d", 1); err != nil || o.Offset != 10 {
		t.Fatalf("restored end %+v (%v), want 10", o, err)
	}
	_ = r
}
