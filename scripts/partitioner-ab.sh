#!/usr/bin/env bash
# loadgen flat out with --partitioner roundrobin and with its default (uniform, kgo's), each
# against a fresh inlet on its default segments storage, alternating: how much of what round-robin
# measures is the client.
#   scripts/partitioner-ab.sh   (uses bin/inlet and bin/loadgen: make build first)
set -euo pipefail
cd "$(dirname "$0")/.."
port=29192
pid="" d=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  [ -n "$d" ] && rm -rf "$d"
}
trap cleanup EXIT
for p in roundrobin uniform roundrobin uniform; do
  d=$(mktemp -d /tmp/partab.XXXXXX)
  bin/inlet --listen "127.0.0.1:$port" --data-dir "$d" --default-partitions 16 --log-level error &
  pid=$!
  sleep 1
  echo "== --partitioner $p"
  /usr/bin/time -f "loadgen CPU %U s user + %S s system" bin/loadgen --brokers "127.0.0.1:$port" --producers 16 --idempotent --partitioner "$p" --duration 10s --quiet 2>&1 | grep -E "throughput|loadgen CPU"
  cleanup
  pid="" d=""
  sleep 1
done
