#!/usr/bin/env bash
# The main job: build, start Inlet on its embedded Pebble default with a fresh data directory,
# run 16 idempotent producers flat out with the exactly-once check, print the result and the
# rate at which the broker committed records (from its own metrics), stop Inlet. Extra
# arguments go to loadgen (e.g. --duration 20s).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/inlet ./cmd/inlet
go build -o bin/loadgen ./cmd/loadgen
port=${INLET_DEMO_PORT:-19092}
mport=${INLET_DEMO_METRICS_PORT:-$((port + 1))}
data=$(mktemp -d /tmp/inlet-demo.XXXXXX)
log="$data.log"
bin/inlet --listen "127.0.0.1:$port" --data-dir "$data" --default-partitions 16 --metrics-listen "127.0.0.1:$mport" >"$log" 2>&1 &
pid=$!
cleanup() {
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" || true
  fi
  rm -rf "$data" "$data.samples"
}
trap cleanup EXIT
# Wait for this node, not whatever answers on the port: its process must be alive and its own
# log must say it bound the port (it logs "listening" with the address only once its listener
# is bound; a port already taken makes it exit instead). Without that check the load would run
# against another process on the port.
ready=""
for _ in $(seq 200); do
  kill -0 "$pid" 2>/dev/null || break
  if grep -q "msg=listening .*addr=127.0.0.1:$port " "$log"; then
    ready=1
    break
  fi
  sleep 0.1
done
if [ -z "$ready" ] || ! kill -0 "$pid" 2>/dev/null; then
  if kill -0 "$pid" 2>/dev/null; then
    echo "demo: inlet (pid $pid) is not listening on 127.0.0.1:$port after 20 s; its log:" >&2
  else
    echo "demo: inlet failed to start on 127.0.0.1:$port (metrics 127.0.0.1:$mport); its log:" >&2
  fi
  sed 's/^/  /' "$log" >&2
  echo "demo: if a port is taken, pick others: INLET_DEMO_PORT=29092 (the metrics port defaults to the next one, INLET_DEMO_METRICS_PORT)" >&2
  exit 1
fi
# committed prints the broker's count of committed records, read from its /metrics.
committed() {
  exec 3<>"/dev/tcp/127.0.0.1/$mport" || return 1
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
  awk '/^inlet_group_commit_records_total / {printf "%d\n", $2}' <&3
  exec 3<&-
}
# Sample it every quarter second while loadgen runs; the broker's rate is the records it
# committed between the first sample that saw any and the last sample that moved.
samples="$data.samples"
(while kill -0 "$pid" 2>/dev/null; do echo "$(date +%s.%N) $(committed)"; sleep 0.25; done) >"$samples" 2>/dev/null &
sampler=$!
bin/loadgen --brokers "127.0.0.1:$port" --topic demo --producers 16 --idempotent --verify --duration 5s "$@"
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
awk 'NF == 2 {
       if (!started && $2 > 0) { started = 1; t0 = $1; n0 = $2 }
       if (started && $2 != last_n) { t1 = $1; n1 = $2 }
       last_n = $2
     }
     END {
       if (started && t1 > t0) printf "broker      %d records committed, %.0f records/s (inlet_group_commit_records_total, sampled every 0.25 s)\n", n1, (n1 - n0) / (t1 - t0)
     }' "$samples"
rm -f "$samples"
