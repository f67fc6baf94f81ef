#!/usr/bin/env bash
# franz-go's own kgo integration tests against a fresh Inlet node.
#
# The test binary is built from the module cache's copy of github.com/twmb/franz-go/pkg/kgo
# at the version in go.mod and run from that package's source directory (a few tests read
# sibling files). KGO_SEEDS points it at the node; KGO_TEST_RF=1 because the node is a
# one-broker cluster. Tests that need no broker (unit tests) run too.
#
# The node runs with group.initial.rebalance.delay.ms 0: Kafka's 3 s wait for more members of a
# new group would only slow the group tests down.
#
# KILL_EVERY=N (seconds) SIGKILLs the node every N to 2N seconds while the tests run and restarts
# it on the same data directory (KILLS, default 4, bounds how many times); the run fails if the
# node was never killed. The node then sits behind HAProxy in TCP mode, as in a deployment
# (docs/operations.md, "Many nodes behind one address"), and advertises the proxy's address: HAProxy
# retries a refused backend connection, so clients that reconnect while the node restarts
# wait for it instead of failing their dial (the kgo tests take any such error as fatal).
#
# SUITE_LOG=FILE keeps the suite's whole output there (and the node's log in FILE.inlet).
#
# Usage: [KILL_EVERY=N] scripts/franz-go-suite.sh [extra go test flags, e.g. -test.run TestGroupETL]
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}

# Nothing is skipped: every test of the suite runs, TestTxnEtl (transactions) included. SKIP
# (a -test.skip pattern) can leave tests out by hand.
SKIP=${SKIP:-}

work=$(mktemp -d)
killer_pid=
haproxy_pid=
cleanup() {
	if [[ -n $killer_pid ]]; then
		kill "$killer_pid" 2>/dev/null || true
		wait "$killer_pid" 2>/dev/null || true
	fi
	if [[ -n $haproxy_pid ]]; then
		kill "$haproxy_pid" 2>/dev/null || true
		wait "$haproxy_pid" 2>/dev/null || true
	fi
	if [[ -s $work/inlet.pid ]]; then
		kill "$(cat "$work/inlet.pid")" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

$GO mod download github.com/twmb/franz-go
src=$($GO list -m -f '{{.Dir}}' github.com/twmb/franz-go)/pkg/kgo
version=$($GO list -m -f '{{.Version}}' github.com/twmb/franz-go)
echo "franz-go $version: building the kgo test binary"
$GO test -c -o "$work/kgo.test" github.com/twmb/franz-go/pkg/kgo
$GO build -o "$work/inlet" ./cmd/inlet

# Free loopback ports: the one the tests use, and the node's own behind HAProxy (KILL_EVERY).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
node_port=$port
if [[ -n ${KILL_EVERY:-} ]]; then
	node_port=$(free_port)
	haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
	cat >"$work/haproxy.cfg" <<CFG
defaults
    mode tcp
    timeout connect 250ms
    timeout client 120s
    timeout server 120s
    retries 20
frontend kafka
    bind 127.0.0.1:$port
    default_backend inlet
backend inlet
    server n1 127.0.0.1:$node_port
CFG
	"$haproxy" -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
	haproxy_pid=$!
fi
start_inlet() {
	"$work/inlet" --listen "127.0.0.1:$node_port" --advertise "127.0.0.1:$port" --data-dir "$work/data" --log-level warn --group-initial-rebalance-delay-ms 0 >>"$work/inlet.log" 2>&1 &
	echo $! >"$work/inlet.pid"
	for _ in $(seq 50); do
		if (exec 3<>/dev/tcp/127.0.0.1/$node_port) 2>/dev/null; then break; fi
		sleep 0.1
	done
}
start_inlet
if [[ -n ${KILL_EVERY:-} ]]; then
	(
		for _ in $(seq "${KILLS:-4}"); do
			sleep $((KILL_EVERY + RANDOM % (KILL_EVERY + 1)))
			pid=$(cat "$work/inlet.pid")
			kill -KILL "$pid" 2>/dev/null || exit 0
			while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
			echo kill >>"$work/kills"
			sleep 0.3
			start_inlet
		done
	) &
	killer_pid=$!
	echo "KILL_EVERY=$KILL_EVERY: SIGKILL and restart the node every $KILL_EVERY to $((2 * KILL_EVERY)) s, at most ${KILLS:-4} times, behind HAProxy"
fi

echo "running the kgo suite against 127.0.0.1:$port${SKIP:+ (skipping $SKIP)}"
status=0
(cd "$src" && KGO_SEEDS="127.0.0.1:$port" KGO_TEST_RF=1 KGO_LOG_LEVEL=${KGO_LOG_LEVEL:-none} \
	"$work/kgo.test" -test.v -test.timeout 8m -test.skip "$SKIP" "$@") >"$work/suite.log" 2>&1 || status=$?
# Top-level results: every test that talks to the broker is listed by name.
grep -E '^--- (PASS|FAIL|SKIP)' "$work/suite.log" | awk '{print $2, $3}' | sort | uniq -c | awk '$1>0{print $2, $3}' >"$work/results"
echo "passed: $(grep -c '^PASS:' "$work/results" || true), failed: $(grep -c '^FAIL:' "$work/results" || true), skipped by the suite itself: $(grep -c '^SKIP:' "$work/results" || true)"
grep -E '^FAIL:|^PASS: TestGroupETL' "$work/results" || true
grep -E '^(FAIL|ok|PASS|panic)' "$work/suite.log" | tail -3 || true
if [[ -n ${KILL_EVERY:-} ]]; then
	kills=$(wc -l <"$work/kills" 2>/dev/null || echo 0)
	echo "the node was killed (SIGKILL) and restarted $kills times during the run"
	if [[ $kills -eq 0 && $status -eq 0 ]]; then
		echo "the node was never killed: the run proved nothing"
		status=1
	fi
fi
if [[ -n ${SUITE_LOG:-} ]]; then
	cp "$work/suite.log" "$SUITE_LOG"
	cp "$work/inlet.log" "$SUITE_LOG.inlet"
fi
if [[ $status -ne 0 ]]; then
	echo "kgo suite failed (exit $status); its failures and errors:"
	grep -E -- '--- FAIL|unexpected|panic:|_test\.go:[0-9]+: .*(err|ERR|unable|fail)' "$work/suite.log" | grep -v 'NOT DELETING' | head -40 || true
	echo "last lines:"
	grep -v '^\[' "$work/suite.log" | tail -40
	echo "inlet log:"
	tail -20 "$work/inlet.log"
fi
exit $status
