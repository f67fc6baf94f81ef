// Package server is Inlet's Kafka protocol: one file per API key (00_produce.go, 01_fetch.go,
// ...), in the manner of franz-go's kfake, each registering its API with the versions it
// serves, its authorization (package server/authz, authz.go) and its handler; the registry and
// dispatch (handle.go), which also serves the admin APIs of package server/admin (registered
// in admin_apis.go); and Start, which wires a node's Kafka server: the connections (package
// conn), the batch log, the group and transaction coordinators and the admin APIs' state
// (admin.New, which opens the tenants). This package is the protocol and the data-path and
// group APIs; server/admin is the APIs that change or describe the catalog, configs and
// tenants; server/txnapi the transaction APIs (registered in txn.go).
//
// Hot path (DESIGN.md): a transport back-end frames a request and copies it once into a
// pooled buffer (package transport) -> the connection's worker (package conn) hands it to
// dispatch (handle.go, request.go), which decodes and validates it (00_produce.go) -> the
// batch log's committer assigns offsets and commits a synced group (batchlog) -> the
// completer tells the request (request.Completed), which encodes the reply -> replies leave
// in request order (transport).
//
// Files beside the APIs: server.go (Config, Start, Shutdown, the users the server owns),
// request.go (the pooled request and the conn.Handler), handle.go (registry, dispatch),
// admin_apis.go (the admin APIs in the registry), authz.go (the declarations' shorthands,
// subjectOf), coordinator.go and txn.go (the coordinators' wiring), topics.go
// (auto-creation), validate.go (records), metrics.go (what the metrics read). What Fetch and
// ListOffsets read, from both tiers, is package server/read's (read.Reader).
//
// Lock order (DESIGN.md): createMu (topic creation and configuration; package admin holds it
// too) before the batch log's locks. Package admin's tenantsMu comes before tenants.Store's,
// auth.Users' and package conn's connection table, whose locks take no other.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"inlet/acl"
	"inlet/auth"
	"inlet/batchlog"
	"inlet/batchlog/upkeep"
	"inlet/conn"
	"inlet/groups"
	"inlet/meta"
	"inlet/metrics"
	"inlet/quota"
	"inlet/schema"
	"inlet/server/admin"
	"inlet/server/read"
	"inlet/server/txnapi"
	"inlet/txn"
)

// Config holds the server's settings; zero values take the documented defaults.
type Config struct {
	Listen            string // host:port; default 127.0.0.1:9092 (port 0 picks one)
	Advertise         string // host:port put in Metadata; default the bound address
	NodeID            int32  // default 1
	Workers           int    // gnet event loops; default the number of CPUs
	DefaultPartitions int    // partitions of auto-created topics; default 16
	AutoCreateTopics  bool
	MaxRequestBytes   int   // largest request frame accepted; default 100 MiB
	MaxMessageBytes   int   // largest record batch; default 1 MiB + 12 (Kafka's message.max.bytes)
	InflightBudget    int64 // bytes read but not yet answered; default 256 MiB
	Logger            *slog.Logger

	// Diskless is the diskless commit log (package diskless; nil without a bucket): it admits
	// each batch to a diskless topic and keeps their descriptions in the bucket.
	// DisklessDefault is log.diskless.enable, new topics' diskless.enable.
	Diskless        Diskless
	DisklessDefault bool
	// GroupStore, when set, makes the group coordinator's store from the catalog (a node
	// with diskless topics: diskless.Committer.GroupStore, which puts every offset change in
	// the bucket before the catalog); nil: the catalog itself.
	GroupStore func(*meta.Store) groups.Store
	// TxnStore, likewise, makes the transaction coordinator's store (diskless.Committer.TxnStore:
	// every transactional id's record in the bucket before the catalog); nil: the catalog.
	TxnStore func(*meta.Store) txn.Store
	// Writable says whether this node holds its bucket prefix's lease now (package lease;
	// nil without a bucket: always); Fenced whether another node has taken the prefix, for
	// good. While the lease is not held, produce to a topic kept in the bucket
	// (remote.storage.enable, diskless.enable) is answered NOT_LEADER_OR_FOLLOWER,
	// retriable: another node may already serve it from the bucket. Topics on the local
	// disk alone go on through a bucket outage; once fenced, every produce is refused, so
	// that clients move to the node that took the prefix. Each is called once per produce
	// request and once per reply.
	Writable func() bool
	Fenced   func() bool

	// Nodes is every node that may write this node's bucket prefix, this one (NodeID)
	// included, each at the address its clients reach it at (--cluster-nodes): Metadata and
	// DescribeCluster list them all, this node leading every partition and being the
	// controller, so that a client that loses this node knows where the next writer will be.
	// This node is listed at its advertised address on the request's listener, whatever its
	// entry says. Nil: this node alone.
	Nodes []Node
	// LeaderEpoch is every partition's leader epoch (the held lease's epoch, which rises at
	// every takeover of the prefix): Metadata, ListOffsets and OffsetForLeaderEpoch report
	// it, and Fetch, ListOffsets and OffsetForLeaderEpoch check a request's current leader
	// epoch against it (KIP-320). Nil: 0, this node the only leader there ever was.
	LeaderEpoch func() int32

	// MaxPartitions bounds the partitions of all topics together (max.partitions; creations
	// past it are refused POLICY_VIOLATION: admin/limits.go); MaxGroups the consumer groups
	// (groups.Config.MaxGroups). 0: the defaults (admin.DefaultMaxPartitions,
	// groups.DefaultMaxGroups); negative: no bound.
	MaxPartitions, MaxGroups int
	// MaxPartitionsPerPrincipal bounds the partitions of the topics one principal created
	// (max.partitions.per.principal), MaxGroupsPerPrincipal the groups one principal's
	// requests created since start (max.groups.per.principal, group_bounds.go); 0: no bound.
	MaxPartitionsPerPrincipal, MaxGroupsPerPrincipal int

	// Security and validation (package conn: listeners.go, security.go; authz.go). Listeners empty: one
	// PLAINTEXT listener on Listen/Advertise whose clients are unrestricted.
	Listeners       []conn.Listener
	Users           *auth.Users      // SASL users; also names the principals of TLS client certificates
	SessionLifetime time.Duration    // KIP-368: SASL sessions expire after this (0: never)
	Schemas         *schema.Registry // topics bound to schemas are validated on produce (nil: none)
	Quotas          quota.Bounds     // byte-rate quotas by user, the config file's (admin/tenants.go, conn/quotas.go)

	// Connection limits (conn/limits.go), Kafka's broker configs of the same names. Zero values
	// take Kafka's defaults; a negative duration turns the limit off.
	MaxConnections      int // max.connections; default MaxInt32 (no limit)
	MaxConnectionsPerIP int // max.connections.per.ip; default MaxInt32
	// MaxConnectionCreationRate is KIP-612's max.connection.creation.rate: connections accepted
	// per second over every listener (the acceptor waits); 0: no limit (Kafka's Long.MAX_VALUE).
	MaxConnectionCreationRate float64
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides: a limit per address
	// (an IP address as Go writes it) in place of MaxConnectionsPerIP.
	MaxConnectionsPerIPOverrides map[string]int
	ConnectionsMaxIdle           time.Duration // connections.max.idle.ms; default 10 min
	SaslServerMaxReceiveSize     int           // sasl.server.max.receive.size: frames before SASL authentication; default 512 KiB
	// SaslServerMaxInflightBytes is the in-flight budget that connections share before SASL
	// authentication (transport.Config.PreAuthBudget); default 16 MiB.
	SaslServerMaxInflightBytes int64
	// FetchMaxBytes is fetch.max.bytes: the most record bytes a Fetch is answered with;
	// default 55 MiB (57671680), Kafka's.
	FetchMaxBytes             int
	FailedAuthenticationDelay time.Duration // connection.failed.authentication.delay.ms: the first delay; default 100 ms

	// SuperUsers are the principal names of Kafka's super.users: allowed everything, whatever
	// the ACLs; they alone may change users and quotas at run time.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found: a resource no ACL binding
	// matches is open to every principal. Default false, as Kafka's.
	AllowEveryoneIfNoACLFound bool

	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms: how long a new group
	// waits for more members before its first rebalance. Default 3 s (Kafka's); negative:
	// none (what tests want).
	GroupInitialRebalanceDelay time.Duration
	// RebalanceProtocols is group.coordinator.rebalance.protocols: nil is Kafka 4's default,
	// classic and consumer; without "consumer", ConsumerGroupHeartbeat answers
	// UNSUPPORTED_VERSION and clients keep to the classic protocol.
	RebalanceProtocols []string
	// ConsumerGroups is the KIP-848 groups' settings (group.consumer.session.timeout.ms,
	// .heartbeat.interval.ms, .assignors, .max.size); zero values take the defaults
	// (groups.ConsumerConfig). Enabled and the topic lookups are set by the server.
	ConsumerGroups groups.ConsumerConfig

	// OffsetsRetention is offsets.retention.minutes: an Empty group's committed offsets
	// expire this long after it emptied (groups.Config.OffsetsRetention). Default 7 days;
	// negative: never.
	OffsetsRetention time.Duration
	// TransactionalIDExpiration is transactional.id.expiration.ms: a transactional id with no
	// transaction open and no change this long is forgotten. Default 7 days; negative: never.
	TransactionalIDExpiration time.Duration
	// Upkeep is the log's upkeep passes' settings, which DescribeConfigs reports
	// (log.retention.check.interval.ms, producer.id.expiration.ms); the zero value: Kafka's
	// defaults.
	Upkeep upkeep.Config

	// Metrics, when set, counts requests, their latency, errors and bytes (metrics.go); nil:
	// nothing is counted and each hook costs one nil check.
	Metrics *metrics.Requests
}

// Node is one broker of the cluster a client is shown (Config.Nodes).
type Node struct {
	ID   int32
	Host string
	Port int32
}

// Defaults, Kafka's where Kafka has the setting.
const (
	defaultMaxRequestBytes            = 100 << 20
	defaultMaxMessageBytes            = 1048588
	defaultInflightBudget             = 256 << 20
	defaultMaxConnections             = math.MaxInt32
	defaultConnectionsMaxIdle         = 10 * time.Minute
	defaultSaslServerMaxReceiveSize   = 512 << 10
	defaultSaslServerMaxInflightBytes = 16 << 20
	defaultFetchMaxBytes              = 57671680
	defaultFailedAuthenticationDelay  = 100 * time.Millisecond
	defaultGroupInitialRebalanceDelay = 3 * time.Second
)

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:9092"
	}
	if c.NodeID == 0 {
		c.NodeID = 1
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 16
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = defaultMaxRequestBytes
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = defaultMaxMessageBytes
	}
	if c.InflightBudget <= 0 {
		c.InflightBudget = defaultInflightBudget
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = defaultMaxConnections
	}
	if c.MaxConnectionsPerIP <= 0 {
		c.MaxConnectionsPerIP = defaultMaxConnections
	}
	if c.ConnectionsMaxIdle == 0 {
		c.ConnectionsMaxIdle = defaultConnectionsMaxIdle
	}
	if c.SaslServerMaxReceiveSize <= 0 {
		c.SaslServerMaxReceiveSize = defaultSaslServerMaxReceiveSize
	}
	if c.SaslServerMaxInflightBytes <= 0 {
		c.SaslServerMaxInflightBytes = defaultSaslServerMaxInflightBytes
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = defaultFetchMaxBytes
	}
	if c.FailedAuthenticationDelay == 0 {
		c.FailedAuthenticationDelay = defaultFailedAuthenticationDelay
	}
	if c.GroupInitialRebalanceDelay == 0 {
		c.GroupInitialRebalanceDelay = defaultGroupInitialRebalanceDelay
	}
	switch {
	case c.MaxPartitions == 0:
		c.MaxPartitions = admin.DefaultMaxPartitions
	case c.MaxPartitions < 0:
		c.MaxPartitions = 0
	}
	switch {
	case c.MaxGroups == 0:
		c.MaxGroups = groups.DefaultMaxGroups
	case c.MaxGroups < 0:
		c.MaxGroups = 0
	}
}

// Server is one Inlet node's Kafka server.
type Server struct {
	cfg    Config
	log    *slog.Logger
	blog   *batchlog.Log
	reader read.Reader       // what Fetch and ListOffsets read, from both tiers (Start)
	meta   *meta.Store       // the catalog the coordinators load from and write to
	net    *conn.Node        // the listeners and the connections' policy
	m      *metrics.Requests // Config.Metrics; nil: none

	createMu sync.Mutex // serialises auto-creation so two requests create a topic once

	groupOwners groupOwners // the groups each principal created, for MaxGroupsPerPrincipal (group_bounds.go)

	quotas *quota.Manager                 // byte-rate quotas in force and each user's rates (conn/quotas.go)
	authz  atomic.Pointer[acl.Authorizer] // the ACL bindings in force, published by package admin (admin/acls.go)
	admin  *admin.Server                  // the admin APIs' state (package server/admin); set by Start

	groups *groups.Coordinator
	txns   *txn.Coordinator // transactions (txn.go)
	txnAPI txnapi.Server    // what the transaction APIs act on (package server/txnapi); set by Start
}

// New builds a server on the catalog m, before the log opens: the transaction coordinator
// loads its records from m, and Txns is what the log takes to verify transactional batches
// (batchlog.Options.Txns). Start serves on that log; a server that is not started is released
// with Close.
func New(cfg Config, m *meta.Store) (*Server, error) {
	cfg.setDefaults()
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		meta:   m,
		m:      cfg.Metrics,
		quotas: quota.NewManager(),
	}
	if err := s.loadTxns(); err != nil {
		return nil, fmt.Errorf("server: load transactions: %w", err)
	}
	return s, nil
}

// RemoteTier is the remote tier Start reads tiered partitions from (read.RemoteTier).
type RemoteTier = read.RemoteTier

// Diskless is the diskless commit log as the server uses it (package diskless's Committer):
// Admit answers 0 to take a batch for a diskless topic, or the error refusing it.
type Diskless interface {
	admin.Diskless
	Admit() (int16, string)
}

// Txns is the transaction coordinator, for batchlog.Options.Txns.
func (s *Server) Txns() batchlog.TxnVerifier { return s.txns }

// Close releases a server New built that is not started (its log failed to open).
func (s *Server) Close() { s.closeCoordinators() }

// Start listens on the log blog (opened with Txns) and serves until Shutdown, reading the
// batches of tiered topics below their local log start from remote (nil: no remote tier). It
// returns once the listeners are bound. On an error it releases the server (as Close does).
func (s *Server) Start(blog *batchlog.Log, remote RemoteTier) error {
	s.blog = blog
	baseUsers, err := s.ownUsers()
	if err != nil {
		s.closeCoordinators()
		return fmt.Errorf("server: %w", err)
	}
	n, err := conn.New(s.connConfig(), (*handler)(s))
	if err != nil {
		s.closeCoordinators()
		return err
	}
	s.net = n
	s.reader = read.Reader{Log: blog, Remote: remote, Logger: s.log, FetchMaxBytes: s.cfg.FetchMaxBytes, Node: n,
		LeaderEpoch: s.cfg.LeaderEpoch}
	if m := s.m; m != nil {
		s.reader.Woken = m.FetchWoken
		m.WatchLimits(s.LimitCounts)
	}
	// The groups load once the log is open, as their members' sessions start counting then.
	if err := s.startGroups(); err != nil {
		s.closeCoordinators()
		return fmt.Errorf("server: load groups: %w", err)
	}
	// The admin APIs' state, on the groups (DeleteTopics removes their offsets); New opens
	// the tenants and publishes the users, ACLs and quotas they give.
	s.admin, err = admin.New(s.adminConfig(), admin.Parts{
		Log: blog, Net: n, Groups: s.groups, Quotas: s.quotas, RemoteStorage: remote != nil, Diskless: s.cfg.Diskless,
		CreateMu: &s.createMu, ACLs: &s.authz, BaseUsers: baseUsers,
	})
	if err != nil {
		s.closeCoordinators()
		return fmt.Errorf("server: %w", err)
	}
	if err := s.startTxns(); err != nil {
		s.closeCoordinators()
		return fmt.Errorf("server: load transactions: %w", err)
	}
	if err := s.net.Start(); err != nil {
		s.closeCoordinators()
		return err
	}
	return nil
}

// connConfig is the connection policy's part of s.cfg (defaults applied), with the users and
// quotas s publishes.
func (s *Server) connConfig() conn.Config {
	c := &s.cfg
	return conn.Config{
		Listen:                       c.Listen,
		Advertise:                    c.Advertise,
		Workers:                      c.Workers,
		MaxRequestBytes:              c.MaxRequestBytes,
		InflightBudget:               c.InflightBudget,
		Logger:                       c.Logger,
		Listeners:                    c.Listeners,
		Users:                        c.Users,
		SessionLifetime:              c.SessionLifetime,
		Quotas:                       s.quotas,
		MaxConnections:               c.MaxConnections,
		MaxConnectionsPerIP:          c.MaxConnectionsPerIP,
		MaxConnectionsPerIPOverrides: c.MaxConnectionsPerIPOverrides,
		ConnectionsMaxIdle:           c.ConnectionsMaxIdle,
		SaslServerMaxReceiveSize:     c.SaslServerMaxReceiveSize,
		SaslServerMaxInflightBytes:   c.SaslServerMaxInflightBytes,
		MaxConnectionCreationRate:    c.MaxConnectionCreationRate,
		FailedAuthenticationDelay:    c.FailedAuthenticationDelay,
		Metrics:                      s.m,
	}
}

// adminConfig is the admin APIs' part of s.cfg (defaults applied), with the users s owns.
func (s *Server) adminConfig() admin.Config {
	c := &s.cfg
	ac := admin.Config{
		NodeID:                       c.NodeID,
		DefaultPartitions:            c.DefaultPartitions,
		AutoCreateTopics:             c.AutoCreateTopics,
		DisklessDefault:              c.DisklessDefault,
		MaxPartitions:                c.MaxPartitions,
		MaxPartitionsPerPrincipal:    c.MaxPartitionsPerPrincipal,
		MaxRequestBytes:              c.MaxRequestBytes,
		GroupInitialRebalanceDelay:   c.GroupInitialRebalanceDelay,
		MaxConnections:               c.MaxConnections,
		MaxConnectionsPerIP:          c.MaxConnectionsPerIP,
		MaxConnectionsPerIPOverrides: c.MaxConnectionsPerIPOverrides,
		ConnectionsMaxIdle:           c.ConnectionsMaxIdle,
		SaslServerMaxReceiveSize:     c.SaslServerMaxReceiveSize,
		FetchMaxBytes:                c.FetchMaxBytes,
		FailedAuthenticationDelay:    c.FailedAuthenticationDelay,
		OffsetsRetention:             c.OffsetsRetention,
		TransactionalIDExpiration:    c.TransactionalIDExpiration,
		Upkeep:                       c.Upkeep,
		Logger:                       c.Logger,
		Listeners:                    c.Listeners,
		Users:                        c.Users,
		SuperUsers:                   c.SuperUsers,
		AllowEveryoneIfNoACLFound:    c.AllowEveryoneIfNoACLFound,
		Quotas:                       c.Quotas,
	}
	if c.MaxMessageBytes != defaultMaxMessageBytes {
		ac.MaxMessageBytes = c.MaxMessageBytes
	}
	return ac
}

// ownUsers makes s.cfg.Users a copy of the config file's users: the server owns the users it
// publishes (and the connections authenticate against). base are the config file's users.
func (s *Server) ownUsers() (base []*auth.User, err error) {
	if s.cfg.Users == nil {
		return nil, nil
	}
	base = s.cfg.Users.All()
	own := make([]auth.User, len(base))
	for i, u := range base {
		own[i] = *u
	}
	users, err := auth.NewUsers(own)
	if err != nil {
		return nil, err
	}
	s.cfg.Users = users
	return base, nil
}

// ReloadUsers makes users the config file's users (SIGHUP): the run-time changes are applied
// on top of them again and published, without dropping connections; the connections of a
// user no longer there are closed (admin.Server.ReloadUsers).
func (s *Server) ReloadUsers(users *auth.Users) error { return s.admin.ReloadUsers(users) }

// ParseSuperUsers parses Kafka's super.users: principals separated by ';', each "User:<name>".
func ParseSuperUsers(v string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(v, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		name, ok := strings.CutPrefix(p, "User:")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: a principal is User:<name>", p)
		}
		out = append(out, name)
	}
	return out, nil
}

// Addr is the bound listener address.
func (s *Server) Addr() string { return s.net.Addr() }

// ListenerAddr returns the bound address of the listener named name ("" when there is none).
func (s *Server) ListenerAddr(name string) string { return s.net.ListenerAddr(name) }

// Shutdown drains: it stops reading new requests and refuses new connections, waits until
// every request already read has been committed and answered (or ctx ends), then closes the
// listener and every connection. The caller closes the batch log afterwards.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.net.Drain(ctx)
	s.closeCoordinators()
	if closeErr := s.net.Close(); closeErr != nil && err == nil {
		err = closeErr
	}
	return err
}
