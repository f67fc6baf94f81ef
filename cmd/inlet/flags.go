package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"inlet/diskless"
)

// options are inlet's flags. Every flag but --config and --version is also a config file key (its name
// with '_' for '-'); config_test.go keeps the two lists in step. Flags named after a Kafka
// broker config carry its name and default.
type options struct {
	listen, advertise, dataDir, storage, segmentBytes, segmentIO, fetchCache *string
	workers, nodeID, defaultPartitions                                       *int
	autoCreate                                                               *bool
	maxRequest, maxMessage, budget, groupBytes, minFreeBytes                 *string
	logLevel, cpuProfile, memProfile, registryListen                         *string
	sessionLifetime                                                          *time.Duration
	config                                                                   *string
	version                                                                  *bool
	metricsListen                                                            *string
	pprof                                                                    *bool
	allowEveryoneIfNoACLFound                                                *bool

	// Connection limits and group settings, Kafka's names and defaults.
	maxConnections, maxConnectionsPerIP, connectionsMaxIdleMs *int
	maxConnectionCreationRate                                 *int
	maxConnectionsPerIPOverrides, saslMaxReceive, superUsers  *string
	saslMaxInflight, fetchMaxBytes                            *string
	failedAuthDelayMs, groupInitialRebalanceDelayMs           *int
	producerIDExpirationMs, logRetentionCheckIntervalMs       *int
	offsetsRetentionMinutes, transactionalIDExpirationMs      *int

	// KIP-848 consumer groups (group.coordinator.rebalance.protocols, group.consumer.*).
	rebalanceProtocols, consumerAssignors                                  *string
	consumerSessionTimeoutMs, consumerHeartbeatIntervalMs, consumerMaxSize *int
	// Inlet's bounds of KIP-848 groups (groups/consumer_bounds.go).
	maxConsumerMembersPerPrincipal, maxSubscribedTopicsPerMember, maxRegexesPerGroup *int

	// The remote tier (tiered storage of topics with remote.storage.enable).
	s3Bucket, s3Endpoint, s3Region, s3Prefix, remoteObjectBytes, remoteReadCache, remoteUploadRate *string
	s3PathStyle, restoreFromRemote                                                                 *bool
	remoteUploadIntervalMs, bucketLeaseMs                                                          *int
	standby                                                                                        *bool   // standby.go
	clusterNodes                                                                                   *string // cluster.go

	// Diskless topics (diskless.enable; log.diskless.enable is the broker default).
	logDisklessEnable                                     *bool
	disklessCommitBytes, disklessMaxPendingBytes          *string
	disklessCommitIntervalMs, disklessRequestTimeoutMs    *int
	disklessCheckpointIntervalMs, disklessMaxPutsInFlight *int

	memoryLimit *string // --memory-limit (memory.go)

	// Bounds on the state clients make (producer windows, partitions, groups).
	maxProducerIDs, maxProducerIDsPerPrincipal, maxPartitions, maxPartitionsPerPrincipal *int
	maxGroups, maxGroupsPerPrincipal                                                     *int
}

// newFlags defines inlet's flags on a new flag set.
func newFlags() (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("inlet", flag.ContinueOnError)
	o := &options{
		listen:            fs.String("listen", "127.0.0.1:9092", "Kafka listener host:port"),
		advertise:         fs.String("advertise", "", "host:port clients are told to connect to (default: the listen address)"),
		dataDir:           fs.String("data-dir", "./data", "data directory (Pebble, and segments/ for record data)"),
		storage:           fs.String("storage", "segments", "segments (record data in append-only segment files, index and metadata in Pebble), pebble (record data as Pebble values), or discard (acknowledge without storing: a benchmark ceiling only)"),
		segmentBytes:      fs.String("segment-bytes", "256MiB", "size at which a new segment file is started (--storage segments)"),
		fetchCache:        fs.String("fetch-cache", "64MiB", "memory kept of the data written last, so consumers reading near the end are served without reading the disk (--storage segments; 0: none)"),
		segmentIO:         fs.String("segment-io", "direct", "how segment files are written: direct (O_DIRECT from a staging buffer, where the file system allows it) or buffered (the same staged writes through the page cache)"),
		workers:           fs.Int("workers", runtime.NumCPU(), "gnet event loops"),
		nodeID:            fs.Int("node-id", 1, "broker node id"),
		defaultPartitions: fs.Int("default-partitions", 16, "partitions of auto-created topics"),
		autoCreate:        fs.Bool("auto-create-topics", true, "create unknown topics on produce or metadata requests (turn off with --auto-create-topics=false)"),
		maxRequest:        fs.String("max-request-bytes", "100MiB", "largest request frame accepted (Kafka's socket.request.max.bytes; checked before allocating)"),
		maxMessage:        fs.String("max-message-bytes", "1048588", "largest record batch accepted (Kafka's message.max.bytes)"),
		budget:            fs.String("inflight-budget", "256MiB", "bytes read from sockets but not yet committed, frames still arriving included; when full, sockets are not read"),
		groupBytes:        fs.String("max-group-bytes", "16MiB", "record bytes in one group commit"),
		minFreeBytes:      fs.String("min-free-bytes", "256MiB", "free space kept on the data directory's file system: below it appends are answered KAFKA_STORAGE_ERROR (producers retry) until space is freed, so the metadata store never meets a full disk; 0: none (--storage segments)"),
		logLevel:          fs.String("log-level", "info", "debug, info, warn or error"),
		cpuProfile:        fs.String("cpu-profile", "", "write a CPU profile of the whole run to this file (stopped at shutdown)"),
		memProfile:        fs.String("mem-profile", "", "write an allocation profile to this file at shutdown"),
		registryListen:    fs.String("registry-listen", "", "host:port of the read-only schema registry (HTTP, or HTTPS with the config file's registry_tls); empty: not served"),
		sessionLifetime:   fs.Duration("sasl-session-lifetime", 0, "SASL sessions expire after this and clients re-authenticate (KIP-368); 0s: never"),
		config:            fs.String("config", "", "YAML configuration file (examples/secure.yaml); flags given explicitly override it"),
		version:           fs.Bool("version", false, "print the version and the commit it was built from, and exit"),
		metricsListen:     fs.String("metrics-listen", "", "host:port of the HTTP listener for Prometheus metrics (/metrics), /healthz and /readyz; empty: not served"),
		pprof:             fs.Bool("pprof", false, "also serve Go's pprof profiles under /debug/pprof/ on the --metrics-listen listener"),

		maxConnections:                 fs.Int("max-connections", 0, "Kafka's max.connections: open client connections at most; one more is closed at once; 0: as many as the node's descriptor limit holds beside what the node keeps open itself (rlimit.go: the hard RLIMIT_NOFILE less Pebble's 1,000, 2 per segment file, 257 for the metrics listener, 128 for the bucket, 64 + 2 per event loop; at least half the limit)"),
		maxConnectionCreationRate:      fs.Int("max-connection-creation-rate", 2147483647, "Kafka's max.connection.creation.rate (KIP-612): connections accepted per second at most, over every listener; further ones wait in the listen backlog; 2147483647: no limit"),
		maxConnectionsPerIP:            fs.Int("max-connections-per-ip", 2147483647, "Kafka's max.connections.per.ip: open connections from one address at most"),
		maxConnectionsPerIPOverrides:   fs.String("max-connections-per-ip-overrides", "", "Kafka's max.connections.per.ip.overrides: address:limit pairs, comma-separated (IP addresses only), e.g. 127.0.0.1:200"),
		connectionsMaxIdleMs:           fs.Int("connections-max-idle-ms", 600000, "Kafka's connections.max.idle.ms: close a connection with no request outstanding after this long without traffic; -1: never"),
		saslMaxReceive:                 fs.String("sasl-server-max-receive-size", "524288", "Kafka's sasl.server.max.receive.size: largest frame before SASL authentication on SASL listeners"),
		saslMaxInflight:                fs.String("sasl-server-max-inflight-bytes", "16MiB", "in-flight budget of its own shared by connections before SASL authentication on SASL listeners (frames charged what has arrived, and unwritten replies), so they never take --inflight-budget from authenticated clients"),
		fetchMaxBytes:                  fs.String("fetch-max-bytes", "57671680", "Kafka's fetch.max.bytes: the most record bytes a Fetch is answered with, whatever it asks (also at most half the in-flight budget not held by unwritten replies)"),
		failedAuthDelayMs:              fs.Int("connection-failed-authentication-delay-ms", 100, "Kafka's connection.failed.authentication.delay.ms: a failed SASL authentication is answered and closed after this, doubled for each further failure from the same address within a minute (at most 5 s); 0: at once"),
		allowEveryoneIfNoACLFound:      fs.Bool("allow-everyone-if-no-acl-found", false, "Kafka's allow.everyone.if.no.acl.found: a topic, group or other resource that no ACL binding matches is open to every principal"),
		superUsers:                     fs.String("super-users", "", "Kafka's super.users: principals allowed everything whatever the ACLs, the only ones that may change users and quotas at run time, e.g. User:admin;User:ops"),
		groupInitialRebalanceDelayMs:   fs.Int("group-initial-rebalance-delay-ms", 3000, "Kafka's group.initial.rebalance.delay.ms: how long a new consumer group waits for more members before its first rebalance"),
		rebalanceProtocols:             fs.String("group-coordinator-rebalance-protocols", "classic,consumer", "Kafka's group.coordinator.rebalance.protocols: without consumer, ConsumerGroupHeartbeat (KIP-848) answers UNSUPPORTED_VERSION and clients keep to the classic protocol"),
		consumerSessionTimeoutMs:       fs.Int("group-consumer-session-timeout-ms", 45000, "Kafka's group.consumer.session.timeout.ms: a KIP-848 member without a heartbeat this long is removed from its group"),
		consumerHeartbeatIntervalMs:    fs.Int("group-consumer-heartbeat-interval-ms", 5000, "Kafka's group.consumer.heartbeat.interval.ms: how often KIP-848 members are told to heartbeat"),
		consumerAssignors:              fs.String("group-consumer-assignors", "uniform,range", "Kafka's group.consumer.assignors: the server-side assignors KIP-848 members may name, the first a group's when none does"),
		consumerMaxSize:                fs.Int("group-consumer-max-size", 1000, "Kafka's group.consumer.max.size: members of one KIP-848 group; one more is refused GROUP_MAX_SIZE_REACHED (Kafka's default: no bound)"),
		maxConsumerMembersPerPrincipal: fs.Int("max-consumer-members-per-principal", 5000, "KIP-848 group members the heartbeats of one principal (user, or ANONYMOUS) may hold over every group: one more is refused GROUP_MAX_SIZE_REACHED; 0: no bound"),
		maxSubscribedTopicsPerMember:   fs.Int("max-subscribed-topics-per-member", 256, "topic names one KIP-848 member may subscribe to (SubscribedTopicNames; a regular expression subscribes to more): more is refused INVALID_REQUEST"),
		maxRegexesPerGroup:             fs.Int("max-regexes-per-group", 16, "distinct regular expressions (SubscribedTopicRegex) the members of one KIP-848 group may use: one more is refused INVALID_REQUEST"),
		logRetentionCheckIntervalMs:    fs.Int("log-retention-check-interval-ms", 300000, "Kafka's log.retention.check.interval.ms: how often retention deletes old batches and producer windows expire (0: never, neither)"),
		producerIDExpirationMs:         fs.Int("producer-id-expiration-ms", 86400000, "Kafka's producer.id.expiration.ms: an idempotent producer's window on a partition is dropped after this long without a write (0: never)"),
		offsetsRetentionMinutes:        fs.Int("offsets-retention-minutes", 10080, "Kafka's offsets.retention.minutes: an empty consumer group's committed offsets expire this long after it became empty (offsets of simple commits: after their commit), and the group with them (0: never)"),
		transactionalIDExpirationMs:    fs.Int("transactional-id-expiration-ms", 604800000, "Kafka's transactional.id.expiration.ms: a transactional id with no transaction open and no activity this long is forgotten (0: never)"),
		maxProducerIDs:                 fs.Int("max-concurrent-producer-ids", 100000, "Redpanda's max_concurrent_producer_ids: idempotent producer windows (one per producer id and partition, about 300 bytes each) the node holds; at the bound a new one evicts the least recently written window idle for 2 minutes, or its batch is refused THROTTLING_QUOTA_EXCEEDED; 0: no bound"),
		maxProducerIDsPerPrincipal:     fs.Int("max-concurrent-producer-ids-per-principal", 0, "producer windows the batches of one principal (user, or ANONYMOUS) may hold, with the same eviction; 0: no bound but the node's"),
		maxPartitions:                  fs.Int("max-partitions", 50000, "partitions the node holds at most, all topics together: a CreateTopics, CreatePartitions or auto-creation beyond it is refused POLICY_VIOLATION; 0: no bound"),
		maxPartitionsPerPrincipal:      fs.Int("max-partitions-per-principal", 0, "partitions of the topics one principal (user, or ANONYMOUS) created, kept with each topic: a creation past it is refused POLICY_VIOLATION; 0: no bound but the node's"),
		maxGroups:                      fs.Int("max-groups", 20000, "consumer groups the node holds at most: a request that would create one more (JoinGroup, OffsetCommit, TxnOffsetCommit) is refused POLICY_VIOLATION; 0: no bound"),
		maxGroupsPerPrincipal:          fs.Int("max-groups-per-principal", 0, "consumer groups the requests of one principal (user, or ANONYMOUS) may create, counted since start (groups from before a restart count only against --max-groups): one more is refused POLICY_VIOLATION; 0: no bound but the node's"),
		memoryLimit:                    fs.String("memory-limit", "auto", "soft limit of the Go heap (runtime/debug.SetMemoryLimit): the garbage collector runs more often near it, so RSS stays near what is live; auto: --inflight-budget + --fetch-cache + --sasl-server-max-inflight-bytes (with a SASL listener) + --remote-read-cache (with a bucket), unless GOMEMLIMIT is set; 0: none (Go's default)"),

		s3Bucket:               fs.String("s3-bucket", "", "S3-compatible bucket of the remote tier: topics with remote.storage.enable keep their older batches there (credentials from the standard AWS chain: environment, shared files); empty: no remote tier"),
		s3Endpoint:             fs.String("s3-endpoint", "", "URL of the S3-compatible server, e.g. http://127.0.0.1:7070 (empty: AWS)"),
		s3Region:               fs.String("s3-region", "us-east-1", "region of the bucket"),
		s3Prefix:               fs.String("s3-prefix", "", "key prefix of this node's objects in the bucket (one node per prefix), e.g. node-1/"),
		s3PathStyle:            fs.Bool("s3-path-style", false, "address the bucket in the URL path (http://host/bucket/key), as most S3-compatible servers want, rather than as a host name"),
		restoreFromRemote:      fs.Bool("restore-from-remote", false, "on an empty data directory, rebuild the tiered and diskless topics from the bucket before serving: their catalog, every uploaded batch of a tiered topic (served from the remote tier; new writes continue after the last uploaded offset) and every acknowledged batch of a diskless topic (a data directory that holds topics is left as it is)"),
		remoteObjectBytes:      fs.String("remote-object-bytes", "64MiB", "batch data per uploaded object (a topic's segment.bytes, if smaller, cuts it sooner)"),
		remoteUploadIntervalMs: fs.Int("remote-upload-interval-ms", 60000, "how long batches of a tiered topic wait before they are uploaded in an object smaller than --remote-object-bytes (a topic's segment.ms, if shorter, sends them sooner)"),
		remoteUploadRate:       fs.String("remote-upload-max-bytes-per-sec", "0", "paces uploads to the bucket (a tier catching up after an outage reads the disk and the network at most this fast), e.g. 100MiB; 0: unpaced"),
		remoteReadCache:        fs.String("remote-read-cache", "64MiB", "memory for remote reads: object footers and chunks of batches read from the bucket, and the chunks read ahead"),
		standby:                fs.Bool("standby", false, "stand by beside the writer of the bucket prefix rather than refuse to start: wait, listening on nothing, until the writer releases the prefix (SIGTERM) or stops renewing its lease, then take it and serve, restored from the bucket if another writer held it since this data directory did (needs --s3-bucket)"),
		clusterNodes:           fs.String("cluster-nodes", "", "every node that may write this bucket prefix, this one included, as id@host:port,... with the address clients reach each at (its first listener's advertised address): the same list on every node; the writer lists them all in Metadata, and a --standby node asks them which is the writer (needs --s3-bucket)"),
		bucketLeaseMs:          fs.Int("bucket-lease-ms", 10000, "the lease that makes this node the one writer of its bucket prefix: renewed every third of it; a node that stops renewing stops acknowledging produce within it, and another node takes the prefix once the lease has stayed unrenewed this long (a node that finds it renewed refuses to start)"),

		logDisklessEnable:            fs.Bool("log-diskless-enable", false, "new topics are diskless (diskless.enable=true) unless created otherwise, compacted or tiered: a produce is acknowledged once its batches are in the bucket (needs --s3-bucket)"),
		disklessCommitIntervalMs:     fs.Int("diskless-commit-interval-ms", 100, "at most one commit object is PUT per interval; the batches of every diskless partition that arrive meanwhile go in the next one"),
		disklessCommitBytes:          fs.String("diskless-commit-bytes", "32MiB", "batch data after which a commit object takes no more groups (the next ones go in the following object)"),
		disklessMaxPutsInFlight:      fs.Int("diskless-max-puts-in-flight", 4, "commit objects PUT at once (1 to 16), each started at least one commit interval after the one before; their produce requests are answered in object order all the same"),
		disklessMaxPendingBytes:      fs.String("diskless-max-pending-bytes", "256MiB", "batch data of diskless topics waiting for the bucket, past which their produce is refused KAFKA_STORAGE_ERROR until it drains"),
		disklessCheckpointIntervalMs: fs.Int("diskless-checkpoint-interval-ms", int(diskless.DefaultCheckpointInterval/time.Millisecond), "at most one checkpoint of the diskless commit log per interval: the state of the commit objects the remote tier covers, after which those objects are deleted (0: no checkpoints; the commit log then keeps every object)"),
		disklessRequestTimeoutMs:     fs.Int("diskless-request-timeout-ms", 30000, "a produce to a diskless topic still waiting for the bucket after this long is answered REQUEST_TIMED_OUT (its batches stay queued for the bucket)"),
	}
	fs.SetOutput(io.Discard) // parse errors are reported by parseFlags' caller
	return fs, o
}

// errHelp is parseFlags' answer to -h, -help or --help.
var errHelp = flag.ErrHelp

// parseFlags parses args (without the program name). Anything that is not a flag is an
// error naming it: Go's flag parsing stops at the first non-flag argument, so a stray word
// (`--auto-create-topics false`, where a boolean flag needs `=false`) would otherwise drop
// every flag after it without a word.
func parseFlags(args []string) (*flag.FlagSet, *options, error) {
	fs, o := newFlags()
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if rest := fs.Args(); len(rest) > 0 {
		msg := fmt.Sprintf("unexpected argument %q: inlet takes only flags", rest[0])
		if i := indexOf(args, rest[0]); i > 0 && isBoolFlag(fs, args[i-1]) {
			msg += fmt.Sprintf(" (a boolean flag takes its value after '=': %s=%s)", args[i-1], rest[0])
		}
		if len(rest) > 1 {
			msg += fmt.Sprintf("; also %q", rest[1:])
		}
		return nil, nil, errors.New(msg)
	}
	return fs, o, nil
}

func indexOf(args []string, a string) int {
	for i, x := range args {
		if x == a {
			return i
		}
	}
	return -1
}

func isBoolFlag(fs *flag.FlagSet, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	f := fs.Lookup(name)
	if f == nil || strings.Contains(name, "=") {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// printUsage lists every flag with its default (Go's PrintDefaults leaves out defaults that
// are zero values, such as an empty --advertise).
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: inlet [flags]                 run one Inlet node")
	fmt.Fprintln(w, "       inlet scram                   print SCRAM credentials for a password read from stdin")
	fmt.Fprintln(w, "       inlet haproxy-config [flags]  print the HAProxy configuration that routes many nodes by TLS server name")
	fmt.Fprintln(w, "\nflags (every one but --config and --version is also a key of the config file, with '_' for '-'):")
	printFlags(w, fs)
}

// printFlags lists every flag of fs with its default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		} else if _, err := strconv.ParseFloat(def, 64); err != nil && def != "true" && def != "false" {
			def = strconv.Quote(def)
		}
		fmt.Fprintf(w, "  --%s (default %s)\n      %s\n", f.Name, def, f.Usage)
	})
}

// version and commit are set at build time (make build: -ldflags "-X main.version=... -X
// main.commit=..."); without them the commit comes from what Go records of the checkout it
// built in (unless -buildvcs=false).
var version, commit = "dev", ""

// versionString is the version, the commit and time the binary was built from and the Go
// version.
func versionString() string {
	rev, when, modified, goVersion := buildInfo()
	out := "inlet " + version + " (commit " + rev
	if modified {
		out += ", modified"
	}
	if when != "" {
		out += ", " + when
	}
	return out + ") " + goVersion
}

// buildInfo is the commit ("unknown" when neither -ldflags nor Go's VCS stamp says), the
// commit's time, whether the checkout was modified, and the Go version.
func buildInfo() (rev, when string, modified bool, goVersion string) {
	rev = "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if commit != "" {
		rev = commit
	}
	return rev, when, modified, goVersion
}
