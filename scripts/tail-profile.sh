#!/usr/bin/env bash
# Profiles the tail phase of `bench compare --consume --consume-shape pinned` on one broker
# binary: the broker runs with --metrics-listen and --pprof; /metrics is scraped every second
# into OUT/m-<unix time>.txt, and a 10 s CPU profile (OUT/cpu.pprof) is taken from 6 s after
# the consume phase begins (the fill and catch-up of 2,000,000 records take about 4 s here;
# the tail runs 15 s); with TRACE=N, an N-second execution trace (OUT/trace.out) instead.
# scripts/tail-hist.py then gives the histograms between two scrapes.
#   scripts/tail-profile.sh NAME /path/to/inlet OUT
set -u
cd "$(dirname "$0")/.."
name=$1 bin=$2 out=$3
mkdir -p "$out"
bin/bench compare --targets '' --peer "$name=$bin --listen 127.0.0.1:{port} --data-dir {dir} --default-partitions {partitions} --metrics-listen 127.0.0.1:19644 --pprof" \
  --producers 16 --partitions 16 --record-size 100 --duration 3s --consume --consume-shape pinned --fill-records 2000000 --consumers 4 \
  --tail-rate 200000 --tail-duration 15s --repeat 1 --tmp-dir /var/tmp --results-dir "$out" >"$out/bench.log" 2>&1 &
bp=$!
prof=0
while kill -0 $bp 2>/dev/null; do
  curl -s -m 1 http://127.0.0.1:19644/metrics >"$out/m-$(date +%s.%N).txt" 2>/dev/null
  if [ $prof = 0 ] && grep -q 'consume phase' "$out/bench.log"; then
    prof=1
    if [ -n "${TRACE:-}" ]; then # an execution trace instead (scripts/tail-sched.sh)
      (sleep 6; curl -s -m 15 -o "$out/trace.out" "http://127.0.0.1:19644/debug/pprof/trace?seconds=$TRACE") &
    else
      (sleep 6; curl -s -m 15 -o "$out/cpu.pprof" "http://127.0.0.1:19644/debug/pprof/profile?seconds=10") &
    fi
  fi
  sleep 1
done
wait
