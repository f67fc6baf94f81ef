#!/usr/bin/env bash
# Where a tailed record's time goes in the broker: runs scripts/tail-profile.sh on one binary
# (the pinned tail at 200,000 records/s for 15 s, /metrics scraped every second), then prints
# the bench's tail line and, over 10 s of the tail (from the twelfth-last scrape to the
# second-last), the produce and fetch request, group commit and fsync histograms.
#   scripts/tail-breakdown.sh /path/to/inlet [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1 out=${2:-$(mktemp -d)}
scripts/tail-profile.sh tail "$bin" "$out" >/dev/null 2>&1
grep "consume: fill" "$out/bench.log"
files=()
for f in "$out"/m-*.txt; do [ -s "$f" ] && files+=("$f"); done
n=${#files[@]}
a=${files[$((n - 12))]} b=${files[$((n - 2))]}
echo "histograms between $(basename "$a") and $(basename "$b")"
python3 scripts/tail-hist.py "$a" "$b"
