package e2e

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestClusterAdminCallsWithKadm: the cluster calls admin tools make, which used to drop the
// connection (EOF), answered as a one-node Kafka answers them: DescribeLogDirs (one
// directory, each partition's stored bytes), ElectLeaders (no election needed: the only
// replica leads), ListPartitionReassignments (none) and AlterPartitionReassignments (to the
// current replica: done; to another broker: refused).
func TestClusterAdminCallsWithKadm(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("dirs", 2)
	rc := dialRaw(t, b.addr)
	for range 3 {
		if p := rc.produceOne(9, "dirs", 1, plainBatch(5, 1000, "d").encode()); p.ErrorCode != 0 {
			t.Fatalf("produce: %d", p.ErrorCode)
		}
	}
	ctx := adminCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all[1]
	if len(dirs) != 1 {
		t.Fatalf("%d log dirs, want 1: %v", len(dirs), dirs)
	}
	for _, d := range dirs {
		if d.Err != nil || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("dir %s: err %v, total %d, usable %d", d.Dir, d.Err, d.TotalBytes, d.UsableBytes)
		}
		p0, p1 := d.Topics["dirs"][0], d.Topics["dirs"][1]
		if p0.Size != 0 || p1.Size <= 3*61 {
			t.Errorf("sizes: partition 0 %d bytes (empty), partition 1 %d bytes (three batches)", p0.Size, p1.Size)
		}
	}

	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"dirs": {0: {}, 1: {}}, "nope": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []kadm.ElectLeadersResult{res["dirs"][0], res["dirs"][1]} {
		if !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("elect dirs/%d: %v, want ELECTION_NOT_NEEDED", r.Partition, r.Err)
		}
	}
	if !errors.Is(res["nope"][0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("elect nope/0: %v", res["nope"][0].Err)
	}

	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"dirs": {0: {}}})
	if err != nil || len(listed) != 0 {
		t.Errorf("list reassignments: %v %v, want none", listed, err)
	}
	altered, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"dirs": {0: {1}, 1: {2}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range altered.Sorted() {
		switch a.Partition {
		case 0:
			if a.Err != nil {
				t.Errorf("reassign dirs/0 to its own replica: %v", a.Err)
			}
		case 1:
			if !errors.Is(a.Err, kerr.InvalidReplicaAssignment) {
				t.Errorf("reassign dirs/1 to broker 2: %v, want INVALID_REPLICA_ASSIGNMENT", a.Err)
			}
		}
	}

	// The one versioned feature is group.version (KIP-848), set by configuration; no other is
	// supported, so transaction.version cannot be finalized.
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		if raw := v.Raw(); raw != nil && (len(raw.SupportedFeatures) != 1 || raw.SupportedFeatures[0].Name != "group.version") {
			t.Errorf("ApiVersions features: supported %v, finalized %v", v.Raw().SupportedFeatures, v.Raw().FinalizedFeatures)
		}
	}
	updated, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2})
	if err == nil {
		for _, u := range updated {
			err = u.Err
		}
	}
	if !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Errorf("update transaction.version to 2: %v, want INVALID_UPDATE_VERSION", err)
	}
}

// TestClusterAdminCallsWithSarama is the same through sarama's ClusterAdmin.
func TestClusterAdminCallsWithSarama(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("sdirs", 1)
	if p := dialRaw(t, b.addr).produceOne(9, "sdirs", 0, plainBatch(5, 1000, "d").encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	adm, err := sarama.NewClusterAdmin([]string{b.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	dirs, err := adm.DescribeLogDirs([]int32{1})
	if err != nil || len(dirs[1]) != 1 {
		t.Fatalf("describe log dirs: %v, %v", dirs, err)
	}
	found := false
	for _, tp := range dirs[1][0].Topics {
		if tp.Topic == "sdirs" && len(tp.Partitions) == 1 && tp.Partitions[0].Size > 61 {
			found = true
		}
	}
	if dirs[1][0].ErrorCode != sarama.ErrNoError || !found {
		t.Errorf("describe log dirs: %+v", dirs[1][0])
	}
	res, err := adm.ElectLeaders(sarama.PreferredElection, map[string][]int32{"sdirs": {0}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["sdirs"][0]; r == nil || r.ErrorCode != sarama.ErrElectionNotNeeded {
		t.Errorf("elect sdirs/0: %+v", r)
	}
	if st, err := adm.ListPartitionReassignments("sdirs", []int32{0}); err != nil || len(st) != 0 {
		t.Errorf("list reassignments: %v %v", st, err)
	}
	if err := adm.AlterPartitionReassignments("sdirs", [][]int32{{1}}); err != nil {
		t.Errorf("reassign sdirs/0 to its own replica: %v", err)
	}
}

// TestClusterAdminCallsAreScoped: a principal limited to its topic prefixes sees only its own
// topics in DescribeLogDirs and may not elect leaders or reassign partitions
// (CLUSTER_AUTHORIZATION_FAILED), as Kafka needs cluster permissions for them.
func TestClusterAdminCallsAreScoped(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, nil)
	b.createTopic("alice.mine", 1)
	b.createTopic("bob.theirs", 1)
	ctx := adminCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.srv.ListenerAddr("sasl")), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all[1] {
		if _, ok := d.Topics["bob.theirs"]; ok {
			t.Error("alice sees bob's topic in DescribeLogDirs")
		}
		if _, ok := d.Topics["alice.mine"]; !ok {
			t.Error("alice does not see her own topic in DescribeLogDirs")
		}
	}
	req := kmsg.NewPtrElectLeadersRequest()
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "alice.mine", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 31 {
		t.Errorf("alice elects leaders: %v, error %d; want CLUSTER_AUTHORIZATION_FAILED", err, resp.ErrorCode)
	}
	if _, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"alice.mine": {0: {}}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice lists reassignments: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = "bob.theirs", []int32{0}
	dp.Topics = append(dp.Topics, dpt)
	// kgo shards this request by partition and reports a partition's authorization failure
	// as the request's error.
	if resp, err := dp.RequestWith(ctx, cl); !errors.Is(err, kerr.TopicAuthorizationFailed) && (err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 29) {
		t.Errorf("alice describes producers of bob's topic: %v %+v; want TOPIC_AUTHORIZATION_FAILED", err, resp)
	}
	uf := kmsg.NewPtrUpdateFeaturesRequest()
	uf.Version = 2
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel = "transaction.version", 2
	uf.FeatureUpdates = append(uf.FeatureUpdates, u)
	if resp, err := uf.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 31 {
		t.Errorf("alice updates features: %v, error %d; want CLUSTER_AUTHORIZATION_FAILED", err, resp.ErrorCode)
	}
}

// TestDescribeProducers: the idempotent producers a partition remembers, through kadm and a
// raw request: epoch, last sequence and the last batch's timestamp; no transaction.
func TestDescribeProducers(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("prods", 2)
	rc := dialRaw(t, b.addr)
	pid := rc.initProducerID()
	if p := rc.produceOne(9, "prods", 0, plainBatch(3, 5000, "p").idempotent(pid, 0, 0).encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	if p := rc.produceOne(9, "prods", 0, plainBatch(2, 7000, "p").idempotent(pid, 0, 3).encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	described, err := kadm.NewClient(cl).DescribeProducers(adminCtx(t), kadm.TopicsSet{"prods": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	p0 := described["prods"].Partitions[0]
	if p0.Err != nil || len(p0.ActiveProducers) != 1 {
		t.Fatalf("partition 0: %v, %d producers", p0.Err, len(p0.ActiveProducers))
	}
	for _, ap := range p0.ActiveProducers {
		if ap.ProducerID != pid || ap.ProducerEpoch != 0 || ap.LastSequence != 4 || ap.LastTimestamp < 7000 || ap.CurrentTxnStartOffset != -1 {
			t.Errorf("producer %+v; want id %d, epoch 0, last sequence 4, last timestamp of the second batch", ap, pid)
		}
	}
	if p1 := described["prods"].Partitions[1]; p1.Err != nil || len(p1.ActiveProducers) != 0 {
		t.Errorf("partition 1: %v, %d producers; want none", p1.Err, len(p1.ActiveProducers))
	}
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "nope", []int32{0}
	req.Topics = append(req.Topics, rt)
	if p := rc.roundTrip(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]; p.ErrorCode != 3 {
		t.Errorf("unknown topic: error %d, want UNKNOWN_TOPIC_OR_PARTITION", p.ErrorCode)
	}
}

// TestDescribeClusterEndpointTypes: KIP-919's endpoint types. Brokers (1) are described; a
// broker asked for controllers (2) answers MISMATCHED_ENDPOINT_TYPE, an unknown type
// UNSUPPORTED_ENDPOINT_TYPE.
func TestDescribeClusterEndpointTypes(t *testing.T) {
	b := startBroker(t, nil)
	rc := dialRaw(t, b.addr)
	for _, c := range []struct {
		typ  int8
		want int16
	}{{1, 0}, {2, kerr.MismatchedEndpointType.Code}, {3, kerr.UnsupportedEndpointType.Code}} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType = 1, c.typ
		resp := rc.roundTrip(req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != c.want || (c.want == 0) != (len(resp.Brokers) == 1) {
			t.Errorf("endpoint type %d: error %d, %d brokers; want error %d", c.typ, resp.ErrorCode, len(resp.Brokers), c.want)
		}
	}
}
