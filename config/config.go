// Package config reads Inlet's YAML configuration file into plain settings: every
// command-line flag (same name, with '_' for '-'), the listeners and their security
// protocols, users and their SCRAM credentials and topic prefixes, their quotas, schemas,
// topic-to-subject bindings and the schema registry's TLS. examples/secure.yaml is a worked
// example.
//
// What runs: cmd/inlet calls Load (or Parse), FlagValues to set the flags the file names, and
// Resolve to check the structured sections into Settings. config builds no object of the node:
// cmd/inlet builds the user directory (auth.NewUsers) and the schema registry (schema.New)
// from the Settings, at start-up and on SIGHUP. config uses auth, quota and schema only for
// their value types and names.
//
// Precedence (cmd/inlet): built-in defaults, then the file, then flags given explicitly on
// the command line. A bad file stops start-up with an error that names the key (and its line)
// and the problem. Passwords are never read from the file itself: a user's password comes
// from a file or an environment variable and is turned into SCRAM credentials at once, or the
// file holds the SCRAM credentials (`inlet scram` prints them).
//
// Files: config.go. No locks.
package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"inlet/auth"
	"inlet/bytesize"
	"inlet/quota"
	"inlet/schema"
)

// File is the configuration file as written. Scalar flag keys are kept as YAML nodes so that
// errors can name their line; FlagValues turns them into flag settings.
type File struct {
	Listen            yaml.Node `yaml:"listen"`
	Advertise         yaml.Node `yaml:"advertise"`
	DataDir           yaml.Node `yaml:"data_dir"`
	Storage           yaml.Node `yaml:"storage"`
	SegmentBytes      yaml.Node `yaml:"segment_bytes"`
	SegmentIO         yaml.Node `yaml:"segment_io"`
	FetchCache        yaml.Node `yaml:"fetch_cache"`
	Workers           yaml.Node `yaml:"workers"`
	NodeID            yaml.Node `yaml:"node_id"`
	DefaultPartitions yaml.Node `yaml:"default_partitions"`
	AutoCreateTopics  yaml.Node `yaml:"auto_create_topics"`
	MaxRequestBytes   yaml.Node `yaml:"max_request_bytes"`
	MaxMessageBytes   yaml.Node `yaml:"max_message_bytes"`
	InflightBudget    yaml.Node `yaml:"inflight_budget"`
	MaxGroupBytes     yaml.Node `yaml:"max_group_bytes"`
	MinFreeBytes      yaml.Node `yaml:"min_free_bytes"`
	LogLevel          yaml.Node `yaml:"log_level"`
	CPUProfile        yaml.Node `yaml:"cpu_profile"`
	MemProfile        yaml.Node `yaml:"mem_profile"`
	RegistryListen    yaml.Node `yaml:"registry_listen"`
	SessionLifetime   yaml.Node `yaml:"sasl_session_lifetime"`
	MetricsListen     yaml.Node `yaml:"metrics_listen"`
	Pprof             yaml.Node `yaml:"pprof"`

	MaxConnections                 yaml.Node `yaml:"max_connections"`
	MaxConnectionsPerIP            yaml.Node `yaml:"max_connections_per_ip"`
	MaxConnectionsPerIPOverrides   yaml.Node `yaml:"max_connections_per_ip_overrides"`
	MaxConnectionCreationRate      yaml.Node `yaml:"max_connection_creation_rate"`
	SuperUsers                     yaml.Node `yaml:"super_users"`
	AllowEveryoneIfNoACLFound      yaml.Node `yaml:"allow_everyone_if_no_acl_found"`
	ConnectionsMaxIdleMs           yaml.Node `yaml:"connections_max_idle_ms"`
	SaslServerMaxReceiveSize       yaml.Node `yaml:"sasl_server_max_receive_size"`
	SaslServerMaxInflightBytes     yaml.Node `yaml:"sasl_server_max_inflight_bytes"`
	FetchMaxBytes                  yaml.Node `yaml:"fetch_max_bytes"`
	FailedAuthDelayMs              yaml.Node `yaml:"connection_failed_authentication_delay_ms"`
	GroupInitialRebalanceDelay     yaml.Node `yaml:"group_initial_rebalance_delay_ms"`
	RebalanceProtocols             yaml.Node `yaml:"group_coordinator_rebalance_protocols"`
	ConsumerSessionTimeoutMs       yaml.Node `yaml:"group_consumer_session_timeout_ms"`
	ConsumerHeartbeatIntervalMs    yaml.Node `yaml:"group_consumer_heartbeat_interval_ms"`
	ConsumerAssignors              yaml.Node `yaml:"group_consumer_assignors"`
	ConsumerMaxSize                yaml.Node `yaml:"group_consumer_max_size"`
	MaxConsumerMembersPerPrincipal yaml.Node `yaml:"max_consumer_members_per_principal"`
	MaxSubscribedTopicsPerMember   yaml.Node `yaml:"max_subscribed_topics_per_member"`
	MaxRegexesPerGroup             yaml.Node `yaml:"max_regexes_per_group"`
	ProducerIDExpirationMs         yaml.Node `yaml:"producer_id_expiration_ms"`
	LogRetentionCheckIntervalMs    yaml.Node `yaml:"log_retention_check_interval_ms"`
	OffsetsRetentionMinutes        yaml.Node `yaml:"offsets_retention_minutes"`
	TransactionalIDExpirationMs    yaml.Node `yaml:"transactional_id_expiration_ms"`

	S3Bucket               yaml.Node `yaml:"s3_bucket"`
	S3Endpoint             yaml.Node `yaml:"s3_endpoint"`
	S3Region               yaml.Node `yaml:"s3_region"`
	S3Prefix               yaml.Node `yaml:"s3_prefix"`
	S3PathStyle            yaml.Node `yaml:"s3_path_style"`
	RestoreFromRemote      yaml.Node `yaml:"restore_from_remote"`
	RemoteObjectBytes      yaml.Node `yaml:"remote_object_bytes"`
	RemoteUploadIntervalMs yaml.Node `yaml:"remote_upload_interval_ms"`
	RemoteReadCache        yaml.Node `yaml:"remote_read_cache"`
	RemoteUploadRate       yaml.Node `yaml:"remote_upload_max_bytes_per_sec"`
	BucketLeaseMs          yaml.Node `yaml:"bucket_lease_ms"`
	Standby                yaml.Node `yaml:"standby"`
	ClusterNodes           yaml.Node `yaml:"cluster_nodes"`

	LogDisklessEnable            yaml.Node `yaml:"log_diskless_enable"`
	DisklessCommitIntervalMs     yaml.Node `yaml:"diskless_commit_interval_ms"`
	DisklessCommitBytes          yaml.Node `yaml:"diskless_commit_bytes"`
	DisklessMaxPutsInFlight      yaml.Node `yaml:"diskless_max_puts_in_flight"`
	DisklessMaxPendingBytes      yaml.Node `yaml:"diskless_max_pending_bytes"`
	DisklessRequestTimeoutMs     yaml.Node `yaml:"diskless_request_timeout_ms"`
	DisklessCheckpointIntervalMs yaml.Node `yaml:"diskless_checkpoint_interval_ms"`
	MemoryLimit                  yaml.Node `yaml:"memory_limit"`

	MaxConcurrentProducerIDs             yaml.Node `yaml:"max_concurrent_producer_ids"`
	MaxConcurrentProducerIDsPerPrincipal yaml.Node `yaml:"max_concurrent_producer_ids_per_principal"`
	MaxPartitions                        yaml.Node `yaml:"max_partitions"`
	MaxPartitionsPerPrincipal            yaml.Node `yaml:"max_partitions_per_principal"`
	MaxGroups                            yaml.Node `yaml:"max_groups"`
	MaxGroupsPerPrincipal                yaml.Node `yaml:"max_groups_per_principal"`

	Listeners []Listener     `yaml:"listeners"`
	Users     []User         `yaml:"users"`
	Schemas   []Schema       `yaml:"schemas"`
	Topics    []TopicBinding `yaml:"topics"`
	Quotas    []Quota        `yaml:"quotas"`

	// RegistryTLS serves the schema registry over HTTPS (the keys of a listener's tls;
	// usually the same certificate). Absent: plain HTTP.
	RegistryTLS *TLS `yaml:"registry_tls"`

	dir string // the file's directory: relative paths in the file are relative to it
}

// Kind is how a flag key's value is checked.
type Kind int

const (
	String Kind = iota
	Int
	Bool
	Size
	SizeOrZero // a byte count, or 0 for none
	Duration
)

// FlagKeys maps every scalar key to its kind; the key with '_' replaced by '-' is the flag
// name (cmd/inlet's test checks that every flag but --config and --version has a key, and every
// key a flag).
var FlagKeys = map[string]Kind{
	"listen": String, "advertise": String, "data_dir": String, "storage": String,
	"segment_bytes": Size, "segment_io": String, "fetch_cache": SizeOrZero, "workers": Int, "node_id": Int, "default_partitions": Int,
	"auto_create_topics": Bool, "max_request_bytes": Size, "max_message_bytes": Size,
	"inflight_budget": Size, "max_group_bytes": Size, "min_free_bytes": SizeOrZero, "log_level": String,
	"cpu_profile": String, "mem_profile": String, "registry_listen": String,
	"sasl_session_lifetime": Duration,
	"max_connections":       Int, "max_connections_per_ip": Int, "connections_max_idle_ms": Int,
	"max_connections_per_ip_overrides": String, "super_users": String, "max_connection_creation_rate": Int,
	"allow_everyone_if_no_acl_found": Bool,
	"sasl_server_max_receive_size":   Size, "connection_failed_authentication_delay_ms": Int,
	"sasl_server_max_inflight_bytes": Size, "fetch_max_bytes": Size,
	"group_initial_rebalance_delay_ms": Int, "producer_id_expiration_ms": Int, "log_retention_check_interval_ms": Int,
	"group_coordinator_rebalance_protocols": String, "group_consumer_session_timeout_ms": Int,
	"group_consumer_heartbeat_interval_ms": Int, "group_consumer_assignors": String, "group_consumer_max_size": Int,
	"max_consumer_members_per_principal": Int, "max_subscribed_topics_per_member": Int, "max_regexes_per_group": Int,
	"metrics_listen": String, "pprof": Bool,
	"offsets_retention_minutes": Int, "transactional_id_expiration_ms": Int,
	"s3_bucket": String, "s3_endpoint": String, "s3_region": String, "s3_prefix": String, "s3_path_style": Bool,
	"restore_from_remote": Bool, "remote_object_bytes": Size, "remote_upload_interval_ms": Int, "remote_read_cache": Size, "remote_upload_max_bytes_per_sec": SizeOrZero, "bucket_lease_ms": Int, "standby": Bool, "cluster_nodes": String, "memory_limit": String,
	"log_diskless_enable": Bool, "diskless_commit_interval_ms": Int, "diskless_commit_bytes": Size, "diskless_max_pending_bytes": Size, "diskless_request_timeout_ms": Int, "diskless_checkpoint_interval_ms": Int, "diskless_max_puts_in_flight": Int,
	"max_concurrent_producer_ids": Int, "max_concurrent_producer_ids_per_principal": Int, "max_partitions": Int, "max_partitions_per_principal": Int, "max_groups": Int, "max_groups_per_principal": Int,
}

// Listener is one Kafka listener.
type Listener struct {
	Name             string   `yaml:"name"`
	Address          string   `yaml:"address"`
	Advertise        string   `yaml:"advertise"`
	SecurityProtocol string   `yaml:"security_protocol"`
	SASLMechanisms   []string `yaml:"sasl_mechanisms"`
	TLS              *TLS     `yaml:"tls"`
	// Prefixes of clients that do not authenticate (PLAINTEXT; SSL without a client
	// certificate). Absent: such clients are unrestricted.
	TopicPrefixes []string `yaml:"topic_prefixes"`
	GroupPrefixes []string `yaml:"group_prefixes"`
}

// TLS is a listener's TLS settings (SSL and SASL_SSL).
type TLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
	ClientAuth   string `yaml:"client_auth"` // none (default), request, require
	MinVersion   string `yaml:"min_version"` // 1.2 (default) or 1.3
}

// User is one user.
type User struct {
	Name                    string      `yaml:"name"`
	Password                *string     `yaml:"password"` // refused: see the package comment
	PasswordFile            string      `yaml:"password_file"`
	PasswordEnv             string      `yaml:"password_env"`
	Iterations              int         `yaml:"iterations"`
	ScramSHA256             *Credential `yaml:"scram_sha_256"`
	ScramSHA512             *Credential `yaml:"scram_sha_512"`
	TopicPrefixes           []string    `yaml:"topic_prefixes"`
	GroupPrefixes           []string    `yaml:"group_prefixes"`
	TransactionalIDPrefixes []string    `yaml:"transactional_id_prefixes"`
}

// Credential is a SCRAM credential; byte fields are base64 (standard encoding).
type Credential struct {
	Salt       string `yaml:"salt"`
	Iterations int    `yaml:"iterations"`
	StoredKey  string `yaml:"stored_key"`
	ServerKey  string `yaml:"server_key"`
}

// Quota is a user's byte-rate quotas (Kafka's client quotas of a user entity), or the
// default user's when User is empty. AlterClientQuotas changes them at run time.
type Quota struct {
	User             string `yaml:"user"`
	ProducerByteRate *int64 `yaml:"producer_byte_rate"`
	ConsumerByteRate *int64 `yaml:"consumer_byte_rate"`
	// ControllerMutationRate is KIP-599's controller_mutation_rate: partitions created or
	// deleted per second.
	ControllerMutationRate *int64 `yaml:"controller_mutation_rate"`
}

// Schema is one schema version under a subject.
type Schema struct {
	Subject    string `yaml:"subject"`
	Type       string `yaml:"type"` // AVRO (default) or JSON
	Schema     string `yaml:"schema"`
	SchemaFile string `yaml:"schema_file"`
	ID         int    `yaml:"id"`
	Version    int    `yaml:"version"`
}

// TopicBinding binds a topic to its key and value subjects.
type TopicBinding struct {
	Name         string `yaml:"name"`
	KeySubject   string `yaml:"key_subject"`
	ValueSubject string `yaml:"value_subject"`
}

// Load reads and parses the file at path.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	f.dir = filepath.Dir(path)
	return f, nil
}

// Parse parses a configuration; unknown keys are errors.
func Parse(b []byte) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	f := &File{dir: "."}
	if err := dec.Decode(f); err != nil {
		if errors.Is(err, io.EOF) {
			return f, nil // an empty file
		}
		return nil, err
	}
	if _, err := f.FlagValues(); err != nil {
		return nil, err
	}
	return f, nil
}

// FlagValues lists the flag keys the file sets, by flag name (with '-'), with their values
// checked against their kinds.
func (f *File) FlagValues() (map[string]string, error) {
	out := map[string]string{}
	v := reflect.ValueOf(f).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		key := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		kind, ok := FlagKeys[key]
		if !ok {
			continue
		}
		n := v.Field(i).Addr().Interface().(*yaml.Node)
		if n.Kind == 0 {
			continue
		}
		if n.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: %s: want a single value", n.Line, key)
		}
		if err := checkKind(kind, n.Value); err != nil {
			return nil, fmt.Errorf("line %d: %s: %v", n.Line, key, err)
		}
		out[strings.ReplaceAll(key, "_", "-")] = n.Value
	}
	return out, nil
}

func checkKind(k Kind, v string) error {
	switch k {
	case Int:
		if _, err := strconv.Atoi(v); err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
	case Bool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
	case Size:
		if _, err := bytesize.Parse(v); err != nil {
			return err
		}
	case SizeOrZero:
		if _, err := bytesize.ParseOrZero(v); err != nil {
			return err
		}
	case Duration:
		if _, err := time.ParseDuration(v); err != nil && v != "0" {
			return fmt.Errorf("%q is not a duration (like 30m or 1h)", v)
		}
	}
	return nil
}

// Protocols are Kafka's security.protocol values.
var Protocols = []string{"PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"}

// ListenerSpec is a listener resolved: certificates loaded, principal built.
type ListenerSpec struct {
	Name       string
	Address    string
	Advertise  string
	Protocol   string
	Mechanisms []string
	TLS        *tls.Config
	Anonymous  *auth.Principal // nil: unauthenticated clients are unrestricted
}

// Settings is everything the node is built with beyond the flags, as plain values: the
// listeners, the users with their SCRAM credentials, the quotas and the schemas with their
// topic bindings. cmd/inlet builds the user directory (auth.NewUsers) and the schema registry
// (schema.New) from them.
type Settings struct {
	Listeners []ListenerSpec // empty: the --listen flag's single PLAINTEXT listener
	Users     []auth.User
	// SchemaDefs and SchemaBindings are the schemas and the topic-to-subject bindings; both
	// empty when no schema is configured (then there is no registry).
	SchemaDefs     []schema.Def
	SchemaBindings []schema.Binding
	Quotas         quota.Bounds // by user (quota.DefaultUser: every user without its own)

	RegistryTLS *tls.Config // nil: the schema registry speaks plain HTTP
}

// HasSchemas reports whether the file configures any schema or binding, so that the node
// serves a schema registry.
func (s *Settings) HasSchemas() bool { return len(s.SchemaDefs) > 0 || len(s.SchemaBindings) > 0 }

// Resolve checks the structured sections, reads password files and environment variables,
// derives SCRAM credentials, loads certificates and reads schema files. getenv is os.Getenv
// outside tests. The schemas are compiled, and users' names checked for repeats, when the
// node builds its registry and user directory from the Settings.
func (f *File) Resolve(getenv func(string) string) (*Settings, error) {
	r := &Settings{}
	us, err := f.resolveUsers(getenv)
	if err != nil {
		return nil, err
	}
	r.Users = us
	names := map[string]bool{}
	for i, l := range f.Listeners {
		key := fmt.Sprintf("listeners[%d]", i)
		spec, err := f.resolveListener(key, l, len(us) > 0)
		if err != nil {
			return nil, err
		}
		if names[spec.Name] {
			return nil, fmt.Errorf("%s.name: %q used twice", key, spec.Name)
		}
		names[spec.Name] = true
		r.Listeners = append(r.Listeners, spec)
	}
	if f.RegistryTLS != nil {
		if r.RegistryTLS, err = f.tlsConfig("registry_tls", f.RegistryTLS); err != nil {
			return nil, err
		}
	}
	if r.SchemaDefs, r.SchemaBindings, err = f.resolveSchemas(); err != nil {
		return nil, err
	}
	if r.Quotas, err = f.resolveQuotas(); err != nil {
		return nil, err
	}
	return r, nil
}

// resolveQuotas checks the quotas: one entry per user, rates of at least 1 byte per second.
func (f *File) resolveQuotas() (quota.Bounds, error) {
	out := quota.Bounds{}
	for i, q := range f.Quotas {
		key := fmt.Sprintf("quotas[%d]", i)
		entity := q.User
		if entity == "" {
			entity = quota.DefaultUser
		}
		if _, dup := out[entity]; dup {
			return nil, fmt.Errorf("%s.user: %q has two entries", key, q.User)
		}
		out[entity] = map[string]float64{}
		for name, v := range map[string]*int64{quota.ProducerByteRate: q.ProducerByteRate, quota.ConsumerByteRate: q.ConsumerByteRate, quota.ControllerMutationRate: q.ControllerMutationRate} {
			if v == nil {
				continue
			}
			if *v < 1 {
				return nil, fmt.Errorf("%s.%s: %d; a rate is at least 1 byte per second", key, name, *v)
			}
			out[entity][name] = float64(*v)
		}
	}
	return out, nil
}

func (f *File) path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(f.dir, p)
}

func (f *File) resolveListener(key string, l Listener, haveUsers bool) (ListenerSpec, error) {
	spec := ListenerSpec{Name: l.Name, Address: l.Address, Advertise: l.Advertise, Protocol: l.SecurityProtocol}
	if spec.Protocol == "" {
		spec.Protocol = "PLAINTEXT"
	}
	spec.Protocol = strings.ToUpper(spec.Protocol)
	if !contains(Protocols, spec.Protocol) {
		return spec, fmt.Errorf("%s.security_protocol: %q is not one of %s", key, l.SecurityProtocol, strings.Join(Protocols, ", "))
	}
	if spec.Name == "" {
		spec.Name = spec.Protocol
	}
	if spec.Address == "" {
		return spec, fmt.Errorf("%s.address: missing (host:port)", key)
	}
	if _, _, err := splitHostPort(spec.Address); err != nil {
		return spec, fmt.Errorf("%s.address: %v", key, err)
	}
	if spec.Advertise != "" {
		if _, _, err := splitHostPort(spec.Advertise); err != nil {
			return spec, fmt.Errorf("%s.advertise: %v", key, err)
		}
	}
	sasl := strings.HasPrefix(spec.Protocol, "SASL_")
	if sasl {
		if !haveUsers {
			return spec, fmt.Errorf("%s.security_protocol: %s needs users, and none are configured", key, spec.Protocol)
		}
		spec.Mechanisms = l.SASLMechanisms
		if len(spec.Mechanisms) == 0 {
			spec.Mechanisms = auth.Mechanisms
		}
		for j, m := range spec.Mechanisms {
			if !auth.KnownMechanism(m) {
				return spec, fmt.Errorf("%s.sasl_mechanisms[%d]: %q is not one of %s", key, j, m, strings.Join(auth.Mechanisms, ", "))
			}
		}
		if len(l.TopicPrefixes) > 0 || len(l.GroupPrefixes) > 0 {
			return spec, fmt.Errorf("%s.topic_prefixes: a SASL listener's clients take their users' prefixes", key)
		}
	} else if len(l.SASLMechanisms) > 0 {
		return spec, fmt.Errorf("%s.sasl_mechanisms: set, but security_protocol is %s", key, spec.Protocol)
	}
	tlsOn := strings.HasSuffix(spec.Protocol, "SSL")
	switch {
	case tlsOn && l.TLS == nil:
		return spec, fmt.Errorf("%s.tls: %s needs cert_file and key_file", key, spec.Protocol)
	case !tlsOn && l.TLS != nil:
		return spec, fmt.Errorf("%s.tls: set, but security_protocol is %s", key, spec.Protocol)
	case tlsOn:
		c, err := f.tlsConfig(key+".tls", l.TLS)
		if err != nil {
			return spec, err
		}
		spec.TLS = c
	}
	if l.TopicPrefixes != nil || l.GroupPrefixes != nil {
		spec.Anonymous = &auth.Principal{Name: "ANONYMOUS", TopicPrefixes: l.TopicPrefixes, GroupPrefixes: l.GroupPrefixes}
	}
	return spec, nil
}

func (f *File) tlsConfig(key string, t *TLS) (*tls.Config, error) {
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, fmt.Errorf("%s: cert_file and key_file are both required", key)
	}
	cert, err := tls.LoadX509KeyPair(f.path(t.CertFile), f.path(t.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("%s.cert_file/key_file: %v", key, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	switch t.MinVersion {
	case "", "1.2":
	case "1.3":
		c.MinVersion = tls.VersionTLS13
	default:
		return nil, fmt.Errorf("%s.min_version: %q is not 1.2 or 1.3", key, t.MinVersion)
	}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(f.path(t.ClientCAFile))
		if err != nil {
			return nil, fmt.Errorf("%s.client_ca_file: %v", key, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.client_ca_file: no PEM certificate in %s", key, t.ClientCAFile)
		}
		c.ClientCAs = pool
	}
	switch t.ClientAuth {
	case "", "none":
		if t.ClientCAFile != "" {
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
	case "request":
		c.ClientAuth = tls.VerifyClientCertIfGiven
	case "require":
		c.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("%s.client_auth: %q is not none, request or require", key, t.ClientAuth)
	}
	if c.ClientAuth != tls.NoClientCert && c.ClientCAs == nil {
		return nil, fmt.Errorf("%s.client_ca_file: client_auth %s needs it", key, t.ClientAuth)
	}
	return c, nil
}

func (f *File) resolveUsers(getenv func(string) string) ([]auth.User, error) {
	var out []auth.User
	for i, u := range f.Users {
		key := fmt.Sprintf("users[%d]", i)
		if u.Name == "" {
			return nil, fmt.Errorf("%s.name: missing", key)
		}
		key = fmt.Sprintf("users[%d] (%s)", i, u.Name)
		if u.Password != nil {
			return nil, fmt.Errorf("%s.password: passwords are not accepted in the config file; use password_file, password_env, or scram_sha_256/scram_sha_512 credentials (`inlet scram` prints them)", key)
		}
		au := auth.User{Principal: auth.Principal{Name: u.Name, TopicPrefixes: u.TopicPrefixes, GroupPrefixes: u.GroupPrefixes, TransactionalIDPrefixes: u.TransactionalIDPrefixes}}
		if len(u.TopicPrefixes) == 0 {
			return nil, fmt.Errorf("%s.topic_prefixes: missing (a user without prefixes could touch no topic; use \"*\" for all)", key)
		}
		var password string
		switch {
		case u.PasswordFile != "" && u.PasswordEnv != "":
			return nil, fmt.Errorf("%s: password_file and password_env are exclusive", key)
		case u.PasswordFile != "":
			b, err := os.ReadFile(f.path(u.PasswordFile))
			if err != nil {
				return nil, fmt.Errorf("%s.password_file: %v", key, err)
			}
			password = strings.TrimRight(string(b), "\r\n")
			if password == "" {
				return nil, fmt.Errorf("%s.password_file: %s is empty", key, u.PasswordFile)
			}
		case u.PasswordEnv != "":
			password = getenv(u.PasswordEnv)
			if password == "" {
				return nil, fmt.Errorf("%s.password_env: environment variable %s is empty or unset", key, u.PasswordEnv)
			}
		}
		if password != "" {
			if u.ScramSHA256 != nil || u.ScramSHA512 != nil {
				return nil, fmt.Errorf("%s: give either a password (file or env) or SCRAM credentials, not both", key)
			}
			iters := u.Iterations
			if iters == 0 {
				iters = auth.DefaultIterations
			}
			for _, m := range []struct {
				mech string
				dst  **auth.Credential
			}{{auth.ScramSHA256, &au.SHA256}, {auth.ScramSHA512, &au.SHA512}} {
				c, err := auth.NewCredential(m.mech, password, iters)
				if err != nil {
					return nil, fmt.Errorf("%s.iterations: %v", key, err)
				}
				*m.dst = &c
			}
		} else if u.Iterations != 0 {
			return nil, fmt.Errorf("%s.iterations: only used with password_file or password_env", key)
		}
		for _, m := range []struct {
			key string
			c   *Credential
			dst **auth.Credential
		}{{"scram_sha_256", u.ScramSHA256, &au.SHA256}, {"scram_sha_512", u.ScramSHA512, &au.SHA512}} {
			if m.c == nil {
				continue
			}
			c, err := m.c.decode()
			if err != nil {
				return nil, fmt.Errorf("%s.%s.%v", key, m.key, err)
			}
			*m.dst = c
		}
		out = append(out, au)
	}
	return out, nil
}

func (c *Credential) decode() (*auth.Credential, error) {
	out := &auth.Credential{Iterations: c.Iterations}
	if c.Iterations < auth.MinIterations || c.Iterations > auth.MaxIterations {
		return nil, fmt.Errorf("iterations: %d outside [%d, %d]", c.Iterations, auth.MinIterations, auth.MaxIterations)
	}
	for _, fld := range []struct {
		key string
		v   string
		dst *[]byte
	}{{"salt", c.Salt, &out.Salt}, {"stored_key", c.StoredKey, &out.StoredKey}, {"server_key", c.ServerKey, &out.ServerKey}} {
		b, err := base64.StdEncoding.DecodeString(fld.v)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%s: missing or not base64", fld.key)
		}
		*fld.dst = b
	}
	return out, nil
}

// resolveSchemas reads the schemas (inline or from their files) and the topic bindings.
func (f *File) resolveSchemas() ([]schema.Def, []schema.Binding, error) {
	var defs []schema.Def
	for i, s := range f.Schemas {
		key := fmt.Sprintf("schemas[%d]", i)
		if s.Subject == "" {
			return nil, nil, fmt.Errorf("%s.subject: missing", key)
		}
		key = fmt.Sprintf("schemas[%d] (%s)", i, s.Subject)
		text := s.Schema
		switch {
		case s.Schema != "" && s.SchemaFile != "":
			return nil, nil, fmt.Errorf("%s: schema and schema_file are exclusive", key)
		case s.SchemaFile != "":
			b, err := os.ReadFile(f.path(s.SchemaFile))
			if err != nil {
				return nil, nil, fmt.Errorf("%s.schema_file: %v", key, err)
			}
			text = string(b)
		case s.Schema == "":
			return nil, nil, fmt.Errorf("%s.schema: missing (or schema_file)", key)
		}
		t := schema.Type(strings.ToUpper(s.Type))
		if t == "" {
			t = schema.Avro
		}
		if t != schema.Avro && t != schema.JSON {
			return nil, nil, fmt.Errorf("%s.type: %q is not AVRO or JSON", key, s.Type)
		}
		defs = append(defs, schema.Def{Subject: s.Subject, Type: t, Text: text, ID: s.ID, Version: s.Version})
	}
	var bindings []schema.Binding
	for i, t := range f.Topics {
		if t.Name == "" {
			return nil, nil, fmt.Errorf("topics[%d].name: missing", i)
		}
		bindings = append(bindings, schema.Binding{Topic: t.Name, KeySubject: t.KeySubject, ValueSubject: t.ValueSubject})
	}
	return defs, bindings, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func splitHostPort(a string) (string, int, error) {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("%q is not host:port", a)
	}
	p, err := strconv.Atoi(a[i+1:])
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("%q has a bad port", a)
	}
	return a[:i], p, nil
}
