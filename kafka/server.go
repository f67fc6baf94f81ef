// Package server speaks the Kafka protocol on gnet event loops and hands requests to the batch
// log. One file per API key (00_produce.go, 01_fetch.go, ...) in the manner of franz-go's kfake.
//
// Hot path (DESIGN.md): a gnet loop frames a request and copies it once into a pooled buffer
// (package transport) -> the connection's worker (conn.go) decodes and validates it off the
// loop (00_produce.go) -> the batch log's committer assigns offsets and commits a synced group
// (batchlog) -> the completer's Done callback encodes the reply -> replies leave in request
// order (transport).
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"inlet/acl"
	"inlet/auth"
	"inlet/batchlog"
	"inlet/groups"
	"inlet/metrics"
	"inlet/quota"
	"inlet/schema"
	"inlet/tenants"
	"inlet/transport"
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

	// Security and validation (listeners.go, security.go, authz.go). Listeners empty: one
	// PLAINTEXT listener on Listen/Advertise whose clients are unrestricted.
	Listeners       []Listener
	Users           *auth.Users      // SASL users; also names the principals of TLS client certificates
	SessionLifetime time.Duration    // KIP-368: SASL sessions expire after this (0: never)
	Schemas         *schema.Registry // topics bound to schemas are validated on produce (nil: none)
	Quotas          quota.Bounds     // byte-rate quotas by user, the config file's (quotas.go)

	// Connection limits (limits.go), Kafka's broker configs of the same names. Zero values
	// take Kafka's defaults; a negative duration turns the limit off.
	MaxConnections      int // max.connections; default MaxInt32 (no limit)
	MaxConnectionsPerIP int // max.connections.per.ip; default MaxInt32
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

	// OffsetsRetention is offsets.retention.minutes: an Empty group's committed offsets
	// expire this long after it emptied (groups.Config.OffsetsRetention). Default 7 days;
	// negative: never.
	OffsetsRetention time.Duration
	// TransactionalIDExpiration is transactional.id.expiration.ms: a transactional id with no
	// transaction open and no change this long is forgotten. Default 7 days; negative: never.
	TransactionalIDExpiration time.Duration

	// Metrics, when set, counts requests, their latency, errors and bytes (metrics.go); nil:
	// nothing is counted and each hook costs one nil check.
	Metrics *metrics.Requests
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
}

// Server is one Inlet node's Kafka listener.
type Server struct {
	cfg  Config
	log  *slog.Logger
	blog *batchlog.Log
	tr   *transport.Transport // framing, the in-flight budget, ordered replies, both back-ends
	m    *metrics.Requests    // Config.Metrics; nil: none

	gnet      *transport.Gnet // serves gnetL; nil when every listener is a stream listener
	addr      *net.TCPAddr
	advHost   string
	advPort   int32
	draining  atomic.Bool
	drainCh   chan struct{} // closed when draining starts: wakes long polls
	badFrames atomic.Int64

	clock      atomic.Int64 // coarse unix nanoseconds, ticked by the reaper (limits.go)
	connTab    connTable
	reaperStop chan struct{}
	reaperDone chan struct{}

	plainAttempts attemptBuckets // failed SASL PLAIN derivations per address (sasl_limits.go)

	createMu sync.Mutex // serialises auto-creation so two requests create a topic once

	tenantsMu sync.Mutex                     // serialises changeTenants
	tenants   *tenants.Store                 // run-time changes to users and quotas (tenants.go); nil without a data directory
	quotas    *quota.Manager                 // byte-rate quotas in force and each user's rates (quotas.go)
	baseUsers []*auth.User                   // the users of the config file
	authz     atomic.Pointer[acl.Authorizer] // the ACL bindings in force (acls.go)

	groups *groups.Coordinator
	txns   *txn.Coordinator // transactions (txn.go)

	gnetL   *listener   // the listener gnet serves (nil: every listener is a stream listener)
	streams []*listener // listeners served a goroutine per connection (tls.go)
}

// Start listens and serves until Shutdown. It returns once the listener is bound.
func Start(cfg Config, blog *batchlog.Log) (*Server, error) {
	cfg.setDefaults()
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		blog:    blog,
		m:       cfg.Metrics,
		drainCh: make(chan struct{}),
		quotas:  quota.NewManager(),
	}
	s.tr = s.newTransport()
	if err := s.setupListeners(); err != nil {
		return nil, err
	}
	if err := s.openTenants(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := s.startGroups(); err != nil {
		return nil, fmt.Errorf("server: load groups: %w", err)
	}
	if err := s.startTxns(); err != nil {
		s.groups.Close()
		return nil, fmt.Errorf("server: load transactions: %w", err)
	}
	s.connTab.init()
	s.clock.Store(time.Now().UnixNano())
	s.reaperStop, s.reaperDone = make(chan struct{}), make(chan struct{})
	go s.reap(s.reaperStop, s.reaperDone)
	if s.gnetL == nil {
		if err := s.startStreams(); err != nil {
			s.stopReaper()
			s.closeCoordinators()
			return nil, err
		}
		s.addr = s.streams[0].addr.(*net.TCPAddr)
		return s, nil
	}
	var bootErr error // the advertised address's, from gnetBooted
	g, err := s.tr.ServeGnet(&endpoint{s, s.gnetL}, transport.GnetConfig{
		Addr:    s.cfg.Listen, // setupListeners' choice: the first plaintext listener's address
		Workers: s.cfg.Workers,
		Booted:  func(addr *net.TCPAddr) error { bootErr = s.gnetBooted(addr); return bootErr },
	})
	if err != nil {
		s.stopReaper()
		s.closeCoordinators()
		if bootErr != nil {
			return nil, bootErr
		}
		return nil, fmt.Errorf("server: %w", err)
	}
	s.gnet = g
	s.log.Info("listening", "listener", s.gnetL.Name, "protocol", s.gnetL.Protocol, "addr", s.addr.String(), "advertise", net.JoinHostPort(s.advHost, strconv.Itoa(int(s.advPort))), "workers", cfg.Workers)
	if err := s.startStreams(); err != nil {
		_ = g.Stop()
		s.stopReaper()
		s.closeCoordinators()
		return nil, err
	}
	return s, nil
}

// newTransport is the transport every listener of s shares: the in-flight budget, frames of 8
// bytes (a request header's api key, version and correlation id) up to
// socket.request.max.bytes (SASL listeners lower it per connection: newConn), activity stamped
// with the reaper's clock (limits.go).
func (s *Server) newTransport() *transport.Transport {
	tc := transport.Config{
		Budget:        s.cfg.InflightBudget,
		PreAuthBudget: s.cfg.SaslServerMaxInflightBytes,
		MaxFrame:      s.cfg.MaxRequestBytes,
		MinFrame:      minFrame,
		Clock:         s.clock.Load,
		Logger:        s.log,
	}
	if s.m != nil {
		tc.Sent = s.m.Sent
	}
	return transport.New(tc)
}

// gnetBooted records the bound address of the gnet listener and settles the advertised one.
// The transport calls it before the event loops start, so no connection (Metadata reads
// advHost and advPort without a lock) can be served before they are set: clients already
// queued on the listener, as after a restart, are served the moment the loops start.
func (s *Server) gnetBooted(addr *net.TCPAddr) error {
	s.addr = addr
	adv := s.cfg.Advertise
	if adv == "" {
		adv = s.addr.String()
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return fmt.Errorf("server: --advertise %q: %w", adv, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("server: --advertise %q: bad port", adv)
	}
	s.advHost, s.advPort = host, int32(p)
	s.gnetL.addr, s.gnetL.advHost, s.gnetL.advPort = s.addr, s.advHost, s.advPort
	return nil
}

// Addr is the bound listener address.
func (s *Server) Addr() string { return s.addr.String() }

// Shutdown drains: it stops reading new requests and refuses new connections, waits until
// every request already read has been committed and answered (or ctx ends), then closes the
// listener and every connection. The caller closes the batch log afterwards.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.draining.CompareAndSwap(false, true) {
		close(s.drainCh)
	}
	s.tr.Drain()
	// Wait for the frames in flight. A polled counter rather than a WaitGroup: a loop may
	// start a frame at the moment draining begins, and a WaitGroup forbids an Add from zero
	// concurrent with Wait (the race detector reports it: crashtest's SIGTERM tests under
	// -race). The transport counts a frame before it checks draining, and Drain is called
	// before the count is read here, so a frame is either waited for or never started.
	var err error
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for err == nil && s.tr.InFlight() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			err = fmt.Errorf("server: drain: %w", ctx.Err())
		}
	}
	if err == nil {
		// Replies are queued to the loops with AsyncWritev; give them a moment to reach the
		// sockets before the loops close the connections.
		time.Sleep(50 * time.Millisecond)
	}
	s.closeCoordinators()
	s.closeStreams()
	s.stopReaper()
	if s.gnet == nil {
		return err
	}
	if stopErr := s.gnet.Stop(); stopErr != nil && err == nil && !errors.Is(stopErr, context.Canceled) {
		err = stopErr
	}
	return err
}

func (s *Server) stopReaper() {
	close(s.reaperStop)
	<-s.reaperDone
}
