package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"inlet/lease"
	"inlet/objstore"
	"inlet/segfs"
	"inlet/server/standby"
)

// --standby: a node that stands by beside the writer of its bucket prefix, and takes over when
// the writer stops (SIGTERM: at the standby's next look at the lease, within a second) or dies
// or is cut off (once the writer's lease has gone unrenewed for --bucket-lease-ms). Two nodes
// run with the same flags but their --node-id (and addresses, data directories); whichever
// starts first writes, and a writer that is restarted comes back as the standby.
//
// The path that runs (standBy, before anything is opened): the prefix's lease is taken with
// lease.Config.Wait, which waits for as long as a live writer renews it; meanwhile, with
// --cluster-nodes, the node answers Kafka on its listeners and sends clients to the writer
// (front.go; without it the node listens on nothing), /readyz answers 503 naming the writer,
// and SIGTERM or SIGINT end the wait and the process. Once it holds the prefix the node
// starts as any node with a bucket does (openTier uses the lease taken here). If another
// writer held the prefix since this data directory last did (each writer keeps its epoch in
// writerEpochFile), the directory may hold batches that writer has since given other offsets
// (diskless.ErrDiverged): it is emptied (but for the copy of the commit log the standby kept
// while it waited, which the restore reads: follow.go), and the node restores from the
// bucket, as with --restore-from-remote.
//
// What a standby does not do: serve reads (docs/standby.md says why).

// writerEpochFile, in the data directory, holds the lease epoch this directory was last
// written under (8 bytes, big-endian), synced with its directory.
const writerEpochFile = "writer.epoch"

// standBy takes the prefix's lease for a --standby node, waiting for it; false when a signal
// ended the wait.
func standBy(logger *slog.Logger, rs *remoteSettings, dataDir string, fc *standby.Config, mon *monitor) bool {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	bucket, err := objstore.OpenS3(ctx, rs.s3)
	if err != nil {
		logger.Error("open bucket", "err", err)
		os.Exit(1)
	}
	logger.Info("standby: waiting for the bucket prefix", "prefix", rs.s3.Prefix)
	stopFront := startFront(logger, fc, mon)                     // front.go
	stopFollowing := startFollowing(logger, rs, bucket, dataDir) // follow.go
	l, err := lease.Take(ctx, lease.Config{Bucket: bucket, Node: rs.leaseNode, Duration: rs.leaseDuration, Logger: logger, Wait: true})
	stopFront() // before the server binds the same addresses
	stopFollowing()
	if ctx.Err() != nil {
		if l != nil {
			_ = l.Close(context.Background())
		}
		logger.Info("standby: stopped while standing by")
		return false
	}
	if err != nil {
		logger.Error("standby: taking the bucket prefix's lease", "err", err)
		os.Exit(1)
	}
	rs.lease.p.Store(l)
	rs.takenAt = time.Now()
	last, err := readWriterEpoch(dataDir)
	if err != nil {
		logger.Error("standby", "err", err)
		os.Exit(1)
	}
	if l.Epoch() > 1 && last != l.Epoch()-1 {
		// Another writer had the prefix after this directory's last write (or the directory
		// never wrote it): what it holds is not to be trusted over the bucket.
		if err := emptyDir(dataDir); err != nil {
			logger.Error("standby: emptying the data directory", "err", err)
			os.Exit(1)
		}
		rs.restore = true
		logger.Info("standby: took the bucket prefix from another writer; restoring from the bucket", "epoch", l.Epoch(), "directory_epoch", last)
	}
	return true
}

// readWriterEpoch is the epoch in dir's writerEpochFile; 0 without one.
func readWriterEpoch(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, writerEpochFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%s: %d bytes, want 8", filepath.Join(dir, writerEpochFile), len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// writeWriterEpoch records that dir is written under epoch: the file through a synced
// temporary file, renamed, and the directory made and synced as every directory Inlet writes
// into (segfs); nothing without a directory (a log that stores nothing).
func writeWriterEpoch(dir string, epoch uint64) error {
	if dir == "" {
		return nil
	}
	if err := segfs.MkdirAllSynced(segfs.OS, dir); err != nil {
		return err
	}
	tmp := filepath.Join(dir, writerEpochFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(binary.BigEndian.AppendUint64(nil, epoch))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, writerEpochFile))
	}
	if err != nil {
		return err
	}
	return segfs.OS.SyncDir(dir)
}

// emptyDir removes everything in dir but the standby's copy of the commit log (not dir itself,
// which may be a mount point), and syncs it.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == followDir {
			continue // the standby's copy of the commit log, which Recover reads (follow.go)
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return segfs.OS.SyncDir(dir)
}
