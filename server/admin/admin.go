// Package admin is Inlet's Kafka admin APIs: the topic admin (19 CreateTopics, 20
// DeleteTopics, 21 DeleteRecords, 37 CreatePartitions), the configs (32 DescribeConfigs, 33
// AlterConfigs, 44 IncrementalAlterConfigs), the ACLs (29-31), the quotas and SCRAM users (48,
// 49, 50 and the run-time tenants they change) and the one-broker answers about replicas,
// log dirs, features and producers (35, 43, 45, 57, 61). One file per API key, in the manner
// of franz-go's kfake, each registering its API with the versions it serves, its
// authorization (package server/authz) and its handler. Package server serves them: the
// protocol (framing, dispatch, the data-path, group and transaction APIs) is server's, the
// changes to the node's catalog, configs and tenants are this package's.
//
// Path: server's registry takes every API here at init (APIs, server/admin_apis.go) -> server's
// dispatch decodes a request, runs its filter (authz.go) and calls its handler with the
// node's admin Server (New, built by server.Server.Start) and the Request -> the handler
// changes the catalog through the batch log (batchlog.Log), the tenants through package
// tenants (tenants.go), and answers by return value; server encodes the reply.
//
// Files beside the APIs: admin.go (Server, Config, Parts, New, the registry's API and
// Request), authz.go (the shorthands and the configuration and cluster-wide filters),
// acls.go (the bindings in force), tenants.go (run-time users, ACLs and quotas).
//
// Lock order: createMu (topic creation and configuration, shared with server's
// auto-creation) before the batch log's locks; tenantsMu (run-time tenant changes) before
// tenants.Store's, auth.Users' and package conn's connection table (closing a deleted user's
// connections), whose locks take no other.
package admin

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/auth"
	"inlet/batchlog"
	"inlet/batchlog/upkeep"
	"inlet/conn"
	"inlet/groups"
	"inlet/meta"
	"inlet/quota"
	"inlet/server/authz"
	"inlet/tenants"
	"inlet/wire"
)

// Config is what the admin APIs report and apply of the node's settings: package server's
// Config fields of the same names, defaults applied (DescribeConfigs reports them as
// STATIC_BROKER_CONFIG).
type Config struct {
	NodeID                       int32
	DefaultPartitions            int
	AutoCreateTopics             bool
	MaxPartitions                int // max.partitions (limits.go); 0: no bound
	MaxPartitionsPerPrincipal    int // max.partitions.per.principal (limits.go); 0: no bound
	MaxRequestBytes              int
	MaxMessageBytes              int // message.max.bytes when set to other than Kafka's default; 0: the default
	GroupInitialRebalanceDelay   time.Duration
	MaxConnections               int
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides map[string]int
	ConnectionsMaxIdle           time.Duration
	SaslServerMaxReceiveSize     int
	FetchMaxBytes                int
	FailedAuthenticationDelay    time.Duration
	OffsetsRetention             time.Duration
	TransactionalIDExpiration    time.Duration
	Upkeep                       upkeep.Config
	Logger                       *slog.Logger

	// Tenants (tenants.go, acls.go).
	Listeners                 []conn.Listener // their anonymous principals' prefixes are bindings
	Users                     *auth.Users     // the users the node publishes (kafka owns the copy); nil: no SASL users
	SuperUsers                []string
	AllowEveryoneIfNoACLFound bool
	Quotas                    quota.Bounds // the config file's

	// DisklessDefault: log.diskless.enable (--log-diskless-enable), new topics' diskless.enable.
	DisklessDefault bool
}

// Parts are the node's parts the admin APIs act on, built by package server.
type Parts struct {
	Log       *batchlog.Log       // the catalog's topics and configs, partition sizes, producers
	Net       *conn.Node          // the bound addresses; closing a deleted user's connections
	Groups    *groups.Coordinator // a deleted topic's committed offsets
	Quotas    *quota.Manager      // the quotas in force, published here
	CreateMu  *sync.Mutex         // serialises topic creation and configuration with auto-creation
	ACLs      *atomic.Pointer[acl.Authorizer]
	BaseUsers []*auth.User // the config file's users
	// RemoteStorage: the node has a remote tier, so a topic may set remote.storage.enable.
	RemoteStorage bool
	// Diskless: the node's diskless commit log (package diskless), nil without a bucket.
	Diskless Diskless
}

// Diskless is what the admin APIs ask of the diskless commit log: Describe writes a diskless
// topic's description (its catalog entry) to the bucket, before the change is answered.
type Diskless interface {
	Describe(ctx context.Context, t *batchlog.Topic) error
	// KeepTenants and KeepBrokerConfigs put a change of the run-time users, ACLs and quotas
	// or of a level's dynamic broker configs in the bucket; the change is made and answered
	// only once they return nil.
	KeepTenants(st *tenants.State) error
	KeepBrokerConfigs(level meta.BrokerLevel, configs map[string]string) error
	// KeepLogStart puts a diskless partition's log start, moved by DeleteRecords, in the
	// bucket; the log moves it and DeleteRecords answers only once it returns nil.
	KeepLogStart(topicID [16]byte, partition int32, start int64) error
}

// DescribeCreated puts a new diskless topic's description in the bucket or, failing that,
// deletes the topic (one the bucket does not know would not come back at a restore) and
// answers KAFKA_STORAGE_ERROR and why. Called under createMu (auto-creation holds it too).
func (s *Server) DescribeCreated(t *batchlog.Topic) (int16, string) {
	code, msg := s.describe(t)
	if code != 0 {
		if err := s.blog.DeleteTopic(t.Name); err != nil {
			s.log.Error("delete topic not described", "topic", t.Name, "err", err)
		}
	}
	return code, msg
}

// describe puts a diskless topic's catalog entry in the bucket (nothing for other topics):
// 0, or KAFKA_STORAGE_ERROR and why.
func (s *Server) describe(t *batchlog.Topic) (int16, string) {
	if s.diskless == nil || t == nil || !t.Settings.Diskless {
		return 0, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.diskless.Describe(ctx, t); err != nil {
		s.log.Error("diskless topic description not written", "topic", t.Name, "err", err)
		return wire.ErrKafkaStorageError, "the bucket did not take the topic's description: " + err.Error()
	}
	return 0, ""
}

// Server is the state the admin APIs share on one node.
type Server struct {
	cfg      Config
	log      *slog.Logger
	blog     *batchlog.Log
	net      *conn.Node
	groups   *groups.Coordinator
	createMu *sync.Mutex // Parts.CreateMu
	remote   bool        // Parts.RemoteStorage
	diskless Diskless    // Parts.Diskless

	tenantsMu sync.Mutex                      // serialises changeTenants
	tenants   *tenants.Store                  // run-time changes to users and quotas (tenants.go); nil without a data directory
	quotas    *quota.Manager                  // byte-rate quotas in force and each user's rates (conn/quotas.go)
	baseUsers []*auth.User                    // the users of the config file
	authz     *atomic.Pointer[acl.Authorizer] // the ACL bindings in force (acls.go), read by server's dispatch
}

// New builds the admin APIs' state on p and publishes the tenants: the run-time changes kept
// in the log's data directory (tenants.json) on top of cfg's users, bindings and quotas.
func New(cfg Config, p Parts) (*Server, error) {
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		blog:      p.Log,
		net:       p.Net,
		groups:    p.Groups,
		createMu:  p.CreateMu,
		quotas:    p.Quotas,
		baseUsers: p.BaseUsers,
		authz:     p.ACLs,
		remote:    p.RemoteStorage,
		diskless:  p.Diskless,
	}
	if err := s.openTenants(); err != nil {
		return nil, err
	}
	return s, nil
}

// API is one admin API key as package server's registry takes it.
type API struct {
	Key, Min, Max int16 // the versions advertised in ApiVersions
	// Handle answers a request decoded by kmsg; server encodes its response.
	Handle func(s *Server, r *Request, req kmsg.Request) (kmsg.Response, error)
	// Authz declares what the API checks and where; every API has one.
	Authz authz.Decl[*Server]
}

// Request is what a handler knows of the request it answers.
type Request struct {
	Conn     *conn.Conn // the connection it came on: its principal and security
	ClientID []byte     // the request header's client id (quotas); valid during the call
}

// apis is every API of the package, registered by its file's init.
var apis []API

func register(a API) { apis = append(apis, a) }

// APIs is every admin API, sorted by key.
func APIs() []API {
	out := append([]API(nil), apis...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// principal is r's authenticated principal (nil: none).
func principal(r *Request) *auth.Principal { return r.Conn.Principal() }
