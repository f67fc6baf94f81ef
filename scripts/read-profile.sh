#!/usr/bin/env bash
# Profiles the broker's read path: a fresh node is filled with RECORDS records (16 idempotent
# producers, 100-byte values), then profiled while bin/kgoread's 4 consumers read the topic
# from the start to the end (catch-up), and again while they follow a 200,000 records/s
# produce load for 10 s (tail). Writes cpu-read-catchup.pprof and cpu-read-tail.pprof with
# their `go tool pprof -top` texts into OUTDIR.
#   scripts/read-profile.sh OUTDIR [RECORDS]      (make build and go build -o bin/kgoread ./cmd/kgoread first)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
records=${2:-10000000}
mkdir -p "$out"
dir=$(mktemp -d)
port=$((20000 + RANDOM % 10000))
mport=$((port + 1))
bin/inlet --data-dir "$dir" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" --pprof 2>"$out/inlet.log" &
inlet=$!
trap 'kill $inlet 2>/dev/null; wait $inlet 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$mport/readyz" >/dev/null && break; sleep 0.1; done
bin/loadgen --brokers "127.0.0.1:$port" --records "$records" --duration 0 --quiet | grep -E 'throughput|errors'

profile() { curl -sf -o "$out/$1.pprof" "http://127.0.0.1:$mport/debug/pprof/profile?seconds=$2"; }

echo "catch-up:"
profile cpu-read-catchup 6 &
sleep 0.2
bin/kgoread --brokers "127.0.0.1:$port"
wait %%
curl -sf "http://127.0.0.1:$mport/metrics" | grep -E '^inlet_fetch_cache_reads'

echo "tail:"
bin/kgoread --brokers "127.0.0.1:$port" --tail 13s &
reader=$!
sleep 1
profile cpu-read-tail 10 &
prof=$!
bin/loadgen --brokers "127.0.0.1:$port" --rate 200000 --duration 10s --quiet | grep -E 'throughput|errors'
wait $prof $reader
curl -sf "http://127.0.0.1:$mport/metrics" | grep -E '^inlet_fetch_cache|^inlet_requests_total\{api="(Fetch|Produce)"\}'
for p in cpu-read-catchup cpu-read-tail; do
  go tool pprof -top -nodecount 40 bin/inlet "$out/$p.pprof" >"$out/$p.txt" 2>/dev/null
done
