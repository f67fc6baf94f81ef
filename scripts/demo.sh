#!/usr/bin/env bash
# The main job: build, start Inlet on its embedded Pebble default with a fresh data directory,
# run 16 idempotent producers flat out with the exactly-once check, print the result, stop
# Inlet. Extra arguments go to loadgen (e.g. --duration 20s).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/inlet ./cmd/inlet
go build -o bin/loadgen ./cmd/loadgen
port=${INLET_DEMO_PORT:-19092}
data=$(mktemp -d /tmp/inlet-demo.XXXXXX)
log="$data.log"
bin/inlet --listen "127.0.0.1:$port" --data-dir "$data" --default-partitions 16 >"$log" 2>&1 &
pid=$!
cleanup() {
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" || true
  fi
  rm -rf "$data"
}
trap cleanup EXIT
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
bin/loadgen --brokers "127.0.0.1:$port" --topic demo --producers 16 --idempotent --verify --duration 5s "$@"
