package admin

import (
	"fmt"
	"sync/atomic"

	"inlet/batchlog"
	"inlet/conn"
	"inlet/quota"
	"inlet/wire"
)

// Bounds on the catalog a client can make: the node's partition bound and KIP-599's
// controller mutation quota, shared by CreateTopics, CreatePartitions, DeleteTopics and
// auto-creation (package server's topicFor).
//
// max.partitions bounds the partitions of all topics together (Redpanda bounds them per core,
// topic_partitions_per_shard; Kafka has no bound). A partition costs about 200 bytes of memory
// and 28 bytes of every all-topics Metadata reply, so the default of 50,000 keeps the
// catalog near 10 MiB and that reply near 1.5 MB. A creation past it is refused with
// POLICY_VIOLATION, as Kafka's create.topic.policy refuses a topic: a non-retriable error
// with a message, so a client gives up rather than retrying in a loop. The check and the
// creation run under createMu, which serialises every creation.
//
// controller_mutation_rate (KIP-599) is a client quota (package quota, the eight levels of
// KIP-55) counted in partitions created or deleted. As Kafka's ControllerMutationQuotaManager:
// a request of a version that knows THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+,
// CreatePartitions v3+, DeleteTopics v5+) has each topic refused with it while the client is
// over its quota (strict), the topic that takes it over being accepted; an older version is
// accepted and throttled (permissive). Either way the answer carries the throttle time and the
// connection is muted for it. Auto-creation is strict: Kafka counts it permissively (creates,
// then throttles the Metadata), which a client could outrun by opening more connections.

// DefaultMaxPartitions is max.partitions's default (see above).
const DefaultMaxPartitions = 50000

// Counts of creations refused by the bounds since start, for metrics (Refusals).
var (
	partitionBoundRefusals atomic.Uint64
	mutationQuotaRefusals  atomic.Uint64
)

// Refusals reports the creations refused by max.partitions and the topics refused by
// controller_mutation_rate since start.
func Refusals() (partitionBound, mutationQuota uint64) {
	return partitionBoundRefusals.Load(), mutationQuotaRefusals.Load()
}

// PartitionBounds are max.partitions and max.partitions.per.principal (0: no bound).
type PartitionBounds struct{ Node, PerPrincipal int }

// CheckPartitionBound reports whether n more partitions of topics created by principal fit
// under the bounds b on blog: 0, or POLICY_VIOLATION and its message. A topic's partitions
// count against the principal that created it (batchlog.Topic.Creator, kept in its record),
// whoever adds partitions to it later. The caller holds createMu.
func CheckPartitionBound(blog *batchlog.Log, b PartitionBounds, principal string, n int) (int16, string) {
	if b.Node > 0 {
		if have := blog.PartitionCount(); have+n > b.Node {
			partitionBoundRefusals.Add(1)
			return wire.ErrPolicyViolation, fmt.Sprintf("The node holds %d partitions; %d more would exceed max.partitions (%d).", have, n, b.Node)
		}
	}
	if b.PerPrincipal > 0 && principal != "" {
		if have := blog.PartitionCountOf(principal); have+n > b.PerPrincipal {
			partitionBoundRefusals.Add(1)
			return wire.ErrPolicyViolation, fmt.Sprintf("Principal %s holds %d partitions; %d more would exceed max.partitions.per.principal (%d).", principal, have, n, b.PerPrincipal)
		}
	}
	return 0, ""
}

// principalOf is the user r acts as ("" without a connection: the node's own).
func principalOf(r *Request) string {
	if r == nil || r.Conn == nil {
		return ""
	}
	return r.Conn.User()
}

// partitionBounds are the node's bounds as s's config holds them.
func (s *Server) partitionBounds() PartitionBounds {
	return PartitionBounds{Node: s.cfg.MaxPartitions, PerPrincipal: s.cfg.MaxPartitionsPerPrincipal}
}

// mutationThrottled is whether the client of c with clientID is over its
// controller_mutation_rate now (strict refusal), and the throttle left (ms).
func mutationThrottled(c *conn.Conn, clientID []byte) int32 {
	if c == nil {
		return 0
	}
	return c.Throttled(quota.Mutation, clientID)
}

// MutationRefused is the check of a strict request: THROTTLING_QUOTA_EXCEEDED, its message
// and the throttle (ms) while the client is over its quota, else 0.
func MutationRefused(c *conn.Conn, clientID []byte) (int16, string, int32) {
	if ms := mutationThrottled(c, clientID); ms > 0 {
		mutationQuotaRefusals.Add(1)
		return wire.ErrThrottlingQuotaExceeded, "The throttling quota has been exceeded.", ms
	}
	return 0, "", 0
}

// RecordMutations counts n partitions created or deleted against the client's quota and
// returns the throttle to answer with (ms).
func RecordMutations(c *conn.Conn, clientID []byte, n int) int32 {
	if c == nil || n <= 0 {
		return 0
	}
	return c.Throttle(quota.Mutation, clientID, n)
}

// mutationRefused fails a topic of a strict request (fail sets its code and message) while
// the client is over its controller_mutation_rate, raising *throttle to the throttle left.
func (s *Server) mutationRefused(r *Request, fail func(int16, string), throttle *int32) bool {
	code, msg, ms := MutationRefused(r.Conn, r.ClientID)
	if code == 0 {
		return false
	}
	fail(code, msg)
	*throttle = max(*throttle, ms)
	return true
}
