#!/usr/bin/env bash
# Every measurement of BENCHMARKS.md's "Tiered storage", one after the other, each recorded
# under results/ by scripts/record.sh (result files under results/tier/), profiles under
# profiles/:
#   1. produce: inlet with tiering off, on, and klite with its S3 mode (KLITE, required),
#      16 idempotent producers flat out, 10 s each, alternating, REPEAT (default 5) rounds;
#   2. catch-up of a fully tiered topic against the same read from local segments, at the
#      default --remote-read-cache and at 256MiB, 3 rounds each;
#   3. CPU profiles of inlet-tier: a produce run, and its catch-up read alone.
#   KLITE=/path/to/klite scripts/tier-measure.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KLITE:?KLITE=/path/to/klite}"
day=$(date -u +%Y%m%d)
catchup=(--duration 5s --tail-duration 5s --repeat 3)
scripts/record.sh tier-produce env KLITE="$KLITE" scripts/tier-bench.sh produce --duration 10s --repeat "${REPEAT:-5}"
scripts/record.sh tier-catchup scripts/tier-bench.sh catchup "${catchup[@]}"
scripts/record.sh tier-catchup-readcache256 env TIER_ARGS="--remote-read-cache 256MiB" scripts/tier-bench.sh catchup "${catchup[@]}"
scripts/record.sh tier-profile-produce env TIER_ARGS="--cpu-profile $PWD/profiles/cpu-tier-produce-$day.pprof" \
  scripts/tier-bench.sh produce --targets '' --duration 10s --repeat 1
scripts/record.sh tier-profile-catchup scripts/tier-profile.sh "profiles/cpu-tier-catchup-$day.pprof" 3
