#!/usr/bin/env bash
# Profiles a catch-up read right after its fill, in the pinned shape of `bench compare
# --consume --consume-shape pinned`: a fresh node (INLET, default bin/inlet) is filled with
# 10,000,000 records by 16 idempotent producers, producer i writing only partition i (linger
# 5 ms, batches up to 1 MiB, 10,000 buffered records), and at once bin/kgoread's 4 consumers
# read the topic to its end with 10 MiB a partition, while the broker is profiled for 4 s.
# Prints the read's wall time, the broker's CPU over it and its peak RSS, and the consumers'
# own CPU (kgoread's line); writes the broker's cpu.pprof and the consumers' client.pprof (over
# the whole read), with their `go tool pprof -top` texts (cpu.txt, client.txt), into OUTDIR. Extra arguments go to the broker. With
# PRODUCE_FIRST (a duration) the node first takes a flat-out produce run of that length into
# another topic, as in bench compare.
#   scripts/catchup-profile.sh OUTDIR [inlet flags]     (make build; go build -o bin/kgoread ./cmd/kgoread)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1; shift
inlet=${INLET:-bin/inlet}
mkdir -p "$out"
dir=$(mktemp -d -p "${TMPDIR:-/var/tmp}")
port=$((20000 + RANDOM % 10000)); mport=$((port + 1))
"$inlet" --data-dir "$dir" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" --pprof "$@" 2>"$out/inlet.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$mport/readyz" >/dev/null && break; sleep 0.1; done
if [ -n "${PRODUCE_FIRST:-}" ]; then # as bench compare does: a flat-out produce run into another topic first
  bin/loadgen --brokers "127.0.0.1:$port" --topic bench --duration "$PRODUCE_FIRST" --quiet | grep -E 'throughput|errors'
fi
bin/loadgen --brokers "127.0.0.1:$port" --records 10000000 --duration 0 --partitioner per-producer \
  --max-buffered-records 10000 --batch-max-bytes 1048576 --quiet | grep -E 'throughput|errors'
curl -sf -o "$out/cpu.pprof" "http://127.0.0.1:$mport/debug/pprof/profile?seconds=4" &
prof=$!
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
tck=$(getconf CLK_TCK)
c0=$(cpu); t0=$(date +%s.%N)
bin/kgoread --brokers "127.0.0.1:$port" --topic loadgen --consumers 4 --partition-max-bytes 10485760 --cpuprofile "$out/client.pprof"
t1=$(date +%s.%N); c1=$(cpu)
awk -v t0="$t0" -v t1="$t1" -v c=$((c1 - c0)) -v hz="$tck" -v hwm="$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status")" \
  'BEGIN { printf "catch-up: %.3f s, broker CPU %.2f s, peak RSS %d MiB (fill and read)\n", t1 - t0, c / hz, hwm }'
wait $prof
go tool pprof -top -nodecount 45 "$inlet" "$out/cpu.pprof" >"$out/cpu.txt" 2>/dev/null
go tool pprof -top -nodecount 45 bin/kgoread "$out/client.pprof" >"$out/client.txt" 2>/dev/null
