#!/usr/bin/env bash
# The run set behind BENCHMARKS.md's Summary, on one clean commit: a `git worktree add` of COMMIT
# (default HEAD) under ${TMPDIR:-/var/tmp}, its binaries built there, and every measurement run
# there through scripts/record.sh, so each raw file's header names that commit and no "(dirty)".
# The raw text files and bench's JSON land in this repository's results/; a manifest
# results/summary-runs-<date>.txt lists the steps, their files and exit codes, and klite's commit.
#
#   KLITE=/path/to/klite KLITE_COMMIT=<sha> scripts/summary-runs.sh [COMMIT] [STEP...]
#
# STEP: produce consume latency sweep chaos powerloss tier (default: all, in that order). klite
# is the peer in produce, consume and tier (its S3 mode, on the same versitygw); build it outside this
# repository (go build -o /var/tmp/klite ./cmd/klite in a clone of github.com/klaudworks/klite).
# Without KLITE the peer runs are left out. The tier step needs versitygw (scripts/setup.sh).
#
# About 15 minutes on a 2-core machine with REPEAT=2, 20 with REPEAT=3. Settings (environment):
# FILL_RECORDS (consume, default 10000000), REPEAT (rounds of each comparison, default 2), TMPDIR.
set -uo pipefail
main=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$main" rev-parse "${1:-HEAD}")
shift || true
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(produce consume latency sweep chaos powerloss tier)
repeat=${REPEAT:-2}
tmp=${TMPDIR:-/var/tmp}
wt="$tmp/inlet-summary-${commit:0:7}"
results="$main/results"
klite=${KLITE:-}
klite_flags="--listen 127.0.0.1:{port} --data-dir {dir} --auto-create-topics --default-partitions 16 --wal-max-disk-size 68719476736 --log-level warn"

if [ ! -d "$wt" ]; then
  git -C "$main" worktree add --detach "$wt" "$commit" || exit 1
fi
cd "$wt" || exit 1
if [ "$(git rev-parse HEAD)" != "$commit" ] || [ -n "$(git status --porcelain)" ]; then
  echo "summary-runs: $wt is not a clean checkout of $commit" >&2
  exit 1
fi
make build >/dev/null || exit 1
go build -o bin/bench ./cmd/bench || exit 1
go build -o bin/kfake-broker ./cmd/kfake-broker || exit 1

manifest="$results/summary-runs-$(date -u +%Y%m%d-%H%M%S).txt"
{
  echo "# run set of scripts/summary-runs.sh at $commit (clean worktree $wt)"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# klite: ${klite:-none} at ${KLITE_COMMIT:-unknown commit}"
  echo "# steps: ${steps[*]}"
} >"$manifest"

# rec NAME command...: one measurement through record.sh, in the worktree, into results/.
rec() {
  local name=$1 rc
  shift
  echo "== $name: $*" >&2
  RECORD_ROOT=$wt RECORD_DIR=$results "$main/scripts/record.sh" "$name" "$@" 2>&1 >/dev/null |
    sed -n 's/^raw output: /file: /p' >>"$manifest"
  rc=${PIPESTATUS[0]}
  echo "step $name exit $rc" >>"$manifest"
  # bench names its JSON files in the CSVs by the --results-dir it was given (absolute here):
  # make them relative to the repository as the other rows are.
  sed -i "s#^$results/#results/#" "$results"/*.csv "$results"/tier/*.csv 2>/dev/null || true
  [ -z "$(git status --porcelain)" ] || echo "warning: the worktree is dirty after $name" >>"$manifest"
}

common=(--producers 16 --record-size 100 --tmp-dir "$tmp" --results-dir "$results")
peers=()
[ -z "$klite" ] || peers=(--peer "klite=$klite $klite_flags")
for step in "${steps[@]}"; do
  case $step in
  produce)
    rec summary-produce bin/bench compare --inlet-bin bin/inlet --kfake-bin bin/kfake-broker \
      --targets inlet,inlet-discard,kfake "${peers[@]}" "${common[@]}" --duration 10s --repeat "$repeat"
    ;;
  consume)
    rec summary-consume-pinned bin/bench compare --inlet-bin bin/inlet --kfake-bin bin/kfake-broker \
      --targets inlet,kfake "${peers[@]}" "${common[@]}" --duration 10s --repeat "$repeat" \
      --consume --consume-shape pinned --fill-records "${FILL_RECORDS:-10000000}" --tail-rate 200000 --tail-duration 20s
    ;;
  latency)
    rec summary-latency bin/bench latency --inlet-bin bin/inlet --of flat --rates 0.25,0.5,0.75 \
      "${common[@]}" --duration 10s --repeat "$repeat"
    ;;
  sweep)
    rec summary-sweep bin/bench sweep --inlet-bin bin/inlet --workers 1,2,4 "${common[@]}" --duration 10s --repeat "$repeat"
    ;;
  chaos)
    rec summary-chaos bin/bench chaos --inlet-bin bin/inlet --kill-every 3s --duration 60s --producers 16 \
      --tmp-dir "$tmp" --results-dir "$results"
    ;;
  powerloss)
    rec summary-powerloss-batchlog go test -count=1 -v -timeout 15m \
      -run '^(TestPowerLoss|TestTierPowerLoss|TestLocalStartSurvivesRestartAndPowerLoss)$' ./batchlog/
    rec summary-powerloss-txn-sink go test -count=1 -v -timeout 10m -run '^TestTransactionalSinkSurvivesPowerLoss$' ./crashtest/
    ;;
  tier)
    KLITE=$klite RESULTS_DIR=$results/tier rec summary-tier-produce scripts/tier-bench.sh produce --duration 10s --repeat "$repeat"
    ;;
  *)
    echo "summary-runs: unknown step $step" >&2
    exit 2
    ;;
  esac
done
echo "# done: $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$manifest"
echo "manifest: $manifest" >&2
