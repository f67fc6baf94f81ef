#!/usr/bin/env bash
# The broker's memory during a catch-up read: a fresh node is filled with RECORDS records (16
# idempotent producers, 100-byte values), then bin/kgoread's 4 consumers read the topic from
# the start (fetches of 50 MiB, PARTITION_MAX bytes a partition). The node's RSS is sampled
# every 50 ms from /proc while they read; a heap profile (in use) is taken HEAP_AT seconds
# into the read. Prints the peak RSS before and during the read, the node's Go memory
# figures at the end, and writes heap-read-catchup.pprof with its `go tool pprof -top` text
# into OUTDIR.
#   scripts/read-memory.sh OUTDIR [RECORDS]   (make build; go build -o bin/kgoread ./cmd/kgoread)
# Settings (environment): PARTITION_MAX (default 10485760), HEAP_AT (default 1), INLET_ARGS
# (flags of the node), INLET_ENV (its environment only, e.g. GOMEMLIMIT=600MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
records=${2:-10000000}
mkdir -p "$out"
dir=$(mktemp -d)
port=$((20000 + RANDOM % 10000))
mport=$((port + 1))
# shellcheck disable=SC2086
env ${INLET_ENV:-} bin/inlet --data-dir "$dir" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" --pprof ${INLET_ARGS:-} 2>"$out/inlet.log" &
inlet=$!
trap 'kill $inlet 2>/dev/null; wait $inlet 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$mport/readyz" >/dev/null && break; sleep 0.1; done
bin/loadgen --brokers "127.0.0.1:$port" --records "$records" --duration 0 --quiet | grep -E 'throughput|errors'
rss() { awk '/VmRSS/ {print $2}' "/proc/$inlet/status"; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$inlet/status"; }
echo "after the fill: RSS $(($(rss) / 1024)) MiB, peak so far $(($(hwm) / 1024)) MiB"
samples="$out/rss-during-read.txt"
: >"$samples"
(while kill -0 $inlet 2>/dev/null; do rss >>"$samples"; sleep 0.05; done) &
sampler=$!
(sleep "${HEAP_AT:-1}"; curl -sf -o "$out/heap-read-catchup.pprof" "http://127.0.0.1:$mport/debug/pprof/heap") &
heap=$!
bin/kgoread --brokers "127.0.0.1:$port" --partition-max-bytes "${PARTITION_MAX:-10485760}"
wait $heap || true
kill $sampler 2>/dev/null || true
echo "during the read: peak RSS $(($(sort -n "$samples" | tail -1) / 1024)) MiB over $(wc -l <"$samples") samples; VmHWM $(($(hwm) / 1024)) MiB"
curl -sf "http://127.0.0.1:$mport/metrics" | grep -E '^go_memstats_(heap_inuse|heap_sys|next_gc)_bytes|^inlet_fetch_cache_bytes|^inlet_inflight_budget'
go tool pprof -top -sample_index=inuse_space bin/inlet "$out/heap-read-catchup.pprof" 2>/dev/null | head -25 >"$out/heap-read-catchup.txt" || true
cat "$out/heap-read-catchup.txt"
