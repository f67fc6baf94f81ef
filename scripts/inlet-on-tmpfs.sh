#!/usr/bin/env bash
# Runs an inlet binary with its data directory moved to tmpfs (/dev/shm): a bench compare peer
# for measuring what the disk costs (tmpfs refuses O_DIRECT, so the segment writes go through
# its page cache, and an fdatasync there writes nothing).
#   scripts/inlet-on-tmpfs.sh /path/to/inlet --data-dir DIR [inlet flags]
# (bench compare --peer 'inlet-tmpfs=scripts/inlet-on-tmpfs.sh bin/inlet --data-dir {dir} --listen 127.0.0.1:{port} ...')
set -euo pipefail
bin=$1; shift
args=()
while [ $# -gt 0 ]; do
  if [ "$1" = --data-dir ]; then
    dir=/dev/shm/inlet-$(basename "$2")
    mkdir -p "$dir"
    trap 'rm -rf "$dir"' EXIT
    args+=(--data-dir "$dir"); shift 2
  else
    args+=("$1"); shift
  fi
done
"$bin" "${args[@]}" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; rm -rf "$dir"' TERM INT
wait $pid
