#!/usr/bin/env bash
# How long the broker's goroutines wait for a CPU in the tail phase of `bench compare --consume
# --consume-shape pinned` (16 producers, 16 partitions, 4 consumers, 200,000 records/s for
# 12 s after a fill of 2,000,000 records): a 2 s execution trace is taken from the broker
# (--pprof) 6 s after the consume phase begins, and scripts/schedlat prints the waits from
# runnable to running by what woke each goroutine (the completer waking a parked fetch, the
# flusher waking the completer, a connection's worker created by its loop, ...). Prints the
# bench's tail line first. Environment: LINES (schedlat's lines, 12).
#   scripts/tail-sched.sh NAME /path/to/inlet OUT
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 bin=$2 out=$3
mkdir -p "$out"
out=$(cd "$out" && pwd)
(cd scripts/schedlat && go build -o "$out/schedlat" .)
bin/bench compare --targets '' --peer "$name=$bin --listen 127.0.0.1:{port} --data-dir {dir} --default-partitions {partitions} --metrics-listen 127.0.0.1:19644 --pprof" \
  --producers 16 --partitions 16 --record-size 100 --duration 3s --consume --consume-shape pinned --fill-records 2000000 --consumers 4 \
  --tail-rate 200000 --tail-duration 12s --repeat 1 --tmp-dir /var/tmp --results-dir "$out" >"$out/bench.log" 2>&1 &
bp=$!
traced=0
while kill -0 $bp 2>/dev/null; do
  if [ $traced = 0 ] && grep -q 'consume phase' "$out/bench.log"; then
    traced=1
    (sleep 6; curl -s -m 15 -o "$out/trace.out" "http://127.0.0.1:19644/debug/pprof/trace?seconds=2") &
  fi
  sleep 0.5
done
wait
grep 'consume: fill' "$out/bench.log" | sed 's/.*tail/tail/'
"$out/schedlat" "$out/trace.out" "${LINES:-12}"
