#!/usr/bin/env bash
# Runs a command and keeps its raw output under results/, headed by the machine, Go version,
# date, git commit and the exact command, so every figure quoted in BENCHMARKS.md has its source.
#   scripts/record.sh NAME command args...   ->  results/NAME-YYYYmmdd-HHMMSS.txt
# RECORD_ROOT: the work tree the command runs in and whose commit the header names (default: this
# repository); RECORD_DIR: where the file goes (default: results/ under RECORD_ROOT). A clean
# worktree of a commit with RECORD_DIR pointing back here keeps the header free of "(dirty)".
set -euo pipefail
cd "${RECORD_ROOT:-$(dirname "$0")/..}"
name=$1
shift
dir=${RECORD_DIR:-results}
mkdir -p "$dir"
out="$dir/$name-$(date -u +%Y%m%d-%H%M%S).txt"
{
  echo "# command: $*"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit: $(git rev-parse HEAD)$(git diff --quiet || echo ' (dirty)')"
  echo "# go: $(go version)"
  echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
  echo "# memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  echo "# kernel: $(uname -r)"
  echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
} >"$out"
set +e
"$@" 2>&1 | tee -a "$out"
rc=${PIPESTATUS[0]}
echo "# exit: $rc" >>"$out"
echo "raw output: $out" >&2
exit "$rc"
