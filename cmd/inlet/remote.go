package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"inlet/batchlog"
	"inlet/diskless"
	"inlet/groups"
	"inlet/meta"
	"inlet/objstore"
	"inlet/server"
	"inlet/tier"
	"inlet/txn"
)

// remoteSettings are the remote tier's flags (--s3-*, --restore-from-remote, --remote-*);
// nil without --s3-bucket.
type remoteSettings struct {
	s3             objstore.S3Config
	restore        bool
	standby        bool // standby.go
	objectBytes    int64
	readCache      int64
	uploadRate     int64
	uploadInterval time.Duration

	// The diskless topics' commit log on the same bucket (--log-diskless-enable,
	// --diskless-*); committer is made by openNode.
	disklessDefault bool
	diskless        diskless.Config
	committer       *diskless.Committer
	tier            atomic.Pointer[tier.Tier] // once openTier has opened it: the checkpoints' UploadedEnd
	gate            *objstore.PutGate         // the commit PUTs', which the tier's uploads give way to
	following       following                 // a --standby node's follower of the commit log (follow.go)
	records         *tier.RecordCache         // a --standby node's records of the tiered objects, read ahead (follow.go); nil otherwise
	takenAt         time.Time                 // when a --standby node took the prefix (standby.go); zero otherwise

	// The prefix's lease (lease.go): --bucket-lease-ms, this node's name in it, and the
	// lease once openTier has taken it.
	leaseDuration time.Duration
	leaseNode     string
	lease         heldLease
}

func (o *options) remote() *remoteSettings {
	if *o.s3Bucket == "" {
		if *o.restoreFromRemote {
			usage("--restore-from-remote needs --s3-bucket")
		}
		if *o.logDisklessEnable {
			usage("--log-diskless-enable needs --s3-bucket")
		}
		if *o.standby {
			usage("--standby needs --s3-bucket")
		}
		return nil
	}
	if n := *o.disklessMaxPutsInFlight; n < 1 || n > diskless.MaxPutsInFlightLimit {
		usage("--diskless-max-puts-in-flight %d: want 1 to %d", n, diskless.MaxPutsInFlightLimit)
	}
	return &remoteSettings{
		s3: objstore.S3Config{Bucket: *o.s3Bucket, Endpoint: *o.s3Endpoint, Region: *o.s3Region,
			Prefix: *o.s3Prefix, PathStyle: *o.s3PathStyle},
		gate:           &objstore.PutGate{},
		restore:        *o.restoreFromRemote,
		standby:        *o.standby,
		records:        newRecordCache(*o.standby),
		objectBytes:    mustSize("remote-object-bytes", *o.remoteObjectBytes),
		readCache:      mustSize("remote-read-cache", *o.remoteReadCache),
		uploadRate:     mustSizeOrZero("remote-upload-max-bytes-per-sec", *o.remoteUploadRate),
		uploadInterval: msFlag(*o.remoteUploadIntervalMs),
		leaseDuration:  leaseFlag(*o.bucketLeaseMs),
		leaseNode:      leaseNode(*o.nodeID),

		disklessDefault: *o.logDisklessEnable,
		diskless: diskless.Config{CommitInterval: msFlag(*o.disklessCommitIntervalMs), CommitBytes: int(mustSize("diskless-commit-bytes", *o.disklessCommitBytes)),
			MaxPutsInFlight: *o.disklessMaxPutsInFlight,
			MaxPendingBytes: mustSize("diskless-max-pending-bytes", *o.disklessMaxPendingBytes), RequestTimeout: msFlag(*o.disklessRequestTimeoutMs),
			CheckpointInterval: msFlag(*o.disklessCheckpointIntervalMs)},
	}
}

// withDiskless makes the diskless commit log on the bucket (nothing without one) and gives it
// to the server and the log; openTier recovers and starts it.
func withDiskless(logger *slog.Logger, rs *remoteSettings, cfg *server.Config, opts *batchlog.Options) {
	if rs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bucket, err := objstore.OpenS3(ctx, rs.s3)
	if err != nil {
		usage("--s3-bucket: %v", err)
	}
	dc := rs.diskless
	dc.Bucket, dc.NodeID, dc.Logger = bucket, cfg.NodeID, logger
	// The lease is taken by openTier, before Recover writes anything.
	dc.Writable = rs.lease.writable
	dc.Epoch = func() uint64 {
		if l := rs.lease.p.Load(); l != nil {
			return l.Epoch()
		}
		return 0
	}
	// The tier, opened after Recover, covers commit objects: those go into checkpoints.
	dc.UploadedEnd = func(p *batchlog.Partition) int64 {
		if t := rs.tier.Load(); t != nil {
			return t.UploadedEnd(p)
		}
		return 0
	}
	dc.Cache = followCache(rs, opts.Dir) // a standby's copy of the commit log (follow.go)
	// The tier's uploads give way to the commit PUTs while it keeps up (objstore.PutGate).
	dc.Gate = rs.gate
	rs.committer = diskless.New(dc)
	cfg.Diskless, cfg.DisklessDefault, opts.Diskless = rs.committer, rs.disklessDefault, rs.committer
	// Every group's offset changes go to the bucket before they are answered (diskless/state.go).
	cfg.GroupStore = func(m *meta.Store) groups.Store { return rs.committer.GroupStore(m) }
	// And every transactional id's record (diskless/txn_state.go).
	cfg.TxnStore = func(m *meta.Store) txn.Store { return rs.committer.TxnStore(m) }
}

// openTier opens the remote tier on the log (nil, nil without one), after rebuilding the
// tiered topics from the bucket with --restore-from-remote.
func openTier(logger *slog.Logger, blog *batchlog.Log, cat *meta.Store, rs *remoteSettings) (*tier.Tier, error) {
	if rs == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bucket, err := objstore.OpenS3(ctx, rs.s3)
	if err != nil {
		return nil, err
	}
	// Before anything is read to restore or written: the prefix is this node's alone (a
	// --standby node took it before it opened anything).
	writer := rs.lease.p.Load()
	if writer == nil {
		if writer, err = takeLease(ctx, logger, bucket, rs); err != nil {
			return nil, err
		}
	}
	if err := writeWriterEpoch(blog.Dir(), writer.Epoch()); err != nil {
		return nil, fmt.Errorf("recording the lease epoch in the data directory: %w", err)
	}
	if rs.restore && len(blog.Topics()) > 0 {
		// A restart of a node that was restored (the flag left in its unit or config file):
		// its data directory is its own now.
		logger.Info("--restore-from-remote: the data directory holds topics already; nothing restored")
	} else if rs.restore {
		topics, objects, err := tier.RestoreWith(ctx, blog, cat, bucket, rs.records, logger)
		if err != nil {
			return nil, err
		}
		logger.Info("restored from the remote tier", "topics", topics, "objects", objects, "records_read_ahead", rs.records.Stats().Hits)
	}
	// Every start: the diskless topics' batches the local log lacks come from the commit
	// objects (all of them after a restore), and those never PUT go up, before serving.
	st, err := rs.committer.Recover(ctx, blog)
	if err != nil {
		return nil, err
	}
	logger.Info("diskless commit log recovered", "objects", st.Objects, "from_copy", st.Cached, "replayed", st.Replayed, "uploaded", st.Uploaded, "group_offsets", st.Offsets, "took", st.Duration)
	// Each block of producer ids goes to the bucket before an id of it is handed out.
	cat.SetProducerIDReserver(rs.committer.KeepProducerIDs)
	t, err := tier.Open(blog, cat, tier.Config{Bucket: bucket, ObjectBytes: rs.objectBytes, UploadInterval: rs.uploadInterval,
		ReadCacheBytes: rs.readCache, UploadBytesPerSec: rs.uploadRate, Writer: writer, Gate: rs.gate, Logger: logger})
	rs.tier.Store(t)
	return t, err
}

// leaseFlag is --bucket-lease-ms (at least 1 s: a renewal every third of it must fit in a
// round trip to the bucket).
func leaseFlag(ms int) time.Duration {
	if ms < 1000 {
		usage("--bucket-lease-ms must be at least 1000, not %d", ms)
	}
	return time.Duration(ms) * time.Millisecond
}

// remoteTier is t as the server takes it: a nil interface without a tier.
func remoteTier(t *tier.Tier) server.RemoteTier {
	if t == nil {
		return nil
	}
	return t
}
