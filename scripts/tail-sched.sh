#!/usr/bin/env bash
# How long the broker's goroutines wait for a CPU in the tail phase of `bench compare --consume
# --consume-shape pinned` (scripts/tail-profile.sh's run: 16 producers, 16 partitions, 4
# consumers, 200,000 records/s for 15 s after a fill of 2,000,000 records): a 2 s execution
# trace is taken from the broker 6 s after the consume phase begins, and scripts/schedlat
# prints the waits from runnable to running by what woke each goroutine (the completer waking
# a parked fetch, a connection's worker created by its loop, ...). Prints the bench's tail
# line first. Environment: LINES (schedlat's lines, 12).
#   scripts/tail-sched.sh NAME /path/to/inlet OUT
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 bin=$2 out=$3
mkdir -p "$out"
out=$(cd "$out" && pwd)
(cd scripts/schedlat && go build -o "$out/schedlat" .)
TRACE=2 scripts/tail-profile.sh "$name" "$bin" "$out" >/dev/null 2>&1
grep 'consume: fill' "$out/bench.log" | sed 's/.*tail/tail/'
"$out/schedlat" "$out/trace.out" "${LINES:-12}"
