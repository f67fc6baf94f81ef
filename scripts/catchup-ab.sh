#!/usr/bin/env bash
# A catch-up right after a fill, as bench compare runs it (PRODUCE_FIRST, default 10s, of
# flat-out produce into another topic first), for two broker builds alternating, ROUNDS
# times: scripts/catchup-profile.sh for each, which prints the read's wall time, the broker's
# CPU over it and its peak RSS, and keeps its CPU profile under OUT/NAME-ROUND/.
#   scripts/catchup-ab.sh NEW_INLET OLD_INLET [ROUNDS] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
new=$1 old=$2 rounds=${3:-3} out=${4:-$(mktemp -d)}
export PRODUCE_FIRST=${PRODUCE_FIRST:-10s}
for r in $(seq "$rounds"); do
  for name in new old; do
    bin=$new; [ $name = old ] && bin=$old
    printf 'round %d %-4s ' "$r" "$name"
    INLET=$bin scripts/catchup-profile.sh "$out/$name-$r" | grep '^catch-up'
  done
done
