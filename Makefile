# Inlet. `make demo` runs the main job; `make test` runs every test (set-up included).
GO ?= go

.PHONY: all build demo test test-short race fuzz franz-go-suite bench-produce bench-writeamp bench-recovery bench-space bench-compaction bench chaos profile setup clean

all: build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
build:
	mkdir -p bin
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/inlet ./cmd/inlet
	$(GO) build -o bin/loadgen ./cmd/loadgen

setup:
	scripts/setup.sh

demo: setup
	scripts/demo.sh

# Every test, then the race detector on the concurrent packages, then each fuzz target for a
# fixed number of executions beyond its seed corpus (a count, not a duration: a time limit that
# expires while a worker minimizes makes `go test -fuzz` fail with "context deadline exceeded").
test: setup
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 25m ./...
	$(GO) test -count=1 -race -timeout 10m ./idem/ ./batchlog/... ./meta/ ./server/... ./conn/ ./wire/ ./auth/ ./e2e/ ./groups/... ./tenants/ ./quota/ ./txn/ ./transport/ ./acl/ ./httplimit/ ./segfs/ ./tier/ ./objstore/... ./diskless/... ./lease/
	scripts/franz-go-suite.sh
	KILL_EVERY=2 KILLS=5 scripts/franz-go-suite.sh -test.run '^TestTxnEtl$$' -test.count 2
	$(MAKE) fuzz FUZZTIME=200000x PROTOFUZZ_EXECS=2000

# franz-go's kgo integration tests against a fresh node (make test runs TestTxnEtl a second
# time with the node SIGKILLed 5 times behind HAProxy: KILL_EVERY in the script).
franz-go-suite:
	scripts/franz-go-suite.sh

test-short:
	$(GO) test -count=1 -short ./...

# The Go fuzz targets of every decoder, then the protocol fuzzer over TCP (e2e's
# TestProtocolFuzzOverTCP: the real server under the race detector, mutated pipelines of every
# API and the hostile shapes, with a bystander client that must be answered within 1 s; make
# test runs it with its default of 400 executions too). PROTOFUZZ_SHAPES: all, or some of
# mutate,park,unread,half,names,batch; PROTOFUZZ_SEED reruns a failure (0: from the clock).
FUZZTIME ?= 30s
PROTOFUZZ_EXECS ?= 20000
PROTOFUZZ_SHAPES ?= all
PROTOFUZZ_SEED ?= 0
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzState$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./idem/
	$(GO) test -run '^$$' -fuzz '^FuzzProduceDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzParseRequestHeader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzValidateProduceBatch$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzForEachRecord$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzControlBatchType$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzCleanString$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzOffsetKey$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./meta/
	$(GO) test -run '^$$' -fuzz '^FuzzCommittedOffset$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./meta/
	$(GO) test -run '^$$' -fuzz '^FuzzConsumerKey$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./meta/
	$(GO) test -run '^$$' -fuzz '^FuzzConsumerHeartbeats$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./groups/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./diskless/
	$(GO) test -run '^$$' -fuzz '^FuzzGroupOp$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./diskless/
	$(GO) test -run '^$$' -fuzz '^FuzzTxnOp$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./diskless/
	$(GO) test -run '^$$' -fuzz '^FuzzGroupWrite$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./diskless/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePlain$$' -fuzztime $(FUZZTIME) ./auth/
	$(GO) test -run '^$$' -fuzz '^FuzzScramExchange$$' -fuzztime $(FUZZTIME) ./auth/
	$(GO) test -run '^$$' -fuzz '^FuzzAuthorize$$' -fuzztime $(FUZZTIME) ./acl/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./config/
	$(GO) test -run '^$$' -fuzz '^FuzzAvroAgreesWithHamba$$' -fuzztime $(FUZZTIME) ./schema/
	$(GO) test -run '^$$' -fuzz '^FuzzParseFooter$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./tier/
	$(GO) test -run '^$$' -fuzz '^FuzzParseObjectKey$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./tier/
	$(GO) test -run '^$$' -fuzz '^FuzzMemoryReadAt$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./objstore/
	$(GO) test -run '^$$' -fuzz '^FuzzLocalRetention$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./topicconfig/
	$(GO) test -count=1 -race -timeout 30m -run '^TestProtocolFuzzOverTCP$$' ./e2e/ -protofuzz.execs=$(PROTOFUZZ_EXECS) -protofuzz.shapes=$(PROTOFUZZ_SHAPES) -protofuzz.seed=$(PROTOFUZZ_SEED)

# Allocations and time per produce request through decode, validate, commit and reply.
bench-produce:
	$(GO) test -run '^$$' -bench 'BenchmarkProducePath' -benchmem -benchtime 5s ./server/

# Bytes written to disk per byte acknowledged over a 60 s run of the batch log.
bench-writeamp:
	$(GO) test -run '^$$' -bench 'BenchmarkWriteAmplification' -benchtime 60s -timeout 10m ./batchlog/

# Start-up (Open) after a crash-like close of 64 MiB, 256 MiB and 1 GiB segment logs.
bench-recovery:
	$(GO) test -run '^$$' -bench BenchmarkRecovery -benchtime 5x ./batchlog/

# Produce throughput beside a compacted topic being compacted, against the same load without
# the passes (10 s each, three times).
bench-compaction:
	$(GO) test -run '^$$' -bench BenchmarkProduceBesideCompaction -benchtime 1x -count 3 -timeout 10m ./batchlog/upkeep/

# Disk bytes held against bytes retained: a firehose with 3 s retention beside a 7-day topic,
# with and without copying live batches forward (20 s each).
bench-space:
	$(GO) test -run '^$$' -bench BenchmarkMixedRetentionSpace -benchtime 1x -timeout 5m ./batchlog/upkeep/

# The benchmark harness (bench/, cmd/bench): a sweep of inlet's --workers, inlet against
# inlet-discard, kfake and kfake-sync (alternating), ack latency at 25/50/75% of the flat-out
# rate, then BENCHMARKS.md and results/*.svg from every results/*.json. Each run starts a fresh
# broker on a fresh data directory. Sized for about five minutes on a 2-core machine; for the
# published figures use longer runs, e.g. make bench BENCH_DURATION=20s BENCH_REPEAT=3
# BENCH_WORKERS=1,2,4,8,16. BENCH_FLAGS is added to every measuring run (e.g. --plain).
BENCH_DURATION ?= 8s
BENCH_REPEAT ?= 2
BENCH_WORKERS ?= 1,2,4
BENCH_FLAGS ?=
bench: build
	$(GO) build -o bin/bench ./cmd/bench
	$(GO) build -o bin/kfake-broker ./cmd/kfake-broker
	bin/bench sweep --inlet-bin bin/inlet --workers $(BENCH_WORKERS) --producers 16 --record-size 100 --duration $(BENCH_DURATION) --repeat $(BENCH_REPEAT) $(BENCH_FLAGS)
	bin/bench compare --inlet-bin bin/inlet --kfake-bin bin/kfake-broker --producers 16 --record-size 100 --duration $(BENCH_DURATION) --repeat $(BENCH_REPEAT) $(BENCH_FLAGS)
	bin/bench latency --inlet-bin bin/inlet --of flat --rates 0.25,0.5,0.75 --producers 16 --record-size 100 --duration $(BENCH_DURATION) $(BENCH_FLAGS)
	bin/bench report

# kill -9 under load: 16 idempotent producers for 60 s while inlet is SIGKILLed about every 3 s
# and restarted on the same data directory; fails unless every acknowledged record is read back
# exactly once. CHAOS_FLAGS adds flags (e.g. --plain, --rate 200000).
CHAOS_FLAGS ?=
chaos: build
	$(GO) build -o bin/bench ./cmd/bench
	bin/bench chaos --inlet-bin bin/inlet --kill-every 3s --duration 60s --producers 16 $(CHAOS_FLAGS)
	bin/bench report

# CPU and allocation profiles of inlet under the standard load (16 idempotent producers, flat
# out): profiles/cpu-<date>.pprof, profiles/mem-<date>.pprof, their `go tool pprof -top` text,
# and a line in profiles/README.md with the command.
PROFILE_DURATION ?= 20s
profile: build
	$(GO) build -o bin/bench ./cmd/bench
	bin/bench profile --inlet-bin bin/inlet --producers 16 --duration $(PROFILE_DURATION)

clean:
	rm -rf bin
