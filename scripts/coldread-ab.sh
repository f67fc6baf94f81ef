#!/usr/bin/env bash
# Catch-up reads of the same cold data by two broker builds, alternating: one node is filled
# once (RECORDS records, 16 idempotent producers, producer i writing only partition i, 100-byte
# values) and stopped; then, ROUNDS times for each binary in turn, the segment files are
# dropped from the page cache (POSIX_FADV_DONTNEED; what stays is printed), the binary starts on the data directory, and
# bin/kgoread's consumers read the topic from the start to the end. Each line: the build, the
# read's wall time and records/s, the broker's CPU over the read (user+system from
# /proc/PID/stat) per million records, and its peak RSS (VmHWM: start-up and the read).
# CONSUMERS (4) sets kgoread's consumers, PARTITION_MAX (1048576) its bytes a partition per fetch
# (its fetches ask up to 50 MiB). With PROFILE_DIR set, each broker run writes its CPU profile there (--cpu-profile, the whole
# run: start-up, the read, shutdown) as cpu-catchup-NAME-ROUND.pprof.
#   scripts/coldread-ab.sh NEW_INLET OLD_INLET [RECORDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
new=$1 old=$2 records=${3:-3000000} rounds=${4:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 10000))
tck=$(getconf CLK_TCK)
start() {
  local prof=()
  [ -n "${2:-}" ] && prof=(--cpu-profile "$2")
  "$1" "${prof[@]}" --data-dir "$dir" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$((port + 1))" 2>>"$dir/inlet.log" &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$((port + 1))/readyz" >/dev/null && return; sleep 0.1; done
  echo "no start" >&2; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
start "$new"
bin/loadgen --brokers "127.0.0.1:$port" --records "$records" --duration 0 --partitioner per-producer \
  --max-buffered-records 10000 --batch-max-bytes 1048576 --quiet | grep -E 'throughput|errors'
stop
for r in $(seq "$rounds"); do
  for name in new old; do
    bin=$new; [ $name = old ] && bin=$old
    python3 -c 'import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$dir"/segments/*.seg
    cached=$(fincore -b -n -o RES "$dir"/segments/*.seg | awk '{s += $1} END {printf "%.1f MiB", s / 1048576}')
    start "$bin" "${PROFILE_DIR:+$PROFILE_DIR/cpu-catchup-$name-$r.pprof}"
    c0=$(cpu); t0=$(date +%s.%N)
    out=$(bin/kgoread --brokers "127.0.0.1:$port" --topic loadgen --consumers "${CONSUMERS:-4}" --partition-max-bytes "${PARTITION_MAX:-1048576}")
    t1=$(date +%s.%N); c1=$(cpu)
    hwm=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")
    stop
    awk -v n=$name -v r=$r -v t0=$t0 -v t1=$t1 -v c=$((c1 - c0)) -v hz=$tck -v recs=$records -v out="$out" -v cached="$cached" -v hwm="$hwm" \
      'BEGIN { w = t1 - t0; printf "round %d %-4s wall %.3f s  %.0f records/s  broker CPU %.3f s, %.3f s per M records  peak RSS %d MiB   (%s; cached before: %s)\n", r, n, w, recs / w, c / hz, c / hz / (recs / 1e6), hwm, out, cached }'
  done
done
