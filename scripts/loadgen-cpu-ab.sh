#!/usr/bin/env bash
# Compares the CPU two loadgen builds spend on the same open-loop load, alternating A B A B, each
# against a fresh `inlet --storage discard` on a loopback port, so that only the load generator
# differs. Prints each run's throughput, ack latency and loadgen's user and system CPU seconds.
#   scripts/loadgen-cpu-ab.sh INLET_BIN LOADGEN_A LOADGEN_B [RATE] [DURATION] [PORT]
set -euo pipefail
inlet=$1 a=$2 b=$3 rate=${4:-700000} duration=${5:-15s} port=${6:-29092}
for lg in "$a" "$b" "$a" "$b"; do
  "$inlet" --listen "127.0.0.1:$port" --storage discard --log-level error &
  pid=$!
  sleep 1
  echo "== $lg --rate $rate --duration $duration"
  /usr/bin/time -f "loadgen CPU %U s user + %S s system" "$lg" --brokers "127.0.0.1:$port" \
    --rate "$rate" --duration "$duration" --quiet 2>&1 | grep -E "throughput|ack latency|loadgen CPU"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  sleep 1
done
