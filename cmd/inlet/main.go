// Command inlet runs one Inlet node: a Kafka-protocol ingest broker on gnet and Pebble.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"inlet/batchlog"
	"inlet/config"
	"inlet/server"
)

func main() {
	var (
		listen            = flag.String("listen", "127.0.0.1:9092", "Kafka listener host:port")
		advertise         = flag.String("advertise", "", "host:port clients are told to connect to (default: the listen address)")
		dataDir           = flag.String("data-dir", "./data", "Pebble data directory")
		storage           = flag.String("storage", "segments", "segments (record data in append-only segment files, index and metadata in Pebble), pebble (record data as Pebble values), or discard (acknowledge without storing: a benchmark ceiling only)")
		segmentBytes      = flag.String("segment-bytes", "256MiB", "size at which a new segment file is started (--storage segments)")
		segmentIO         = flag.String("segment-io", "direct", "how segment files are written: direct (O_DIRECT from a staging buffer, where the file system allows it) or buffered (pwritev through the page cache)")
		workers           = flag.Int("workers", runtime.NumCPU(), "gnet event loops")
		nodeID            = flag.Int("node-id", 1, "broker node id")
		defaultPartitions = flag.Int("default-partitions", 16, "partitions of auto-created topics")
		autoCreate        = flag.Bool("auto-create-topics", true, "create unknown topics on produce or metadata requests")
		maxRequest        = flag.String("max-request-bytes", "100MiB", "largest request frame accepted (checked before allocating)")
		maxMessage        = flag.String("max-message-bytes", "1048588", "largest record batch accepted (Kafka's message.max.bytes)")
		budget            = flag.String("inflight-budget", "256MiB", "bytes read from sockets but not yet committed; when full, sockets are not read")
		groupBytes        = flag.String("max-group-bytes", "16MiB", "record bytes in one group commit")
		logLevel          = flag.String("log-level", "info", "debug, info, warn or error")
		cpuProfile        = flag.String("cpu-profile", "", "write a CPU profile of the whole run to this file (stopped at shutdown)")
		memProfile        = flag.String("mem-profile", "", "write an allocation profile to this file at shutdown")
		registryListen    = flag.String("registry-listen", "", "host:port of the read-only schema registry (HTTP); empty: not served")
		sessionLifetime   = flag.Duration("sasl-session-lifetime", 0, "SASL sessions expire after this and clients re-authenticate (KIP-368); 0: never")
		configPath        = flag.String("config", "", "YAML configuration file (examples/secure.yaml); flags given explicitly override it")
	)
	if len(os.Args) > 1 && os.Args[1] == "scram" {
		os.Exit(scramCommand(os.Args[2:]))
	}
	flag.Parse()
	sec := applyConfig(*configPath)

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		usage("--log-level: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)

	opts := batchlog.Options{Dir: *dataDir, Logger: logger, MaxGroupBytes: int(mustSize("max-group-bytes", *groupBytes)), SegmentBytes: mustSize("segment-bytes", *segmentBytes)}
	switch *segmentIO {
	case "direct":
	case "buffered":
		opts.BufferedSegments = true
	default:
		usage("--segment-io must be direct or buffered, not %q", *segmentIO)
	}
	switch *storage {
	case batchlog.LayoutSegments, batchlog.LayoutPebble:
		opts.Layout = *storage
	case "discard":
		opts.Discard = true
		logger.Warn("storage=discard: produce requests are acknowledged and thrown away")
	default:
		usage("--storage must be segments, pebble or discard, not %q", *storage)
	}
	blog, err := batchlog.Open(opts)
	if err != nil {
		logger.Error("open log", "err", err)
		os.Exit(1)
	}
	srv, err := server.Start(server.Config{
		Listen:            *listen,
		Advertise:         *advertise,
		NodeID:            int32(*nodeID),
		Workers:           *workers,
		DefaultPartitions: *defaultPartitions,
		AutoCreateTopics:  *autoCreate,
		MaxRequestBytes:   int(mustSize("max-request-bytes", *maxRequest)),
		MaxMessageBytes:   int(mustSize("max-message-bytes", *maxMessage)),
		InflightBudget:    mustSize("inflight-budget", *budget),
		Logger:            logger,
		Listeners:         sec.listeners(*listen, *advertise),
		Users:             sec.Users,
		SessionLifetime:   *sessionLifetime,
		Schemas:           sec.Schemas,
	}, blog)
	if err != nil {
		logger.Error("start", "err", err)
		blog.Close()
		os.Exit(1)
	}

	stopRegistry := startRegistry(logger, *registryListen, sec.Schemas)
	stopProfiles := startProfiles(logger, *cpuProfile, *memProfile)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	got := <-sig
	logger.Info("draining", "signal", got.String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := 0
	stopRegistry(ctx)
	if err := srv.Shutdown(ctx); err != nil {
		logger.Error("shutdown", "err", err)
		code = 1
	}
	if err := blog.Close(); err != nil {
		logger.Error("close log", "err", err)
		code = 1
	}
	stopProfiles()
	logger.Info("stopped")
	os.Exit(code)
}

// startProfiles starts the CPU profile and returns the function that ends it and writes the
// allocation profile.
func startProfiles(logger *slog.Logger, cpuPath, memPath string) func() {
	var cpuFile *os.File
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			logger.Error("cpu profile", "err", err)
		} else {
			cpuFile = f
		}
	}
	return func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		if memPath != "" {
			f, err := os.Create(memPath)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				logger.Error("mem profile", "err", err)
			}
		}
	}
}

// mustSize parses a byte count with an optional KiB/MiB/GiB (or K/M/G, also powers of two)
// suffix.
func mustSize(name, v string) int64 {
	n, err := config.ParseSize(v)
	if err != nil {
		usage("--%s: %v", name, err)
	}
	return n
}

func usage(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "inlet: "+f+"\n", a...)
	os.Exit(2)
}
