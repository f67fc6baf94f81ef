package e2e

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

// TestCreateTopicsAssignmentInAnyOrder: a manual replica assignment may list its partitions
// in any order, as Kafka checks only that they are the set 0..n-1 (sarama sends its
// assignment from a map); a gap or a repeat is INVALID_REPLICA_ASSIGNMENT.
func TestCreateTopicsAssignmentInAnyOrder(t *testing.T) {
	b := startBroker(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	create := func(name string, partitions ...int32) int16 {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		for _, p := range partitions {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = p, []int32{max(b.cfg.NodeID, 1)} // 0: the default, node 1
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	if code := create("shuffled", 2, 0, 1); code != wire.ErrNone {
		t.Fatalf("assignment listed 2, 0, 1: code %d, want none", code)
	}
	if tp, ok := b.blog.Topic("shuffled"); !ok || len(tp.Partitions) != 3 {
		t.Fatalf("topic shuffled: %v", tp)
	}
	for name, ps := range map[string][]int32{"gap": {0, 2}, "repeat": {1, 0, 1}, "negative": {-1, 0}} {
		if code := create(name, ps...); code != wire.ErrInvalidReplicaAssignment {
			t.Errorf("assignment %v: code %d, want INVALID_REPLICA_ASSIGNMENT", ps, code)
		}
	}
}
