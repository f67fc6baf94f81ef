# Sourced by the bucket benchmarks (diskless-bench.sh, diskless-restore-bench.sh,
# tier-bench.sh): starts one versitygw (posix backend) on a free loopback port with a bucket
# named $bucket under $work/gw, waits until it answers, and on exit ends it (and the node in
# $node, if one is set) by its pid and removes $work. With VERSITYGW_ACCESS_LOG set, its access
# log goes to that file. Sets gw (its pid) and endpoint, and exports the credentials the nodes
# and versitygw share.
mkdir -p "$work/gw/$bucket" # versitygw's posix backend: a bucket is a directory
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export AWS_ACCESS_KEY_ID=benchaccess AWS_SECRET_ACCESS_KEY=benchsecret0123456789 AWS_REGION=us-east-1
gwargs=(--port "127.0.0.1:$port" --quiet)
[ -z "${VERSITYGW_ACCESS_LOG:-}" ] || gwargs+=(--access-log "$VERSITYGW_ACCESS_LOG")
ROOT_ACCESS_KEY=$AWS_ACCESS_KEY_ID ROOT_SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
  ROOT_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID ROOT_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
  "${VERSITYGW:-$(go env GOPATH)/bin/versitygw}" "${gwargs[@]}" posix "$work/gw" >"$work/versitygw.log" 2>&1 &
gw=$!
node=
cleanup() {
  [ -z "$node" ] || kill "$node" 2>/dev/null || true
  kill "$gw" 2>/dev/null || true
  wait "$gw" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.1
done
curl -s -o /dev/null "http://127.0.0.1:$port/" || { echo "versitygw did not answer:" >&2; cat "$work/versitygw.log" >&2; exit 1; }
endpoint="http://127.0.0.1:$port"
echo "# versitygw ${VERSITYGW:-$(go env GOPATH)/bin/versitygw} on $endpoint, pid $gw, posix backend in $work/gw${VERSITYGW_ACCESS_LOG:+, access log on}"
