package main

import (
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"inlet/diskless"
	"inlet/diskless/follow"
	"inlet/objstore"
)

// A --standby node follows the writer's diskless commit log while it waits (diskless/follow):
// standBy starts the follower once the bucket is open and stops it as soon as it holds the
// lease; the copy, in followDir of the data directory, is kept by the takeover's emptying of
// the directory (emptyDir), read by Recover (diskless.Config.Cache, given by withDiskless to a
// --standby node only) and removed by it once it has recovered. The follower's lag is scraped
// (inlet_standby_*) from following.

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
	if dataDir == "" {
		return func() {}
	}
	f, err := follow.Start(follow.Config{Bucket: bucket, Dir: filepath.Join(dataDir, followDir), Logger: logger})
	if err != nil {
		logger.Warn("standby: not following the commit log: a takeover will read it all from the bucket", "err", err)
		return func() {}
	}
	rs.following.p.Store(f)
	return func() {
		f.Stop()
		s := f.Stats()
		logger.Info("standby: stopped following the commit log", "copies", s.Objects, "copied_bytes", s.Bytes, "fetched", s.Fetched, "fetched_bytes", s.FetchedBytes)
	}
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
	}
}
