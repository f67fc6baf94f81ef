package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"inlet/bytesize"
	"inlet/diskless"
)

// memoryLimit is --memory-limit: the Go heap's soft limit. Without one, Go lets the heap grow
// to twice what was live at the last collection, and a node whose live heap is its pools and
// caches plus the replies of a catch-up (4 consumers, 50 MiB fetches) doubles that in RSS.
// auto is what the node's settings let it hold on purpose (autoMemoryLimit): the in-flight
// budgets (frames read and replies unwritten; the pre-authentication one only with a SASL
// listener), the caches and, with a bucket, the diskless topics' batches waiting for it.
// What lives beside them (staging buffers of groups being built, the connections, Pebble's
// memtables, which are not Go memory) is small while the budget is not full; when the live heap passes the limit the collector runs more often,
// the runtime capping it at half the CPU, and RSS goes past the limit rather than the node
// failing. A GOMEMLIMIT in the environment wins over auto, as the runtime reads it itself.
func memoryLimit(logger *slog.Logger, o *options, remote *remoteSettings, sasl bool) {
	v := *o.memoryLimit
	var limit int64
	switch v {
	case "auto":
		if os.Getenv("GOMEMLIMIT") != "" {
			logger.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
			return
		}
		limit = autoMemoryLimit(o, remote, sasl)
	case "0":
		debug.SetMemoryLimit(math.MaxInt64)
		return
	default:
		n, err := bytesize.Parse(v)
		if err != nil || n <= 0 {
			usage("--memory-limit must be auto, 0 or a size like 1GiB, not %q", v)
		}
		limit = n
	}
	debug.SetMemoryLimit(limit)
	logger.Info("memory limit", "bytes", limit)
}

// autoMemoryLimit is --memory-limit auto: --inflight-budget + --fetch-cache, plus
// --sasl-server-max-inflight-bytes with a SASL listener, plus, with a bucket,
// --remote-read-cache and --diskless-max-pending-bytes (diskless batches in commit objects not
// yet PUT, outside the budget where they are copies: the small batches' chunks, and the batches
// of requests a slow bucket made time out, answered and their frames given back),
// and, unless checkpoints are off, diskless.FoldMemoryBound (the checkpoints' fold).
func autoMemoryLimit(o *options, remote *remoteSettings, sasl bool) int64 {
	limit := mustSize("inflight-budget", *o.budget) + mustSizeOrZero("fetch-cache", *o.fetchCache)
	if sasl {
		limit += mustSize("sasl-server-max-inflight-bytes", *o.saslMaxInflight)
	}
	if remote != nil {
		limit += remote.readCache + remote.diskless.MaxPendingBytes
		if remote.diskless.CheckpointInterval >= 0 { // 0: the default interval; negative: none
			limit += diskless.FoldMemoryBound
		}
	}
	return limit
}
