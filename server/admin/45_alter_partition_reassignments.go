package admin

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// AlterPartitionReassignments v0-v1 and ListPartitionReassignments v0 (KIP-455). A one-node
// cluster can move no replica anywhere: a reassignment to the replicas a partition already
// has ([this node]) is done at once, as Kafka completes a reassignment whose target is the
// current replica set; a target naming any other broker is INVALID_REPLICA_ASSIGNMENT (no such
// broker is registered); cancelling (null replicas) is NO_REASSIGNMENT_IN_PROGRESS; a
// replication factor other than 1 is INVALID_REPLICATION_FACTOR. Nothing is ever in progress,
// so the list is always empty.
const (
	alterPartitionReassignmentsKey = 45
	listPartitionReassignmentsKey  = 46
)

func init() {
	register(API{Key: alterPartitionReassignmentsKey, Min: 0, Max: 1, Handle: handleAlterPartitionReassignments,
		Authz: before(authorizeAlterPartitionAssignments, onCluster(acl.Alter))})
	register(API{Key: listPartitionReassignmentsKey, Min: 0, Max: 0, Handle: handleListPartitionReassignments,
		Authz: before(authorizeListPartitionReassignments, onCluster(acl.Describe))})
}

func handleAlterPartitionReassignments(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	for _, rt := range req.Topics {
		ot := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		ot.Topic = rt.Topic
		t, ok := s.blog.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			op.Partition = rp.Partition
			fail := func(code int16, msg string) { op.ErrorCode, op.ErrorMessage = code, &msg }
			switch {
			case !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				fail(wire.ErrUnknownTopicOrPartition, "The partition does not exist.")
			case rp.Replicas == nil:
				fail(wire.ErrNoReassignmentInProgress, "No reassignment is in progress for this partition.")
			case len(rp.Replicas) != 1:
				fail(wire.ErrInvalidReplicationFactor, fmt.Sprintf("The target replication factor of %d cannot be reached because only 1 broker is registered.", len(rp.Replicas)))
			case rp.Replicas[0] != s.cfg.NodeID:
				fail(wire.ErrInvalidReplicaAssignment, fmt.Sprintf("Broker %d is not registered; this cluster's only broker is %d.", rp.Replicas[0], s.cfg.NodeID))
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

func handleListPartitionReassignments(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	return req.ResponseKind(), nil
}
