// Package read is what a node's consumers read, from both tiers: the answer to a Fetch
// (fetch.go: the batches located, the long poll for MinBytes, reply.go: the reply encoded
// with the batches read into its frame) and ListOffsets' searches by timestamp
// (timestamp.go, maxtimestamp.go). A tiered partition's batches below its local log start come
// from the remote tier (RemoteTier), the rest from the batch log.
//
// Package server decodes the requests, authorizes them and throttles them, and hands a Fetch
// to Reader.Fetch with the request's side of the long poll (Poll); ListOffsets calls the
// searches. Nothing here knows a connection or the API registry.
package read

import (
	"errors"
	"log/slog"

	"inlet/batchlog"
	"inlet/wire"
)

// Reader reads the partitions of one node's batch log and, below a tiered partition's local
// log start, its remote tier. Its fields are set once, before the node serves.
type Reader struct {
	Log    *batchlog.Log
	Remote RemoteTier // nil: no remote tier
	Logger *slog.Logger
	// FetchMaxBytes is fetch.max.bytes: the most record bytes a Fetch is answered with.
	FetchMaxBytes int
	// Node tells a long poll that the node drains: it is answered at once.
	Node Node
	// Woken counts a long poll woken by an advance of a partition it reads (nil: not counted).
	Woken func()
	// LeaderEpoch is every partition's leader epoch, which a Fetch's CurrentLeaderEpoch is
	// checked against (CheckLeaderEpoch); nil: 0.
	LeaderEpoch func() int32
}

// Node is the node's drain, as a long poll sees it (conn.Node).
type Node interface {
	Draining() bool
	// DrainStarted is closed when the drain starts.
	DrainStarted() <-chan struct{}
}

// RemoteTier is the remote tier of topics with remote.storage.enable (package tier's Tier):
// the batches of a partition below its local log start are read from it. nil: no tier, and a
// topic cannot enable remote storage.
type RemoteTier interface {
	// PlanRead plans the batches from offset, below limit, up to maxBytes, as
	// batchlog.Log.PlanRead does, from the remote objects; batchlog.ErrOffsetOutOfRange when
	// none holds offset, tier.ErrRemote when the bucket fails.
	PlanRead(p *batchlog.Partition, offset, limit int64, maxBytes int, includeFirst bool, plan *batchlog.ReadPlan) error
	// FindTimestamp is the first remote batch whose max timestamp is >= target (nil: none).
	FindTimestamp(p *batchlog.Partition, target int64) ([]byte, error)
	// MaxTimestampBatch is the remote data batch with the largest max timestamp (nil: none).
	MaxTimestampBatch(p *batchlog.Partition) ([]byte, error)
}

// ReadCommitted is the IsolationLevel of a read_committed consumer.
const ReadCommitted = 1

// Stable bounds reads: the high watermark for read_uncommitted, the last stable offset (below
// every open transaction) for read_committed.
func Stable(p *batchlog.Partition, isolation int8) int64 {
	if isolation == ReadCommitted {
		return p.LastStableOffset()
	}
	return p.HighWatermark()
}

// planRead plans a fetch of p from offset: from the local log at or past its local log start,
// from the remote tier below it. An offset the local log start passes while it is planned is
// planned again from the remote tier.
func (rd *Reader) planRead(p *batchlog.Partition, offset, limit int64, maxBytes int, includeFirst bool, plan *batchlog.ReadPlan) error {
	if rd.Remote != nil && offset < p.LocalLogStartOffset() {
		return rd.Remote.PlanRead(p, offset, limit, maxBytes, includeFirst, plan)
	}
	err := rd.Log.PlanRead(p, offset, limit, maxBytes, includeFirst, plan)
	if rd.Remote != nil && errors.Is(err, batchlog.ErrOffsetOutOfRange) && offset >= p.LogStartOffset() {
		plan.Release()
		return rd.Remote.PlanRead(p, offset, limit, maxBytes, includeFirst, plan)
	}
	return err
}

// CheckLeaderEpoch is KIP-320's check of the leader epoch a request names for a partition
// (Fetch v9+, ListOffsets v4+, OffsetForLeaderEpoch v2+: CurrentLeaderEpoch) against the
// partition's, epoch (Partition.maybeThrowIfFenced): -1 names none and is served; a lower one
// is FENCED_LEADER_EPOCH (the client's metadata is older than this leader, it refreshes it);
// a higher one UNKNOWN_LEADER_EPOCH (the client saw a newer leader than this one, it
// retries).
func CheckLeaderEpoch(current, epoch int32) int16 {
	switch {
	case current == -1 || current == epoch:
		return 0
	case current < epoch:
		return wire.ErrFencedLeaderEpoch
	default:
		return wire.ErrUnknownLeaderEpoch
	}
}
