# Inlet. `make demo` runs the main job; `make test` runs every test (set-up included).
GO ?= go

.PHONY: all build demo test test-short race fuzz bench-produce bench-writeamp setup clean

all: build

build:
	mkdir -p bin
	$(GO) build -o bin/inlet ./cmd/inlet
	$(GO) build -o bin/loadgen ./cmd/loadgen

setup:
	scripts/setup.sh

demo: setup
	scripts/demo.sh

# Every test, then the race detector on the concurrent packages, then each fuzz target for a
# few seconds beyond its seed corpus.
test: setup
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...
	$(GO) test -count=1 -race -timeout 10m ./idem/ ./batchlog/ ./server/ ./wire/
	$(MAKE) fuzz FUZZTIME=5s

test-short:
	$(GO) test -count=1 -short ./...

FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzState$$' -fuzztime $(FUZZTIME) ./idem/
	$(GO) test -run '^$$' -fuzz '^FuzzProduceDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzParseRequestHeader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzValidateProduceBatch$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/
	$(GO) test -run '^$$' -fuzz '^FuzzForEachRecord$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./wire/

# Allocations and time per produce request through decode, validate, commit and reply.
bench-produce:
	$(GO) test -run '^$$' -bench 'BenchmarkProducePath' -benchmem -benchtime 5s ./server/

# Bytes written to disk per byte acknowledged over a 60 s run of the batch log.
bench-writeamp:
	$(GO) test -run '^$$' -bench 'BenchmarkWriteAmplification' -benchtime 60s -timeout 10m ./batchlog/

clean:
	rm -rf bin
