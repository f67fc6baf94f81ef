#!/usr/bin/env bash
# CPU profile of inlet's catch-up read of a fully tiered topic, the read alone: one
# `scripts/tier-bench.sh catchup` run of inlet-tier only (a 2 s produce run, then the fill),
# with inlet's pprof on a metrics listener; when bench says no batch is left on local disk,
# the catch-up begins, and a SECONDS-second CPU profile is taken from then.
# The tier's metrics (inlet_remote_*) as the profile ends go to OUT.metrics.
#   scripts/tier-profile.sh OUT.pprof SECONDS [bench compare flags]
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
secs=$2
shift 2
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TIER_ARGS="${TIER_ARGS:-} --metrics-listen 127.0.0.1:$mport --pprof" \
  scripts/tier-bench.sh catchup --targets '' --repeat 1 --duration 2s --tail-duration 1s --tail-rate 20000 "$@" 2>&1 | {
  while IFS= read -r line; do
    printf '%s\n' "$line"
    case $line in
    *"catch-up from the remote tier"*)
      {
        curl -s -o "$out" "http://127.0.0.1:$mport/debug/pprof/profile?seconds=$secs"
        curl -s "http://127.0.0.1:$mport/metrics" | grep '^inlet_remote' >"$out.metrics" || true
      } &
      ;;
    esac
  done
  wait
}
[ -s "$out" ] && echo "# profile: $out (go tool pprof -top bin/inlet $out)"
