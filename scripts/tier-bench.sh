#!/usr/bin/env bash
# Tiered storage under bench compare, on one versitygw started here on loopback and ended by
# its pid when the script exits.
#
#   scripts/tier-bench.sh produce [bench compare flags]
#       inlet with tiering off (the built-in target) against inlet with tiering on (peer
#       inlet-tier: --s3-bucket, its topic created with remote.storage.enable=true and a
#       local.retention.bytes that local reclaim runs under during the run), and, with
#       KLITE=/path/to/klite, klite with its S3 mode on (peer klite-s3) on the same server.
#   scripts/tier-bench.sh catchup [bench compare flags]
#       the same two inlets with --consume: the tiered one's topics have local.retention.bytes=0,
#       and its catch-up starts once no batch is left on its disk, so the read is one of the
#       remote tier alone; the other reads the same data from local segments.
#
# Every run has a fresh data directory and a key prefix of its own in the bucket. The bucket
# and every uploaded object are removed at exit. versitygw's CPU seconds (not counted in a
# broker's figures) are printed at the end. Record with scripts/record.sh NAME scripts/tier-bench.sh ....
#
# Settings (environment): KLITE, LOCAL_RETENTION_BYTES (produce; default 16 MiB),
# OBJECT_BYTES (--remote-object-bytes, default 16MiB), UPLOAD_INTERVAL_MS (default 1000),
# TIER_ARGS (further flags of inlet-tier, e.g. --remote-read-cache 256MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:?usage: scripts/tier-bench.sh produce|catchup [bench compare flags]}
shift

go build -o bin/inlet ./cmd/inlet
go build -o bin/bench ./cmd/bench

work=$(mktemp -d "${TMPDIR:-/var/tmp}/tier-bench-XXXXXX")
bucket=tierbench
source scripts/versitygw.sh # starts versitygw; sets gw, endpoint, node and the exit trap

# A run's prefix is the name of its fresh directory, the parent of {dir}.
prefix='"$(basename "$(dirname {dir})")/"'
upload="--remote-upload-interval-ms ${UPLOAD_INTERVAL_MS:-1000} --remote-object-bytes ${OBJECT_BYTES:-16MiB}"
common="--listen 127.0.0.1:{port} --data-dir {dir} --default-partitions 16 --log-retention-check-interval-ms 1000"
s3="--s3-bucket $bucket --s3-endpoint $endpoint --s3-path-style --s3-prefix $prefix $upload ${TIER_ARGS:-}"

peers=()
case $mode in
produce)
  peers+=(--peer "inlet-tier[remote.storage.enable=true,local.retention.bytes=${LOCAL_RETENTION_BYTES:-16777216}]=$root/bin/inlet $common $s3")
  if [ -n "${KLITE:-}" ]; then
    peers+=(--peer "klite-s3=$KLITE --listen 127.0.0.1:{port} --data-dir {dir} --default-partitions 16 --auto-create-topics --log-level warn --wal-max-disk-size 17179869184 --s3-bucket $bucket --s3-endpoint $endpoint --s3-region us-east-1 --s3-prefix $prefix")
  fi
  extra=()
  ;;
catchup)
  peers+=(--peer "inlet-tier[remote.storage.enable=true,local.retention.bytes=0]=$root/bin/inlet $common $s3")
  extra=(--consume)
  ;;
*)
  echo "unknown mode $mode (produce or catchup)" >&2
  exit 2
  ;;
esac

set +e
bin/bench compare --inlet-bin bin/inlet --targets inlet --inlet-arg=--log-retention-check-interval-ms=1000 \
  --tmp-dir "$work" --results-dir "${RESULTS_DIR:-$root/results/tier}" "${peers[@]}" "${extra[@]}" "$@"
rc=$?
set -e
# utime + stime (fields 14 and 15 of /proc/PID/stat) over CLK_TCK.
read -r ut st < <(awk '{print $14, $15}' "/proc/$gw/stat")
echo "# versitygw CPU over the whole comparison: $(awk -v t=$((ut + st)) -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t / hz}') s"
# What each target left in the bucket: its runs' prefixes are inlet-bench-<target>-<random>.
for d in "$work/gw/$bucket"/*/; do
  [ -d "$d" ] || continue
  name=$(basename "$d")
  name=${name#inlet-bench-}
  printf '%s %s %s\n' "${name%-*}" "$(du -sb "$d" | cut -f1)" "$(find "$d" -type f | wc -l)"
done | awk '{b[$1] += $2; n[$1] += $3; r[$1]++} END {for (t in b) printf "# bucket: %s: %d runs, %.1f MiB in %d objects\n", t, r[t], b[t] / 1048576, n[t]}' | sort
exit $rc
