package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"inlet/bytesize"
)

// memoryLimit is --memory-limit: the Go heap's soft limit. Without one, Go lets the heap grow
// to twice what was live at the last collection, and a node whose live heap is its pools and
// caches plus the replies of a catch-up (4 consumers, 50 MiB fetches) doubles that in RSS.
// auto sizes it from what the node's settings let it hold (budgets, caches, the group
// commits' staging buffers) plus 192 MiB for Pebble's memtables and the rest; a GOMEMLIMIT in
// the environment wins over auto, as the runtime reads it itself.
func memoryLimit(logger *slog.Logger, o *options, remote *remoteSettings) {
	v := *o.memoryLimit
	var limit int64
	switch v {
	case "auto":
		if os.Getenv("GOMEMLIMIT") != "" {
			logger.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
			return
		}
		limit = mustSize("inflight-budget", *o.budget) + mustSize("sasl-server-max-inflight-bytes", *o.saslMaxInflight) +
			mustSizeOrZero("fetch-cache", *o.fetchCache) + 4*mustSize("max-group-bytes", *o.groupBytes) + 192<<20
		if remote != nil {
			limit += remote.readCache
		}
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
