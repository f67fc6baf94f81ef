package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"inlet/diskless"
	"inlet/diskless/follow"
	"inlet/objstore"
	"inlet/tier"
)

// A --standby node follows the writer's diskless commit log while it waits (diskless/follow):
// standBy starts the follower once the bucket is open and stops it as soon as it holds the
// lease; the copy, in followDir of the data directory, is kept by the takeover's emptying of
// the directory (emptyDir), read by Recover (diskless.Config.Cache, given by withDiskless to a
// --standby node only) and removed by it once it has recovered. The follower's lag is scraped
// (inlet_standby_*) from following. Beside it, the records of the tiered objects are read
// ahead (startReadingRecords), for the takeover's restore (tier.RestoreWith).

// followDir is the copy's directory in the data directory.
const followDir = "follow"

// following is the standby's follower while standBy waits, then its last stats.
type following struct {
	p atomic.Pointer[follow.Follower]
}

// Stats is the follower's stats (zero before it starts).
func (f *following) Stats() follow.Stats {
	if fl := f.p.Load(); fl != nil {
		return fl.Stats()
	}
	return follow.Stats{}
}

// startFollowing starts following the commit log on bucket into dataDir's copy, and returns
// what stops it. Without a data directory, or if the copy's directory cannot be made, the
// standby follows nothing (logged) and a takeover reads every object from the bucket.
func startFollowing(logger *slog.Logger, rs *remoteSettings, bucket objstore.Bucket, dataDir string) (stop func()) {
	stopRecords := startReadingRecords(logger, rs, bucket)
	if dataDir == "" {
		return stopRecords
	}
	f, err := follow.Start(follow.Config{Bucket: bucket, Dir: filepath.Join(dataDir, followDir), Logger: logger})
	if err != nil {
		logger.Warn("standby: not following the commit log: a takeover will read it all from the bucket", "err", err)
		return stopRecords
	}
	rs.following.p.Store(f)
	return func() {
		stopRecords()
		f.Stop()
		s := f.Stats()
		logger.Info("standby: stopped following the commit log", "copies", s.Objects, "copied_bytes", s.Bytes, "fetched", s.Fetched, "fetched_bytes", s.FetchedBytes)
	}
}

// recordsEvery is how often a standby reads the records of the tiered objects uploaded since
// its last look: a LIST of the prefix, and two range reads per new object.
const recordsEvery = 2 * time.Second

// startReadingRecords keeps rs.records, the records of the bucket's tiered objects (their
// trailers and footers: tier.RecordCache), up to date every recordsEvery while the node stands
// by, in memory (the standby becomes the writer in this process), so that a takeover's restore
// reads only the objects uploaded since the last look; it returns what stops it.
func startReadingRecords(logger *slog.Logger, rs *remoteSettings, bucket objstore.Bucket) (stop func()) {
	c := rs.records
	if c == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(recordsEvery)
		defer tick.Stop()
		for {
			if _, err := c.Refresh(ctx, bucket); err != nil && ctx.Err() == nil {
				logger.Warn("standby: reading the tiered objects' records ahead", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		s := c.Stats()
		logger.Info("standby: stopped reading the tiered objects' records", "records", s.Records, "read", s.Read)
	}
}

// newRecordCache is a --standby node's records of the tiered objects (nil otherwise): made
// with the settings, before the metrics watch it.
func newRecordCache(standby bool) *tier.RecordCache {
	if !standby {
		return nil
	}
	return tier.NewRecordCache()
}

// followCache is the committer's Config.Cache: the copy of a --standby node (nil otherwise).
func followCache(rs *remoteSettings, dataDir string) diskless.ObjectCache {
	if !rs.standby || dataDir == "" {
		return nil
	}
	return follow.Cache{Dir: filepath.Join(dataDir, followDir)}
}

// watchFollower adds the standby's follower to what is scraped (nothing without a bucket or
// --standby).
func (mo *monitor) watchFollower(rs *remoteSettings) {
	if mo != nil && rs != nil && rs.standby {
		mo.m.WatchFollower(&rs.following)
		mo.m.WatchRecordCache(rs.records)
	}
}
