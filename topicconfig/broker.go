package topicconfig

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// BrokerDef is one broker config as DescribeConfigs reports it: Kafka's name, type, default
// and documentation (its KafkaConfig and LogConfig definitions), and whether it can be
// changed at run time through IncrementalAlterConfigs (Kafka's dynamic broker configs).
type BrokerDef struct {
	Name    string
	Type    Type
	Default string // "" with Null set: no value (null)
	Null    bool
	Doc     string
	Dynamic bool
	// Topic is the topic config this broker config is the default of ("" for none), and
	// Scale what one unit of it is in the topic config's unit (log.retention.hours is
	// 3,600,000 ms).
	Topic string
	Scale int64
	// Ignored: a dynamic config of Kafka's that means nothing here, accepted and ignored
	// (ignoredDynamic).
	Ignored bool
}

// Kafka's documentation of its broker configs, as KafkaConfig and LogConfig write it. The
// broker synonyms of topic configs are added from defs (brokerSynonymDocs has their text).
var brokerDefs = []*BrokerDef{
	{Name: "advertised.listeners", Type: String, Doc: "Listeners to publish to ZooKeeper or the controller for clients to use, if different than the listeners config property."},
	{Name: "auto.create.topics.enable", Type: Boolean, Default: "true", Doc: "Enable auto creation of topic on the server."},
	{Name: "broker.id", Type: Int, Default: "-1", Doc: "The broker id for this server."},
	{Name: "connection.failed.authentication.delay.ms", Type: Int, Default: "100", Doc: "Connection close delay on failed authentication: this is the time (in milliseconds) by which connection close will be delayed on authentication failure."},
	{Name: "connections.max.idle.ms", Type: Long, Default: "600000", Doc: "Idle connections timeout: the server socket processor threads close the connections that idle more than this."},
	{Name: "default.replication.factor", Type: Int, Default: "1", Doc: "The replication factors for automatically created topics."},
	{Name: "delete.topic.enable", Type: Boolean, Default: "true", Doc: "Enables delete topic. Delete topic through the admin tool will have no effect if this config is turned off."},
	{Name: "group.initial.rebalance.delay.ms", Type: Int, Default: "3000", Doc: "The amount of time the group coordinator will wait for more consumers to join a new group before performing the first rebalance."},
	{Name: "group.max.session.timeout.ms", Type: Int, Default: "1800000", Doc: "The maximum allowed session timeout for registered consumers."},
	{Name: "group.min.session.timeout.ms", Type: Int, Default: "6000", Doc: "The minimum allowed session timeout for registered consumers."},
	{Name: "fetch.max.bytes", Type: Int, Default: "57671680", Doc: "The maximum number of bytes we will return for a fetch request. Must be at least 1024."},
	{Name: "listeners", Type: String, Doc: "Listener List - Comma-separated list of URIs we will listen on and the listener names."},
	{Name: "log.cleaner.backoff.ms", Type: Long, Default: "15000", Dynamic: true, Doc: "The amount of time to sleep when there are no logs to clean."},
	{Name: "log.cleaner.dedupe.buffer.size", Type: Long, Default: "134217728", Dynamic: true, Doc: "The total memory used for log deduplication across all cleaner threads."},
	{Name: "log.cleaner.enable", Type: Boolean, Default: "true", Doc: "Enable the log cleaner process to run on the server."},
	{Name: "log.cleaner.io.buffer.load.factor", Type: Double, Default: "0.9", Dynamic: true, Doc: "Log cleaner dedupe buffer load factor. The percentage full the dedupe buffer can become."},
	{Name: "log.cleaner.io.buffer.size", Type: Int, Default: "524288", Dynamic: true, Doc: "The total memory used for log cleaner I/O buffers across all cleaner threads."},
	{Name: "log.cleaner.io.max.bytes.per.second", Type: Double, Default: "1.7976931348623157E308", Dynamic: true, Doc: "The log cleaner will be throttled so that the sum of its read and write i/o will be less than this value on average."},
	{Name: "log.cleaner.threads", Type: Int, Default: "1", Dynamic: true, Doc: "The number of background threads to use for log cleaning."},
	{Name: "log.retention.check.interval.ms", Type: Long, Default: "300000", Doc: "The frequency in milliseconds that the log cleaner checks whether any log is eligible for deletion."},
	{Name: "max.connections", Type: Int, Default: "2147483647", Doc: "The maximum number of connections we allow in the broker at any time."},
	{Name: "max.connections.per.ip", Type: Int, Default: "2147483647", Doc: "The maximum number of connections we allow from each ip address."},
	{Name: "max.connections.per.ip.overrides", Type: String, Default: "", Doc: "A comma-separated list of per-ip or hostname overrides to the default maximum number of connections. An example value is \"hostName:100,127.0.0.1:200\"."},
	{Name: "node.id", Type: Int, Default: "-1", Doc: "The node ID associated with the roles this process is playing."},
	{Name: "num.partitions", Type: Int, Default: "1", Doc: "The default number of log partitions per topic."},
	{Name: "offset.metadata.max.bytes", Type: Int, Default: "4096", Doc: "The maximum size for a metadata entry associated with an offset commit."},
	{Name: "offsets.retention.minutes", Type: Int, Default: "10080", Doc: "For subscribed consumers, committed offset of a specific partition will be expired and discarded after this period of time once its consumer group becomes empty."},
	{Name: "offsets.topic.replication.factor", Type: Short, Default: "3", Doc: "The replication factor for the offsets topic."},
	{Name: "producer.id.expiration.ms", Type: Int, Default: "86400000", Doc: "The time in ms that a topic partition leader will wait before expiring producer IDs. Producer IDs will not expire while a transaction associated to them is still ongoing."},
	{Name: "quota.window.size.seconds", Type: Int, Default: "1", Doc: "The time span of each sample for client quotas."},
	{Name: "sasl.server.max.receive.size", Type: Int, Default: "524288", Doc: "The maximum receive size allowed before and during initial SASL authentication."},
	{Name: "socket.request.max.bytes", Type: Int, Default: "104857600", Doc: "The maximum number of bytes in a socket request."},
	{Name: "super.users", Type: String, Default: "", Doc: "List of users that will have super user access to all resources. Principals separated by semicolons, e.g. User:admin;User:ops."},
	{Name: "transactional.id.expiration.ms", Type: Int, Default: "604800000", Doc: "The time in ms that the transaction coordinator will wait without receiving any transaction status updates for the current transaction before expiring its transactional id. Transactional IDs will not expire while a the transaction is still ongoing."},
	{Name: "transaction.state.log.min.isr", Type: Int, Default: "2", Doc: "The minimum number of replicas that must acknowledge a write to transaction topic in order to be considered successful."},
	{Name: "transaction.state.log.replication.factor", Type: Short, Default: "3", Doc: "The replication factor for the transaction topic."},
}

// ignoredDynamic are Kafka 3.9's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs)
// that mean nothing on this node: thread pools it does not have, metric reporters, Kerberos
// and OAUTHBEARER login refresh, inter-broker SASL, JSSE provider knobs, transaction
// verification and tiered storage. They are accepted (type-checked, stored, described back
// as set) and ignored, so a tool that sets them on a Kafka broker does not fail here. The
// dynamic configs that would mean something (listeners, keystores, SASL mechanisms and JAAS,
// connection limits) are refused: this node takes them from its config file, and accepting
// one it does not apply would tell the operator a change was made.
var ignoredDynamic = []*BrokerDef{
	{Name: "background.threads", Type: Int, Default: "10", Doc: "The number of threads to use for various background processing tasks."},
	{Name: "metric.reporters", Type: List, Default: "", Doc: "A list of classes to use as metrics reporters."},
	{Name: "num.io.threads", Type: Int, Default: "8", Doc: "The number of threads that the server uses for processing requests, which may include disk I/O."},
	{Name: "num.network.threads", Type: Int, Default: "3", Doc: "The number of threads that the server uses for receiving requests from the network and sending responses to the network."},
	{Name: "num.recovery.threads.per.data.dir", Type: Int, Default: "1", Doc: "The number of threads per data directory to be used for log recovery at startup and flushing at shutdown."},
	{Name: "num.replica.fetchers", Type: Int, Default: "1", Doc: "Number of fetcher threads used to replicate records from each source broker."},
	{Name: "remote.fetch.max.wait.ms", Type: Int, Default: "500", Doc: "The maximum amount of time the server will wait before answering the remote fetch request."},
	{Name: "remote.log.index.file.cache.total.size.bytes", Type: Long, Default: "1073741824", Doc: "The total size of the space allocated to store index files fetched from remote storage in the local storage."},
	{Name: "remote.log.manager.copy.max.bytes.per.second", Type: Long, Default: maxLong, Doc: "The maximum number of bytes that can be copied from local storage to remote storage per second."},
	{Name: "remote.log.manager.fetch.max.bytes.per.second", Type: Long, Default: maxLong, Doc: "The maximum number of bytes that can be read from remote storage to local storage per second."},
	{Name: "sasl.kerberos.kinit.cmd", Type: String, Default: "/usr/bin/kinit", Doc: "Kerberos kinit command path."},
	{Name: "sasl.kerberos.min.time.before.relogin", Type: Long, Default: "60000", Doc: "Login thread sleep time between refresh attempts."},
	{Name: "sasl.kerberos.principal.to.local.rules", Type: List, Default: "DEFAULT", Doc: "A list of rules for mapping from principal names to short names (typically operating system usernames)."},
	{Name: "sasl.kerberos.service.name", Type: String, Null: true, Doc: "The Kerberos principal name that Kafka runs as."},
	{Name: "sasl.kerberos.ticket.renew.jitter", Type: Double, Default: "0.05", Doc: "Percentage of random jitter added to the renewal time."},
	{Name: "sasl.kerberos.ticket.renew.window.factor", Type: Double, Default: "0.8", Doc: "Login thread will sleep until the specified window factor of time from last refresh to ticket's expiry has been reached, at which time it will try to renew the ticket."},
	{Name: "sasl.login.refresh.buffer.seconds", Type: Short, Default: "300", Doc: "The amount of buffer time before credential expiration to maintain when refreshing a credential, in seconds."},
	{Name: "sasl.login.refresh.min.period.seconds", Type: Short, Default: "60", Doc: "The desired minimum time for the login refresh thread to wait before refreshing a credential, in seconds."},
	{Name: "sasl.login.refresh.window.factor", Type: Double, Default: "0.8", Doc: "Login refresh thread will sleep until the specified window factor relative to the credential's lifetime has been reached, at which time it will try to refresh the credential."},
	{Name: "sasl.login.refresh.window.jitter", Type: Double, Default: "0.05", Doc: "The maximum amount of random jitter relative to the credential's lifetime that is added to the login refresh thread's sleep time."},
	{Name: "sasl.mechanism.inter.broker.protocol", Type: String, Default: "GSSAPI", Doc: "SASL mechanism used for inter-broker communication."},
	{Name: "ssl.endpoint.identification.algorithm", Type: String, Default: "https", Doc: "The endpoint identification algorithm to validate server hostname using server certificate."},
	{Name: "ssl.engine.factory.class", Type: String, Null: true, Doc: "The class of type org.apache.kafka.common.security.auth.SslEngineFactory to provide SSLEngine objects."},
	{Name: "ssl.keymanager.algorithm", Type: String, Default: "SunX509", Doc: "The algorithm used by key manager factory for SSL connections."},
	{Name: "ssl.keystore.type", Type: String, Default: "JKS", Doc: "The file format of the key store file."},
	{Name: "ssl.provider", Type: String, Null: true, Doc: "The name of the security provider used for SSL connections."},
	{Name: "ssl.secure.random.implementation", Type: String, Null: true, Doc: "The SecureRandom PRNG implementation to use for SSL cryptography operations."},
	{Name: "ssl.trustmanager.algorithm", Type: String, Default: "PKIX", Doc: "The algorithm used by trust manager factory for SSL connections."},
	{Name: "ssl.truststore.type", Type: String, Default: "JKS", Doc: "The file format of the trust store file."},
	{Name: "transaction.partition.verification.enable", Type: Boolean, Default: "true", Doc: "Enable verification that checks that the partition has been added to the transaction before writing transactional records to the partition."},
}

// brokerSynonymDocs documents the broker configs that are defaults of topic configs.
var brokerSynonymDocs = map[string]string{
	"log.diskless.enable":                     "Whether new topics are diskless (diskless.enable) unless created otherwise: Inlet's --log-diskless-enable, set at start.",
	"log.cleanup.policy":                      "The default cleanup policy for segments beyond the retention window. A comma separated list of valid policies.",
	"compression.type":                        "Specify the final compression type for a given topic. 'producer' means retain the original compression codec set by the producer.",
	"log.cleaner.delete.retention.ms":         "The amount of time to retain tombstone message markers for log compacted topics.",
	"log.segment.delete.delay.ms":             "The amount of time to wait before deleting a file from the filesystem.",
	"log.flush.interval.messages":             "The number of messages accumulated on a log partition before messages are flushed to disk.",
	"log.flush.interval.ms":                   "The maximum time in ms that a message in any topic is kept in memory before flushed to disk.",
	"follower.replication.throttled.replicas": "A list of replicas for which log replication should be throttled on the follower side.",
	"log.index.interval.bytes":                "The interval with which we add an entry to the offset index.",
	"leader.replication.throttled.replicas":   "A list of replicas for which log replication should be throttled on the leader side.",
	"log.local.retention.bytes":               "The maximum size of local log segments that can grow for a partition before it gets eligible for deletion.",
	"log.local.retention.ms":                  "The number of milliseconds to keep the local log segments before it gets eligible for deletion.",
	"log.cleaner.max.compaction.lag.ms":       "The maximum time a message will remain ineligible for compaction in the log. Only applicable for logs that are being compacted.",
	"message.max.bytes":                       "The largest record batch size allowed by Kafka (after compression if compression is enabled).",
	"log.message.downconversion.enable":       "This configuration controls whether down-conversion of message formats is enabled to satisfy consume requests.",
	"log.message.format.version":              "Specify the message format version the broker will use to append messages to the logs (ignored: Inlet stores record batches v2 as sent).",
	"compression.gzip.level":                  "The compression level to use if compression.type is set to gzip.",
	"compression.lz4.level":                   "The compression level to use if compression.type is set to lz4.",
	"compression.zstd.level":                  "The compression level to use if compression.type is set to zstd.",
	"log.message.timestamp.after.max.ms":      "The maximum difference allowed between the timestamp when a broker receives a message and the timestamp specified in the message, for timestamps in the future.",
	"log.message.timestamp.before.max.ms":     "The maximum difference allowed between the timestamp when a broker receives a message and the timestamp specified in the message, for timestamps in the past.",
	"log.message.timestamp.difference.max.ms": "The maximum difference allowed between the timestamp when a broker receives a message and the timestamp specified in the message (deprecated).",
	"log.message.timestamp.type":              "Define whether the timestamp in the message is message create time or log append time. The value should be either CreateTime or LogAppendTime.",
	"log.cleaner.min.cleanable.ratio":         "The minimum ratio of dirty log to total log for a log to eligible for cleaning.",
	"log.cleaner.min.compaction.lag.ms":       "The minimum time a message will remain uncompacted in the log. Only applicable for logs that are being compacted.",
	"min.insync.replicas":                     "When a producer sets acks to \"all\" (or \"-1\"), min.insync.replicas specifies the minimum number of replicas that must acknowledge a write for the write to be considered successful.",
	"log.preallocate":                         "Should pre allocate file when create new segment?",
	"remote.log.storage.system.enable":        "Whether to enable tiered storage functionality in a broker or not.",
	"log.retention.bytes":                     "The maximum size of the log before deleting it.",
	"log.retention.ms":                        "The number of milliseconds to keep a log file before deleting it (in milliseconds), If not set, the value in log.retention.minutes is used. If set to -1, no time limit is applied.",
	"log.retention.minutes":                   "The number of minutes to keep a log file before deleting it (in minutes), secondary to log.retention.ms property. If not set, the value in log.retention.hours is used.",
	"log.retention.hours":                     "The number of hours to keep a log file before deleting it (in hours), tertiary to log.retention.ms property.",
	"log.segment.bytes":                       "The maximum size of a single log file.",
	"log.index.size.max.bytes":                "The maximum size in bytes of the offset index.",
	"log.roll.jitter.ms":                      "The maximum jitter to subtract from logRollTimeMillis (in milliseconds). If not set, the value in log.roll.jitter.hours is used.",
	"log.roll.jitter.hours":                   "The maximum jitter to subtract from logRollTimeMillis (in hours), secondary to log.roll.jitter.ms property.",
	"log.roll.ms":                             "The maximum time before a new log segment is rolled out (in milliseconds). If not set, the value in log.roll.hours is used.",
	"log.roll.hours":                          "The maximum time before a new log segment is rolled out (in hours), secondary to log.roll.ms property.",
	"unclean.leader.election.enable":          "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last resort, even though doing so may result in data loss.",
}

var brokerByName = func() map[string]*BrokerDef {
	m := map[string]*BrokerDef{}
	for _, d := range brokerDefs {
		m[d.Name] = d
	}
	for _, d := range ignoredDynamic {
		d.Dynamic, d.Ignored = true, true
		d.Doc += " Accepted and ignored by Inlet."
		m[d.Name] = d
	}
	for _, d := range defs {
		for i, name := range d.Synonyms {
			if _, ok := m[name]; ok {
				continue
			}
			bd := &BrokerDef{Name: name, Type: d.Type, Doc: brokerSynonymDocs[name], Dynamic: !d.StaticSynonym, Topic: d.Name, Scale: 1}
			switch {
			case strings.HasSuffix(name, ".minutes"):
				bd.Type, bd.Scale = Int, 60_000
			case strings.HasSuffix(name, ".hours"):
				bd.Type, bd.Scale = Int, 3_600_000
			}
			// Only the last synonym of a chain has a default; the earlier ones are null.
			if i == len(d.Synonyms)-1 {
				bd.Default = d.Default
				if d.BrokerDefault != "" {
					bd.Default = d.BrokerDefault
				}
			} else {
				bd.Null = true
			}
			m[name] = bd
		}
	}
	return m
}()

// brokerDefsSorted is brokerByName's values, sorted by name.
var brokerDefsSorted = func() []*BrokerDef {
	out := make([]*BrokerDef, 0, len(brokerByName))
	for _, d := range brokerByName {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}()

// BrokerDefs returns every broker config definition, sorted by name (not to be changed).
func BrokerDefs() []*BrokerDef { return brokerDefsSorted }

// LookupBroker finds a broker config by name.
func LookupBroker(name string) (*BrokerDef, bool) {
	d, ok := brokerByName[name]
	return d, ok
}

// ValidateBroker checks a dynamic broker config: known, dynamic, and valid for its type (and,
// for the default of a topic config, valid as that topic config).
func ValidateBroker(name, value string) error {
	d, ok := brokerByName[name]
	if !ok {
		return fmt.Errorf("Unknown broker config name: %s", name)
	}
	if !d.Dynamic {
		return fmt.Errorf("Cannot update these configs dynamically: %s", name)
	}
	if d.Topic == "" {
		td := Def{Name: name, Type: d.Type}
		return td.Validate(value)
	}
	v, err := d.TopicValue(value)
	if err != nil {
		return err
	}
	if err := byName[d.Topic].Validate(v); err != nil {
		return fmt.Errorf("Invalid value %s for configuration %s: %v", value, name, err)
	}
	return nil
}

// TopicValue is a broker config's value in its topic config's unit. A scaled one (hours,
// minutes) is an INT; a negative one means no limit (-1), as Kafka reads
// log.retention.hours=-1.
func (d *BrokerDef) TopicValue(v string) (string, error) {
	if d.Scale <= 1 {
		return v, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return "", fmt.Errorf("Invalid value %s for configuration %s: Not a number of type INT", v, d.Name)
	}
	if n < 0 {
		return "-1", nil
	}
	return strconv.FormatInt(n*d.Scale, 10), nil // at most 2^31 hours in ms: no overflow
}

// TopicDefaults turns dynamic broker configs into the topic configs they are the defaults
// of. As in Kafka, the most specific synonym set at any level wins (log.retention.ms over
// log.retention.hours), and for one name, the first level that sets it: levels are in
// precedence order (this broker's, then the cluster default).
func TopicDefaults(levels ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, d := range defs {
	chain:
		for _, name := range d.Synonyms {
			for _, level := range levels {
				v, ok := level[name]
				if !ok {
					continue
				}
				if tv, err := brokerByName[name].TopicValue(v); err == nil {
					out[d.Name] = tv
					break chain
				}
			}
		}
	}
	return out
}
