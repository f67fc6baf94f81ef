package main

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// Descriptors. Every client connection takes one descriptor, and so does much of what the
// node keeps open itself; a process out of descriptors cannot accept (the listener goes on:
// transport/accept.go), nor open a segment, a Pebble table or a connection to the bucket. So
// max.connections defaults to what the limit holds beside the node's own, and the soft limit
// is raised to the hard one at start. (Go's runtime raises it too, since Go 1.19, in package
// syscall's init; doing it here again states it and logs the result.)
//
// What the node keeps open beside its clients (reservedDescriptors):
//
//	pebbleTableCache  1000  Pebble's table cache: MaxOpenFiles, 1,000 by default (meta/pebble.go
//	                        keeps it), sstables and blob files held open
//	segments          2 × (segment files found at start + 64)  a segment file is open for reads
//	                        and, on the O_DIRECT path, once more for direct reads or its writer;
//	                        room for 64 more (16 GiB at the default --segment-bytes 256MiB)
//	metrics           257   the metrics listener and its 256 connections (httplimit.MaxConns)
//	bucket            128   the remote tier's connections: 64 kept idle per host, as many in flight
//	base              64 + 2 × event loops  standard streams, the log file, Go's poller, each
//	                        gnet loop's epoll and eventfd, the listeners and their reserved
//	                        descriptors, Pebble's WAL, MANIFEST, LOCK and directory, the schema
//	                        registry's listener (a node measured idle holds 24)
//
// max.connections = hard limit − reserved, but at least half the limit, so that a node
// started with a small limit (1,024) still takes connections: its acceptor closes at once the
// connection that finds no descriptor. With the usual hard limit of 1,048,576 (systemd,
// Docker) that is over a million connections; with 20,000 and an empty data directory on 2
// CPUs, 20,000 − (1,000 + 128 + 257 + 128 + 68) = 18,419.
const (
	pebbleTableCache   = 1000
	segmentHeadroom    = 64
	metricsDescriptors = 257
	bucketDescriptors  = 128
	baseDescriptors    = 64
)

// raiseFileLimit raises RLIMIT_NOFILE's soft limit to the hard limit and returns the limit
// in force.
func raiseFileLimit(logger *slog.Logger) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		logger.Warn("descriptor limit unknown", "err", err)
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			logger.Warn("could not raise the descriptor limit to the hard limit", "soft", lim.Cur, "hard", lim.Max, "err", err)
			return lim.Cur
		}
		lim = raised
	}
	return lim.Cur
}

// reservedDescriptors is what the node keeps open beside its clients (see above).
func reservedDescriptors(dataDir string, workers int) int {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	segs := 0
	if es, err := os.ReadDir(filepath.Join(dataDir, "segments")); err == nil {
		segs = len(es)
	}
	return pebbleTableCache + 2*(segs+segmentHeadroom) + metricsDescriptors + bucketDescriptors + baseDescriptors + 2*workers
}

// maxConnections is --max-connections, or with 0 its default: the descriptor limit less
// reservedDescriptors, at least half the limit.
func maxConnections(logger *slog.Logger, flag int, dataDir string, workers int) int {
	limit := raiseFileLimit(logger)
	if flag > 0 {
		if limit > 0 && uint64(flag) > limit {
			logger.Warn("--max-connections is over the descriptor limit: a connection that finds no descriptor is closed as it is accepted", "max-connections", flag, "limit", limit)
		}
		return flag
	}
	if limit == 0 || limit > math.MaxInt32 {
		return math.MaxInt32 // unknown or unlimited: Kafka's default
	}
	reserved := reservedDescriptors(dataDir, workers)
	n := max(int(limit)-reserved, int(limit)/2)
	logger.Info("max.connections from the descriptor limit", "max-connections", n, "limit", limit, "reserved", reserved)
	return n
}

// connectionRate is --max-connection-creation-rate as the transport takes it: Kafka's
// default, Int.MaxValue, is no limit (0).
func connectionRate(flag int) float64 {
	if flag <= 0 || flag >= math.MaxInt32 {
		return 0
	}
	return float64(flag)
}
