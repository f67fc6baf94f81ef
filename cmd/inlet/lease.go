package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"inlet/lease"
	"inlet/objstore"
)

// The bucket prefix's lease (package lease): a node with a bucket takes it before it restores
// anything or serves, and holds it until it stops. The rule a starting node follows:
//   - no lease, or one released by a node that stopped gracefully: it takes the prefix at once;
//   - a lease some other run holds: it waits one lease duration (--bucket-lease-ms) for it to
//     run out, logging why, so that a restart after a crash (SIGKILL, a lost machine) goes on
//     unattended; if the holder renews it meanwhile, that holder is alive, and the node exits
//     with an error naming it: of two nodes started on one prefix, one refuses.
// While the lease is not held (a bucket outage past its renewals, a paused process), produce
// to topics kept in the bucket (tiered, diskless) is answered NOT_LEADER_OR_FOLLOWER and
// local topics go on. Once another node has taken the prefix, this one is fenced for good:
// every produce is answered NOT_LEADER_OR_FOLLOWER, /readyz says who took it, and the node
// must be restarted.

// heldLease is the lease taken by openTier, read by the server's produce gate.
type heldLease struct{ p atomic.Pointer[lease.Lease] }

// writable is the server's Config.Writable and the diskless committer's gate: false until
// the lease is taken and whenever this node is not the writer (its last renewal too old, or
// fenced).
func (h *heldLease) writable() bool {
	l := h.p.Load()
	return l != nil && l.Writable()
}

// fenced is the server's Config.Fenced: another node has taken the prefix, for good.
func (h *heldLease) fenced() bool {
	l := h.p.Load()
	if l == nil {
		return false
	}
	select {
	case <-l.Fenced():
		return true
	default:
		return false
	}
}

// writableGate and fencedGate are the server's Config.Writable and Config.Fenced (nil
// without a bucket: always the writer, never fenced).
func writableGate(rs *remoteSettings) func() bool {
	if rs == nil {
		return nil
	}
	return rs.lease.writable
}

func fencedGate(rs *remoteSettings) func() bool {
	if rs == nil {
		return nil
	}
	return rs.lease.fenced
}

// leaderEpochGate is the server's Config.LeaderEpoch: the held lease's epoch, which rises at
// every takeover of the prefix (nil without a bucket: 0). An epoch past int32 would take two
// billion takeovers.
func leaderEpochGate(rs *remoteSettings) func() int32 {
	if rs == nil {
		return nil
	}
	return func() int32 {
		if l := rs.lease.p.Load(); l != nil {
			return int32(l.Epoch())
		}
		return 0
	}
}

// leaseNode names this node in the lease, for another node's log and /readyz.
func leaseNode(nodeID int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("node %d (%s, pid %d)", nodeID, host, os.Getpid())
}

// takeLease takes the prefix's lease on bucket (see above), before anything is written there.
func takeLease(ctx context.Context, logger *slog.Logger, bucket objstore.Bucket, rs *remoteSettings) (*lease.Lease, error) {
	l, err := lease.Take(ctx, lease.Config{Bucket: bucket, Node: rs.leaseNode, Duration: rs.leaseDuration, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("taking the bucket prefix's lease: %w", err)
	}
	rs.lease.p.Store(l)
	return l, nil
}

// releaseLease stops renewing and marks the lease released, so that the next node takes the
// prefix at once; after every writer of the bucket has stopped.
func releaseLease(ctx context.Context, logger *slog.Logger, rs *remoteSettings) {
	if rs == nil {
		return
	}
	l := rs.lease.p.Load()
	if l == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.Close(cctx); err != nil {
		logger.Warn("bucket lease", "err", err)
	}
}

// watchLease adds the lease to the metrics and /readyz.
func (mo *monitor) watchLease(rs *remoteSettings) {
	if mo == nil || rs == nil {
		return
	}
	if l := rs.lease.p.Load(); l != nil {
		mo.m.WatchLease(l)
	}
}
