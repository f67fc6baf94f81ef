#!/usr/bin/env bash
# A restore of a diskless node from the bucket alone, timed, on one versitygw started here on
# loopback and ended by its pid when the script exits.
#
#   scripts/diskless-restore-bench.sh [PARTITIONS [BYTES [PRODUCERS [TAIL]]]]  (16 256MiB 100000 0)
#
# 1. bench/restorefill fills the bucket: a node in its process (log, diskless committer and
#    remote tier, wired as cmd/inlet wires them) writes a diskless topic of PARTITIONS
#    partitions with BYTES of batches each and one idempotent batch per producer id, waits for
#    the tier to upload everything and for a checkpoint to cover every commit object, writes
#    TAIL bytes more to each partition with the tier stopped (in commit objects only, for the
#    restore to replay), and stops.
# 2. bin/inlet starts on an empty data directory with --restore-from-remote; the time from its
#    start to the first Metadata answer naming the topic with all its partitions is printed,
#    with the node's own log of what the restore did and its peak RSS (VmHWM) once serving.
#
# Record with scripts/record.sh diskless-restore scripts/diskless-restore-bench.sh ....
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
partitions=${1:-16}
bytes=${2:-256MiB}
producers=${3:-100000}
tail=${4:-0}

go build -o bin/inlet ./cmd/inlet
go build -o bin/restorefill ./bench/restorefill

work=$(mktemp -d "${TMPDIR:-/var/tmp}/diskless-restore-XXXXXX")
bucket=restorebench
source scripts/versitygw.sh # starts versitygw; sets gw, endpoint, node and the exit trap
kport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

echo "== fill: $partitions partitions x $bytes, $producers producer ids, $tail per partition after the checkpoint"
bin/restorefill fill --s3-endpoint "$endpoint" --s3-bucket "$bucket" --dir "$work/fill" \
  --partitions "$partitions" --bytes "$bytes" --producers "$producers" --tail "$tail"
rm -rf "$work/fill"
echo "bucket on disk: $(du -sh "$work/gw" | cut -f1)"
sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || echo "(page cache not dropped: not root)"

echo "== restore on an empty data directory"
t0=$(date +%s%N)
bin/inlet --listen "127.0.0.1:$kport" --data-dir "$work/restored" --s3-bucket "$bucket" --s3-endpoint "$endpoint" \
  --s3-path-style --restore-from-remote >"$work/inlet.log" 2>&1 &
node=$!
bin/restorefill wait --addr "127.0.0.1:$kport" --t0 "$t0" --partitions "$partitions"
echo "peak RSS of the restored node once serving: $(awk '/VmHWM/ {print $2, $3}' "/proc/$node/status")"
grep -E 'restored from the remote tier|diskless commit log recovered|lease' "$work/inlet.log" || true
kill "$node"
wait "$node" 2>/dev/null || true
node=
