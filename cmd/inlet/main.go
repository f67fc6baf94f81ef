// Command inlet runs one Inlet node: a Kafka-protocol ingest broker on gnet and Pebble.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"inlet/batchlog"
	"inlet/batchlog/upkeep"
	"inlet/bytesize"
	"inlet/conn"
	"inlet/meta"
	"inlet/server"
	"inlet/tier"
)

func main() {
	runSubcommand()
	fs, o := flagsOrExit()
	sec := applyConfig(fs, *o.config)
	logger := newLogger(*o.logLevel)

	mon := startMonitor(logger, *o.metricsListen, *o.pprof)
	opts := batchlog.Options{Dir: *o.dataDir, Logger: logger, MaxGroupBytes: int(mustSize("max-group-bytes", *o.groupBytes)), SegmentBytes: mustSize("segment-bytes", *o.segmentBytes), Observer: mon.observer(),
		MinFreeBytes: mustSizeOrZero("min-free-bytes", *o.minFreeBytes), FetchCacheBytes: mustSizeOrZero("fetch-cache", *o.fetchCache)}
	if opts.FetchCacheBytes == 0 {
		opts.FetchCacheBytes = -1 // --fetch-cache 0: none (0 is the log's default size)
	}
	opts.MaxProducerWindows, opts.MaxProducerWindowsPerPrincipal = noBoundIfZero(*o.maxProducerIDs), *o.maxProducerIDsPerPrincipal
	switch *o.segmentIO {
	case "direct":
	case "buffered":
		opts.BufferedSegments = true
	default:
		usage("--segment-io must be direct or buffered, not %q", *o.segmentIO)
	}
	switch *o.storage {
	case batchlog.LayoutSegments, batchlog.LayoutPebble:
		opts.Layout = *o.storage
	case "discard":
		opts.Discard = true
		logger.Warn("storage=discard: produce requests are acknowledged and thrown away")
	default:
		usage("--storage must be segments, pebble or discard, not %q", *o.storage)
	}
	upkeepCfg := upkeep.Config{ProducerIDExpiration: msFlag(*o.producerIDExpirationMs), RetentionCheckInterval: msFlag(*o.logRetentionCheckIntervalMs), Logger: logger}
	perIPOverrides, err := conn.ParsePerIPOverrides(*o.maxConnectionsPerIPOverrides)
	if err != nil {
		usage("--max-connections-per-ip-overrides: %v", err)
	}
	superUsers, err := server.ParseSuperUsers(*o.superUsers)
	if err != nil {
		usage("--super-users: %v", err)
	}
	protocols, consumerGroups, err := server.ConsumerGroupSettings(*o.rebalanceProtocols, *o.consumerAssignors,
		*o.consumerSessionTimeoutMs, *o.consumerHeartbeatIntervalMs, *o.consumerMaxSize)
	if err != nil {
		usage("%v", err)
	}
	if err := server.ConsumerGroupBounds(&consumerGroups, *o.maxConsumerMembersPerPrincipal, *o.maxSubscribedTopicsPerMember, *o.maxRegexesPerGroup); err != nil {
		usage("%v", err)
	}
	rs := o.remote()
	cluster, err := parseClusterNodes(*o.clusterNodes, *o.nodeID, rs != nil)
	if err != nil {
		usage("%v", err)
	}
	mon.disklessObserver(rs)
	mon.watchFollower(rs)
	listeners := sec.listeners(*o.listen, *o.advertise)
	maxConns := maxConnections(logger, *o.maxConnections, *o.dataDir, *o.workers)
	memoryLimit(logger, o, rs, conn.AnySASL(listeners))
	if rs != nil && rs.standby && !standBy(logger, rs, *o.dataDir, frontConfig(logger, o, listeners, cluster, maxConns, protocols), mon) {
		mon.stop(context.Background())
		os.Exit(0)
	}
	blog, srv, remote := openNode(logger, opts, rs, server.Config{
		Listen:            *o.listen,
		Advertise:         *o.advertise,
		NodeID:            int32(*o.nodeID),
		Workers:           *o.workers,
		DefaultPartitions: *o.defaultPartitions,
		AutoCreateTopics:  *o.autoCreate,
		MaxRequestBytes:   int(mustSize("max-request-bytes", *o.maxRequest)),
		MaxMessageBytes:   int(mustSize("max-message-bytes", *o.maxMessage)),
		InflightBudget:    mustSize("inflight-budget", *o.budget),
		Logger:            logger,
		Listeners:         listeners,
		Users:             sec.Users,
		SessionLifetime:   *o.sessionLifetime,
		Schemas:           sec.Schemas,
		Quotas:            sec.Quotas,

		MaxConnections:               maxConns,
		MaxConnectionCreationRate:    connectionRate(*o.maxConnectionCreationRate),
		MaxConnectionsPerIP:          *o.maxConnectionsPerIP,
		MaxConnectionsPerIPOverrides: perIPOverrides,
		SuperUsers:                   superUsers,
		AllowEveryoneIfNoACLFound:    *o.allowEveryoneIfNoACLFound,
		ConnectionsMaxIdle:           msFlag(*o.connectionsMaxIdleMs),
		SaslServerMaxReceiveSize:     int(mustSize("sasl-server-max-receive-size", *o.saslMaxReceive)),
		SaslServerMaxInflightBytes:   mustSize("sasl-server-max-inflight-bytes", *o.saslMaxInflight),
		FetchMaxBytes:                int(mustSize("fetch-max-bytes", *o.fetchMaxBytes)),
		FailedAuthenticationDelay:    msFlag(*o.failedAuthDelayMs),
		GroupInitialRebalanceDelay:   msFlag(*o.groupInitialRebalanceDelayMs),
		OffsetsRetention:             minutesFlag(*o.offsetsRetentionMinutes),
		TransactionalIDExpiration:    msFlag(*o.transactionalIDExpirationMs),
		Upkeep:                       upkeepCfg,
		Metrics:                      mon.requests(),
		MaxPartitions:                noBoundIfZero(*o.maxPartitions),
		MaxPartitionsPerPrincipal:    *o.maxPartitionsPerPrincipal,
		MaxGroupsPerPrincipal:        *o.maxGroupsPerPrincipal,
		MaxGroups:                    noBoundIfZero(*o.maxGroups),
		RebalanceProtocols:           protocols,
		ConsumerGroups:               consumerGroups,
		Writable:                     writableGate(rs),
		Fenced:                       fencedGate(rs),
		Nodes:                        cluster,
		LeaderEpoch:                  leaderEpochGate(rs),
	})
	if remote != nil {
		upkeepCfg.Tier = remote
		remote.Start()
	}
	passes := upkeep.Start(blog, upkeepCfg)

	stopRegistry := startRegistry(logger, *o.registryListen, sec.Schemas, sec.RegistryTLS)
	stopProfiles := startProfiles(logger, *o.cpuProfile, *o.memProfile)
	mon.watchLease(rs)
	mon.watchDiskless(rs)
	mon.ready(blog, srv, remote)
	mon.tookOver(logger, rs)

	got, fenced := waitForStop(logger, srv, *o.config, fencedWhileStandby(rs))
	if fenced {
		// Nothing a fenced node does can be acknowledged any more, and its data directory is
		// emptied before it writes again (standby.go): it neither drains (its requests would
		// wait on bucket writes it can never make, and a draining node accepts connections
		// only to close them, which clients do not retry) nor closes its log. Re-executing
		// closes every listener and connection at once: clients are refused or cut off, and
		// retry on the writer.
		logger.Warn("fenced: another node took the bucket prefix; starting again as a standby")
		mon.draining()
		stopProfiles()
		restartAsStandby(logger) // front.go; does not return
	}
	logger.Info("draining", "signal", got.String())
	mon.draining()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := 0
	stopRegistry(ctx)
	if err := srv.Shutdown(ctx); err != nil {
		logger.Error("shutdown", "err", err)
		code = 1
	}
	mon.stop(ctx)
	passes.Close()
	if remote != nil {
		remote.Close()
	}
	if err := blog.Close(); err != nil {
		logger.Error("close log", "err", err)
		code = 1
	}
	if rs != nil {
		rs.committer.Close() // after the log: the last groups it handed over go to the bucket
	}
	releaseLease(ctx, logger, rs) // after every writer of the bucket
	stopProfiles()
	logger.Info("stopped")
	os.Exit(code)
}

// runSubcommand runs `inlet scram` and `inlet haproxy-config`, which exit when done; any
// other first argument is left to the flags.
func runSubcommand() {
	if len(os.Args) > 1 && os.Args[1] == "scram" {
		os.Exit(scramCommand(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "haproxy-config" {
		os.Exit(haproxyCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
}

// flagsOrExit parses the command line: --help and --version print and exit, a bad flag exits
// with status 2.
func flagsOrExit() (*flag.FlagSet, *options) {
	fs, o, err := parseFlags(os.Args[1:])
	if errors.Is(err, errHelp) {
		all, _ := newFlags()
		printUsage(os.Stdout, all)
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "inlet: %v\nrun inlet --help for the flags\n", err)
		os.Exit(2)
	}
	if *o.version {
		fmt.Println(versionString())
		os.Exit(0)
	}
	return fs, o
}

// newLogger makes the process's logger (text on stderr, at --log-level) and the default one.
func newLogger(levelName string) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		usage("--log-level: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	return logger
}

// waitForStop waits for SIGTERM or SIGINT, reloading the config file's users on each SIGHUP
// meanwhile, and returns the signal that ends the wait; or for fenced to close (fencedWhileStandby),
// and returns true.
func waitForStop(logger *slog.Logger, srv *server.Server, configPath string, fenced <-chan struct{}) (os.Signal, bool) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	for {
		select {
		case got := <-sig:
			if got != syscall.SIGHUP {
				return got, false
			}
			reloadUsers(logger, srv, configPath)
		case <-fenced:
			return nil, true
		}
	}
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
	n, err := bytesize.Parse(v)
	if err != nil {
		usage("--%s: %v", name, err)
	}
	return n
}

func mustSizeOrZero(name, v string) int64 {
	n, err := bytesize.ParseOrZero(v)
	if err != nil {
		usage("--%s: %v", name, err)
	}
	return n
}

// msFlag turns a Kafka-style millisecond setting into the server's duration, where zero means
// the default and a negative value none: 0 ms is "none" here, as in Kafka.
func msFlag(ms int) time.Duration {
	if ms <= 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// minutesFlag is a flag in minutes (0 or less: never, -1).
func minutesFlag(m int) time.Duration {
	if m <= 0 {
		return -1
	}
	return time.Duration(m) * time.Minute
}

func usage(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "inlet: "+f+"\n", a...)
	os.Exit(2)
}

// openNode opens the catalog, builds the server on it, opens the log with the server's
// transaction coordinator (the log verifies transactional batches against it) and starts the
// server on the log. It exits on an error.
func openNode(logger *slog.Logger, opts batchlog.Options, rs *remoteSettings, cfg server.Config) (*batchlog.Log, *server.Server, *tier.Tier) {
	cat := meta.Discard(logger)
	if !opts.Discard {
		var err error
		if cat, err = meta.Open(meta.Options{Dir: opts.Dir, Logger: logger}); err != nil {
			logger.Error("open log", "err", err)
			os.Exit(1)
		}
	}
	withDiskless(logger, rs, &cfg, &opts)
	srv, err := server.New(cfg, cat)
	if err != nil {
		logger.Error("start", "err", err)
		cat.Close()
		os.Exit(1)
	}
	opts.Meta, opts.Txns = cat, srv.Txns()
	if rs != nil { // the transactional batches a start replays from the bucket are taken
		opts.Txns = rs.committer.TxnVerifier(opts.Txns)
	}
	blog, err := batchlog.Open(opts)
	if err != nil {
		logger.Error("open log", "err", err)
		srv.Close()
		os.Exit(1)
	}
	remote, err := openTier(logger, blog, cat, rs)
	if err != nil {
		logger.Error("open remote tier", "err", err)
		srv.Close()
		blog.Close()
		os.Exit(1)
	}
	if err := srv.Start(blog, remoteTier(remote)); err != nil {
		logger.Error("start", "err", err)
		blog.Close()
		os.Exit(1)
	}
	return blog, srv, remote
}

// noBoundIfZero maps a bound flag's 0 (no bound) to the -1 its Config or Options field takes
// for none (0 there is the default).
func noBoundIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
