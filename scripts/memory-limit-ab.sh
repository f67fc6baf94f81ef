#!/usr/bin/env bash
# --memory-limit auto against 0 (Go's default collector) on the catch-up of scripts/read-memory.sh,
# alternating, ROUNDS times each (default 3): the fill's produce rate, the catch-up's rate and
# the node's peak RSS during it, per run.
#   scripts/memory-limit-ab.sh [RECORDS]   (make build; go build -o bin/kgoread ./cmd/kgoread)
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-10000000}
for round in $(seq "${ROUNDS:-3}"); do
  for limit in 0 auto; do
    echo "== round $round: --memory-limit $limit"
    INLET_ARGS="--memory-limit $limit" scripts/read-memory.sh "$(mktemp -d)" "$records" | grep -E 'throughput|^read |during the read'
  done
done
