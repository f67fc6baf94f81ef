package server

import "inlet/batchlog"

// RemoteTier is the remote tier of topics with remote.storage.enable (package tier's Tier),
// handed to Start: the batches of a partition below its local log start are read from it.
// nil: no tier, and a topic cannot enable remote storage.
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
