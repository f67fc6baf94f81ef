#!/usr/bin/env bash
# Diskless topics under bench, on one versitygw started here on loopback (access log on) and
# ended by its pid when the script exits.
#
#   scripts/diskless-bench.sh produce [bench compare flags]
#       two inlets of the same build, both started with the bucket: inlet-local's topic is
#       created with diskless.enable=false (acknowledged after the local fsync), inlet-diskless's
#       with diskless.enable=true (acknowledged from the bucket); with KLITE set (the path of a
#       klite binary), klite in its S3 mode on the same versitygw as a third; alternated round
#       by round.
#   scripts/diskless-bench.sh produce --standby [bench compare flags]
#       inlet-diskless alone against inlet-diskless-standby: the same writer with a second node
#       started beside it on its bucket prefix with --standby, following its commit log
#       (docs/standby.md), alternated round by round. The standby runs in a session of its own,
#       so the figures bench measures are the writer's alone; the standby's CPU seconds and its
#       inlet_standby_* metrics at the end of each run are printed after the runs, and its
#       requests (LISTs and GETs) are counted with the writer's in the per-node table (one
#       prefix).
#   scripts/diskless-bench.sh latency [bench latency flags]
#       bench latency on inlet-diskless (default --of flat --rates 0.5: the diskless flat-out
#       rate, then half of it, open loop).
#   scripts/diskless-bench.sh idle [SECONDS]
#       one inlet-diskless with its topic created and nothing produced, for SECONDS (60).
#   scripts/diskless-bench.sh steady RATE SECONDS
#       one inlet-diskless under loadgen's 16 idempotent producers offering RATE records/s for
#       SECONDS: long enough, at the defaults, for the remote tier's uploads, the checkpoints
#       and the deletions of the commit objects they cover, which the request counts below
#       show by kind (what a month of them costs: docs/diskless.md, "Cost").
#   scripts/diskless-bench.sh cores [ROUNDS [SECONDS [RATE]]]
#       where the two cores go: per round (3), one node at a time under loadgen's 16 idempotent
#       producers flat out (or offering RATE records/s) for SECONDS (60): inlet-local (its topic not diskless),
#       inlet-diskless, and inlet-diskless-notier (the remote tier's upload held off for the
#       run, so each batch goes to the bucket once, in its commit object). Over a window from
#       the 15th second to 5 s before the end (past the start-up and the heap's first growth),
#       each run prints the records made (the sum of the partitions' high watermarks) a second
#       and the cores, and CPU seconds per million records, of the node, versitygw and loadgen
#       (from /proc/PID/stat); then the median of each over the rounds.
#   scripts/diskless-bench.sh profile OUT.pprof [local]
#       one node under loadgen's 16 idempotent producers flat out for 25 s, its topic diskless
#       (or local), and a 15 s CPU profile of it from the 5th second into OUT.pprof; its
#       diskless, fsync and group commit metrics are printed after.
#
# Every node has a fresh data directory and a key prefix of its own in the bucket. After the
# runs, the requests each node made (versitygw's access log, by key prefix) are printed per
# node: PUTs and GETs (and other calls), over the node's life in the log, and per second;
# versitygw's CPU seconds (not counted in a broker's figures) too, and what each node left in
# the bucket: a run's objects are removed when the next run starts (node.sh, below), the last
# run's and the bucket at exit.
# Record with scripts/record.sh NAME scripts/diskless-bench.sh ....
#
# Settings (environment): COMMIT_INTERVAL_MS (--diskless-commit-interval-ms, default 100),
# COMMIT_BYTES (--diskless-commit-bytes, default 32MiB), DISKLESS_ARGS (further inlet flags of
# both nodes), KLITE (produce: klite's binary, a third target), BASELINE_INLET (produce: another
# inlet binary, say an earlier commit's, run as inlet-diskless-baseline; with --standby, as both
# nodes of inlet-diskless-standby-baseline), STANDBY_PROFILE (produce
# --standby: a path; each run's profiles of its standby, 10 s from the 5th second, go to
# STANDBY_PROFILE-PREFIX.pprof and .perf (perf's, with the writer's in -writer.perf), and both
# nodes' page faults and CPU, every second, to .cpu), GW_PERF (profile: a path; versitygw's perf
# profile over the node's profile's 15 s goes to GW_PERF.data, by symbol to GW_PERF.txt), LOADGEN_ARGS (profile: further loadgen
# flags, --rate N to profile an offered load rather than flat out).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:?usage: scripts/diskless-bench.sh produce|latency|idle|steady|cores|profile [flags]}
shift

go build -o bin/inlet ./cmd/inlet
go build -o bin/bench ./cmd/bench
go build -o bin/loadgen ./cmd/loadgen

work=$(mktemp -d "${TMPDIR:-/var/tmp}/diskless-bench-XXXXXX")
bucket=disklessbench
VERSITYGW_ACCESS_LOG="$work/access.log"
source scripts/versitygw.sh # starts versitygw; sets gw, endpoint, node and the exit trap
for v in COMMIT_INTERVAL_MS COMMIT_BYTES DISKLESS_ARGS KLITE BASELINE_INLET STANDBY_PROFILE GW_PERF LOADGEN_ARGS; do
  [ -z "${!v:-}" ] || echo "# $v=${!v}"
done

# A run's prefix is the name of its fresh directory, the parent of {dir}.
prefix='"$(basename "$(dirname {dir})")/"'
window="--diskless-commit-interval-ms ${COMMIT_INTERVAL_MS:-100} --diskless-commit-bytes ${COMMIT_BYTES:-32MiB}"
node_cmd="$root/bin/inlet --listen 127.0.0.1:{port} --data-dir {dir} --default-partitions 16 --s3-bucket $bucket --s3-endpoint $endpoint --s3-path-style --s3-prefix $prefix $window ${DISKLESS_ARGS:-}"

# node.sh CMD...: before it starts a node (exec CMD, so that bench measures the node alone),
# notes what each earlier run left in the bucket (the prefixes there: one run goes at a time)
# in $work/bucket-PREFIX.txt and removes it from versitygw's directory, so that a run set of
# many rounds holds on disk only the objects of the run going on.
cat >"$work/node.sh" <<NODE
set -u
for d in "$work/gw/$bucket"/*/; do
  [ -d "\$d" ] || continue
  p=\$(basename "\$d")
  printf '# bucket: %s %.1f MiB in %d objects\\n' "\$p" "\$(du -sb "\$d" | awk '{print \$1 / 1048576}')" "\$(find "\$d" -type f | wc -l)" >"$work/bucket-\$p.txt"
  rm -rf "\$d"
done
exec "\$@"
NODE
kept="bash $work/node.sh"
# free: a free loopback port.
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

set +e
case $mode in
produce)
  peers=(--peer "inlet-local[diskless.enable=false]=$kept $node_cmd")
  if [ -n "${BASELINE_INLET:-}" ]; then
    # Another build of inlet (an earlier commit's binary) with the same flags, its topic
    # diskless, run between inlet-local and inlet-diskless in each round.
    peers+=(--peer "inlet-diskless-baseline[diskless.enable=true]=$kept ${node_cmd/#$root\/bin\/inlet/$BASELINE_INLET}")
  fi
  peers+=(--peer "inlet-diskless[diskless.enable=true]=$kept $node_cmd")
  if [ "${1:-}" = --standby ]; then
    shift
    # pair.sh PORT DIR [INLET]: the writer on PORT and DIR in this process group (the one bench
    # measures and signals); once it accepts (it holds the prefix's lease), the standby on a
    # free port, DIR's sibling standby/ (the same prefix) and a session of its own. On SIGTERM
    # the standby is stopped first, so that the writer's stop is not a takeover; its CPU
    # seconds and metrics go to $work/standby-PREFIX.txt.
    { declare -p node_cmd work; [ -z "${STANDBY_PROFILE:-}" ] || declare -p STANDBY_PROFILE; cat <<'EOF'
set -u
port=$1 dir=$2
[ -z "${3:-}" ] || node_cmd=${node_cmd/#*\/bin\/inlet /$3 }
run=$(basename "$(dirname "$dir")")
sdir=$(dirname "$dir")/standby
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sport=$(free)
mport=$(free)
w=${node_cmd//\{port\}/$port}
w=${w//\{dir\}/$dir}
s=${node_cmd//\{port\}/$sport}
s=${s//\{dir\}/$sdir}
sh -c "exec $w" &
writer=$!
for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
setsid sh -c "exec $s --node-id 2 --standby --metrics-listen 127.0.0.1:$mport --pprof" >"$work/standby-$run.log" 2>&1 &
standby=$!
if [ -n "${STANDBY_PROFILE:-}" ]; then
  # 10 s of the standby's CPU from the 5th second of the run: Go's profile, and perf's (with
  # the kernel's side, which Go's undercounts in long system calls) where perf is installed,
  # the writer's too (-writer.perf); and every second the time, then the standby's minor page
  # faults, user and system CPU (clock ticks), then W and the writer's (.cpu).
  (sleep 5; curl -s -o "$STANDBY_PROFILE-$run.pprof" "http://127.0.0.1:$mport/debug/pprof/profile?seconds=10") &
  if command -v perf >/dev/null; then
    (sleep 5; perf record -g -p "$standby" -o "$STANDBY_PROFILE-$run.perf" -- sleep 10 >/dev/null 2>&1) &
    (sleep 5; perf record -g -p "$writer" -o "$STANDBY_PROFILE-$run-writer.perf" -- sleep 10 >/dev/null 2>&1) &
  fi
  (while [ -e "/proc/$standby" ]; do echo "$(date +%s.%N) $(cut -d' ' -f10,14,15 "/proc/$standby/stat") W $(cut -d' ' -f10,14,15 "/proc/$writer/stat")"; sleep 1; done) >"$STANDBY_PROFILE-$run.cpu" 2>/dev/null &
fi
stop() {
  trap - TERM INT
  {
    awk -v hz="$(getconf CLK_TCK)" -v run="$run" '{printf "standby of %s: CPU %.2f s\n", run, ($14 + $15) / hz}' "/proc/$standby/stat"
    curl -s "http://127.0.0.1:$mport/metrics" | grep -E '^inlet_standby_'
  } >"$work/standby-$run.txt"
  kill -TERM "$standby"
  wait "$standby"
  kill -TERM "$writer" 2>/dev/null
  wait "$writer"
  exit 0
}
trap stop TERM INT
wait "$writer"
EOF
    } >"$work/pair.sh"
    peers=(--peer "inlet-diskless[diskless.enable=true]=$kept $node_cmd" --peer "inlet-diskless-standby[diskless.enable=true]=$kept bash $work/pair.sh {port} {dir}")
    if [ -n "${BASELINE_INLET:-}" ]; then
      # The pair again with BASELINE_INLET as both nodes, a third target.
      peers+=(--peer "inlet-diskless-standby-baseline[diskless.enable=true]=$kept bash $work/pair.sh {port} {dir} $BASELINE_INLET")
    fi
  fi
  if [ -n "${KLITE:-}" ]; then
    # klite's S3 mode on the same versitygw, as scripts/tier-bench.sh runs it.
    peers+=(--peer "klite-s3=$kept $KLITE --listen 127.0.0.1:{port} --data-dir {dir} --default-partitions 16 --auto-create-topics --log-level warn --wal-max-disk-size 17179869184 --s3-bucket $bucket --s3-endpoint $endpoint --s3-region us-east-1 --s3-prefix $prefix")
  fi
  bin/bench compare --inlet-bin bin/inlet --targets '' --tmp-dir "$work" --results-dir "${RESULTS_DIR:-$root/results}" \
    "${peers[@]}" "$@"
  rc=$?
  for f in "$work"/standby-*.txt; do
    [ -e "$f" ] && sed 's/^/# /' "$f"
  done
  ;;
latency)
  [ $# -gt 0 ] || set -- --of flat --rates 0.5
  bin/bench latency --inlet-bin bin/inlet --tmp-dir "$work" --results-dir "${RESULTS_DIR:-$root/results}" \
    --peer "inlet-diskless[diskless.enable=true]=$kept $node_cmd" "$@"
  rc=$?
  ;;
idle | profile | steady)
  dir="$work/inlet-bench-$mode-0/data"
  mkdir -p "$dir"
  kport=$(free)
  mport=$(free)
  cmd=${node_cmd//\{port\}/$kport}
  cmd=${cmd//\{dir\}/$dir}
  # --log-diskless-enable: the topic loadgen creates is diskless.
  [ "$mode" = profile ] && [ "${2:-}" = local ] || cmd="$cmd --log-diskless-enable"
  sh -c "exec $cmd --metrics-listen 127.0.0.1:$mport --pprof" >"$work/$mode-server.log" 2>&1 &
  node=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$kport") 2>/dev/null && break; sleep 0.1; done
  if [ "$mode" = steady ]; then
    rate=${1:?usage: scripts/diskless-bench.sh steady RATE SECONDS}
    secs=${2:?usage: scripts/diskless-bench.sh steady RATE SECONDS}
    echo "# steady: node pid $node on 127.0.0.1:$kport, 16 idempotent producers offering $rate records/s for $secs s"
    bin/loadgen --brokers "127.0.0.1:$kport" --topic bench --producers 16 --idempotent --rate "$rate" --duration "${secs}s" | tail -4
    # How far the remote tier is behind as sending ends (at a rate it cannot keep up with, it
    # grows for as long as the run), then the last uploads and checkpoints of what was
    # produced, before the node stops.
    curl -s "http://127.0.0.1:$mport/metrics" | grep -E '^inlet_remote_upload_lag' | sed 's/^/# as sending ended: /' || true
    sleep 15
  elif [ "$mode" = idle ]; then
    secs=${1:-60}
    # One second of 100 records/s makes the topic and its first commit objects; then nothing.
    bin/loadgen --brokers "127.0.0.1:$kport" --topic idle --producers 1 --rate 100 --duration 1s | tail -1
    echo "# idle: node pid $node on 127.0.0.1:$kport, $secs s after one second of 100 records/s"
    sleep "$secs"
  else
    out=${1:?usage: scripts/diskless-bench.sh profile OUT.pprof [local]}
    (sleep 5 && curl -s -o "$out" "http://127.0.0.1:$mport/debug/pprof/profile?seconds=15") &
    # With GW_PERF (a path), versitygw's CPU by symbol over the same 15 s, from perf: its
    # kernel side included (the page cache copies of what it writes).
    gwperf=
    if [ -n "${GW_PERF:-}" ]; then
      (sleep 5 && perf record -q -F 999 -g -p "$gw" -o "$GW_PERF.data" -- sleep 15 &&
        perf report -i "$GW_PERF.data" --no-children --stdio --sort sym -g none --percent-limit 0.5 >"$GW_PERF.txt" 2>/dev/null) &
      gwperf=$!
    fi
    prof=$!
    bin/loadgen --brokers "127.0.0.1:$kport" --topic bench --producers 16 --idempotent --duration 25s ${LOADGEN_ARGS:-} | tail -8
    wait "$prof"
    [ -z "$gwperf" ] || wait "$gwperf"
    echo "# profile: node pid $node, topic ${2:-diskless}, 15 s CPU profile from the 5th second: $out"
  fi
  curl -s "http://127.0.0.1:$mport/metrics" | grep -iE '^inlet_(diskless|fsync_duration|group_commit_duration|remote_upload)' | sed 's/^/# metrics: /' || true
  # The node's page faults and CPU over its life (fields 10, 12, 14 and 15 of /proc/PID/stat):
  # on a VM a fresh page can cost tens of microseconds, which shows in a profile as memmove.
  awk -v hz="$(getconf CLK_TCK)" '{printf "# node: minor faults %d, major faults %d, CPU %.1f s (user %.1f, system %.1f)\n", $10, $12, ($14 + $15) / hz, $14 / hz, $15 / hz}' "/proc/$node/stat"
  [ -z "${GODEBUG:-}" ] || echo "# node: GC cycles $(grep -c '^gc ' "$work/$mode-server.log") (GODEBUG=$GODEBUG)"
  kill -TERM "$node"; [ -z "${KEEP_SERVER_LOG:-}" ] || cp "$work/$mode-server.log" "$KEEP_SERVER_LOG"
  wait "$node"
  rc=$?
  node=
  ;;
cores)
  rounds=${1:-3}
  secs=${2:-60}
  rate=${3:-}
  [ "$secs" -ge 30 ] || { echo "cores: SECONDS must be at least 30" >&2; exit 2; }
  # ticks PID: its utime + stime, in clock ticks.
  ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  hz=$(getconf CLK_TCK)
  echo "# cores: $rounds rounds of inlet-local, inlet-diskless, inlet-diskless-notier, one at a time, ${secs} s $([ -n "$rate" ] && echo "at $rate records/s" || echo "flat out") each; window from the 15th second to $((secs - 5))"
  echo "# run target records_per_s node_cores gw_cores loadgen_cores node_cpu_s_per_M gw_cpu_s_per_M loadgen_cpu_s_per_M"
  for r in $(seq "$rounds"); do
    for target in inlet-local inlet-diskless inlet-diskless-notier; do
      dir="$work/inlet-bench-cores-$r-$target/data"
      mkdir -p "$dir"
      kport=$(free)
      mport=$(free)
      cmd=${node_cmd//\{port\}/$kport}
      cmd=${cmd//\{dir\}/$dir}
      case $target in
      inlet-diskless) cmd="$cmd --log-diskless-enable" ;;
      inlet-diskless-notier) cmd="$cmd --log-diskless-enable --remote-object-bytes 4GiB --remote-upload-interval-ms 600000" ;;
      esac
      # node.sh removes what the run before left in the bucket, then execs the node (one pid
      # throughout; the shell expands the command's prefix).
      sh -c "exec bash $work/node.sh $cmd --metrics-listen 127.0.0.1:$mport" >"$work/cores-server.log" 2>&1 &
      node=$!
      for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$kport") 2>/dev/null && break; sleep 0.1; done
      bin/loadgen --brokers "127.0.0.1:$kport" --topic bench --producers 16 --idempotent --duration "${secs}s" ${rate:+--rate $rate} >"$work/cores-loadgen.txt" 2>&1 &
      lg=$!
      # snap: seconds since the epoch, the node's, versitygw's and loadgen's ticks, and the
      # records made so far.
      snap() {
        echo "$(date +%s.%N) $(ticks "$node") $(ticks "$gw") $(ticks "$lg") $(curl -s "http://127.0.0.1:$mport/metrics" | awk '/^inlet_partition_high_watermark/ {s += $2} END {printf "%d", s}')"
      }
      sleep 15
      kill -0 "$node" 2>/dev/null || { echo "$target did not start:" >&2; cat "$work/cores-server.log" >&2; exit 1; }
      a=$(snap)
      sleep $((secs - 20))
      b=$(snap)
      wait "$lg"
      grep -E '^(records|errors)' "$work/cores-loadgen.txt" | sed "s/^/# $target round $r: /"
      kill -TERM "$node"
      wait "$node"
      node=
      rm -rf "$work/inlet-bench-cores-$r-$target"
      echo "$a $b" | awk -v run="$r" -v t="$target" -v hz="$hz" '{
        dt = $6 - $1; rec = $10 - $5
        n = ($7 - $2) / hz; g = ($8 - $3) / hz; l = ($9 - $4) / hz
        printf "run %d %s %.0f %.2f %.2f %.2f %.3f %.3f %.3f\n", run, t, rec / dt, n / dt, g / dt, l / dt, n / rec * 1e6, g / rec * 1e6, l / rec * 1e6
      }' | tee -a "$work/cores.txt"
    done
  done
  # Medians per target of each column.
  echo "# median over the rounds: target records_per_s node_cores gw_cores loadgen_cores node_cpu_s_per_M gw_cpu_s_per_M loadgen_cpu_s_per_M"
  for target in inlet-local inlet-diskless inlet-diskless-notier; do
    line="median $target"
    for c in 4 5 6 7 8 9 10; do
      line="$line $(awk -v t="$target" -v c="$c" '$3 == t {print $c}' "$work/cores.txt" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')"
    done
    echo "$line"
  done
  rc=0
  ;;
*)
  echo "unknown mode $mode (produce, latency, idle, steady, cores or profile)" >&2
  exit 2
  ;;
esac
set -e
# utime + stime (fields 14 and 15 of /proc/PID/stat) over CLK_TCK.
read -r ut st < <(awk '{print $14, $15}' "/proc/$gw/stat")
echo "# versitygw CPU over the whole script: $(awk -v t=$((ut + st)) -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t / hz}') s"
# The access log is complete once versitygw has stopped.
kill "$gw"
wait "$gw" 2>/dev/null || true
[ -z "${KEEP_ACCESS_LOG:-}" ] || cp "$work/access.log" "$KEEP_ACCESS_LOG"
# Requests per node: access log lines are `- BUCKET [DD/Month/YYYY:HH:MM:SS +0000] IP - ID s3_OP KEY ...`;
# a node's keys start with its prefix. Rates are over the node's span in the log (first to last
# request, whole seconds), so they include its start and stop. The log stamps a request when it
# ends: PUTs started at least 100 ms apart (the node's bound) but of different lengths can end
# more than ten to a second.
echo "# requests per node (versitygw access log): node span_s PUT GET other PUT/s GET/s; commit object PUTs, a second, most in one second"
awk '$8 ~ /^s3_/ {
  split($9, k, "/"); p = k[1]
  if (p !~ /^inlet-bench-/) { unk[$8]++; next }
  t = $3; sub(/^\[/, "", t); split(t, a, ":"); s = a[2] * 3600 + a[3] * 60 + a[4]
  if (!(p in first)) first[p] = s
  last[p] = s
  if ($8 == "s3_PutObject") put[p]++; else if ($8 == "s3_GetObject") get[p]++; else other[p]++
  if ($8 == "s3_PutObject" && $9 ~ /\/diskless\/log\//) { logput[p]++; if (++persec[p, s] > most[p]) most[p] = persec[p, s] }
} END {
  for (p in first) {
    span = last[p] - first[p] + 1
    printf "# node %s %d %d %d %d %.2f %.2f; %d %.2f %d\n", p, span, put[p], get[p], other[p], put[p] / span, get[p] / span, logput[p], logput[p] / span, most[p]
  }
  for (o in unk) printf "# not by a node key prefix (bucket-level calls): %s %d\n", o, unk[o]
}' "$work/access.log" | sort
# The same requests by operation and kind of key: commit objects (log), checkpoints, the
# lease, topic descriptions (json) and the remote tier's objects (tier), each with its count
# and its rate over the node's span.
echo "# requests per node by kind: node op kind count per_s"
awk '$8 ~ /^s3_/ {
  split($9, k, "/"); p = k[1]
  if (p !~ /^inlet-bench-/) next
  t = $3; sub(/^\[/, "", t); split(t, a, ":"); s = a[2] * 3600 + a[3] * 60 + a[4]
  if (!(p in first)) first[p] = s
  last[p] = s
  kind = "tier"
  if ($9 ~ /\/diskless\/log\//) kind = "log"
  else if ($9 ~ /\/diskless\/checkpoint\//) kind = "checkpoint"
  else if ($9 ~ /writer\.lease$/) kind = "lease"
  else if ($9 ~ /\.json$/) kind = "json"
  else if ($9 !~ /\/[0-9]+-[0-9]+-e[0-9]+$/) kind = "other"
  op = $8; sub(/^s3_/, "", op)
  n[p, op, kind]++
} END {
  for (x in n) {
    split(x, f, SUBSEP)
    printf "# kind %s %s %s %d %.3f\n", f[1], f[2], f[3], n[x], n[x] / (last[f[1]] - first[f[1]] + 1)
  }
}' "$work/access.log" | sort
cat "$work"/bucket-*.txt 2>/dev/null
for d in "$work/gw/$bucket"/*/; do
  [ -d "$d" ] || continue
  printf '# bucket: %s %.1f MiB in %d objects\n' "$(basename "$d")" "$(du -sb "$d" | awk '{print $1 / 1048576}')" "$(find "$d" -type f | wc -l)"
done
exit $rc
