// Package topicconfig holds Kafka's topic and broker configuration definitions as Inlet serves
// them: names, types, defaults, the broker config each topic config falls back to (its
// synonym), validation, and the parsed settings the log acts on.
//
// The definitions follow Kafka's org.apache.kafka.common.config.TopicConfig and
// org.apache.kafka.storage.internals.log.LogConfig (3.x): DescribeConfigs must return complete
// sets with real defaults, because Kafka Connect and Materialize read them to decide whether a
// topic is fit for use (cleanup.policy=compact for Connect's internal topics, for instance).
package topicconfig

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Type is Kafka's ConfigDef.Type as DescribeConfigs v3+ reports it (ConfigType in the
// protocol): BOOLEAN 1, STRING 2, INT 3, SHORT 4, LONG 5, DOUBLE 6, LIST 7, CLASS 8, PASSWORD 9.
type Type int8

const (
	Boolean Type = 1
	String  Type = 2
	Int     Type = 3
	Short   Type = 4
	Long    Type = 5
	Double  Type = 6
	List    Type = 7
)

// Def is one topic config.
type Def struct {
	Name    string
	Type    Type
	Default string // the value a topic has when neither it nor the broker overrides it
	// Synonyms are the broker configs this topic config falls back to, most specific first
	// (LogConfig's synonym map: retention.ms -> log.retention.ms, log.retention.minutes,
	// log.retention.hours). The last one carries the default.
	Synonyms []string
	// BrokerDefault is the broker-level default as Kafka reports it on the last synonym (for
	// retention.ms that is log.retention.hours=168); empty means "same as Default".
	BrokerDefault string
	Doc           string
	// StaticSynonym: the broker synonym cannot be changed at run time (Kafka's
	// DynamicLogConfig.NonReconfigrableLogConfigs).
	StaticSynonym bool
	valid         func(string) error
}

// Validate checks a value for this config, as ConfigDef.parse and its validators do.
func (d *Def) Validate(v string) error {
	if !utf8.ValidString(v) {
		// Kafka reads the value as UTF-8; the stored record is JSON, which would not give
		// other bytes back.
		return fmt.Errorf("Invalid value %q for configuration %s: not UTF-8", v, d.Name)
	}
	switch d.Type {
	case Boolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return fmt.Errorf("Invalid value %s for configuration %s: Expected value to be either true or false", v, d.Name)
		}
	case Int:
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: Not a number of type INT", v, d.Name)
		}
	case Short:
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 16); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: Not a number of type SHORT", v, d.Name)
		}
	case Long:
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: Not a number of type LONG", v, d.Name)
		}
	case Double:
		if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: Not a number of type DOUBLE", v, d.Name)
		}
	}
	if d.valid != nil {
		if err := d.valid(v); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: %v", v, d.Name, err)
		}
	}
	return nil
}

func atLeast(min int64) func(string) error {
	return func(v string) error {
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if n < min {
			return fmt.Errorf("Value must be at least %d", min)
		}
		return nil
	}
}

// levelOf is CompressionType.levelValidator: def (Kafka's "default level" value) or a level
// in [lo, hi].
func levelOf(def, lo, hi int64) func(string) error {
	return func(v string) error {
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if n != def && (n < lo || n > hi) {
			return fmt.Errorf("Value must be between %d and %d", lo, hi)
		}
		return nil
	}
}

// metadataVersion is MetadataVersionValidator as Kafka 3.9 reads message.format.version
// (MetadataVersion.fromVersionString): a version of 0.x keeps three dot-separated parts, a
// later one two ("0.10.0.0" reads "0.10.0", "3.0.1" reads "3.0"), and what is left must name
// one of the 3.9 broker's inter-broker protocol versions, by its release ("2.8") or with its
// sub-version ("2.8-IV1").
func metadataVersion(v string) error {
	parts := strings.Split(v, ".")
	keep := 2
	if strings.HasPrefix(v, "0.") {
		keep = 3
	}
	key := v
	if len(parts) > keep {
		key = strings.Join(parts[:keep], ".")
	}
	if !ibpVersions[key] {
		return fmt.Errorf("Version %s is not a valid version", v)
	}
	return nil
}

// ibpVersions are the names MetadataVersion.fromVersionString accepts in Kafka 3.9: every
// release from 0.8.0 to 3.9, and each of its versions with its "-IVn" sub-version.
var ibpVersions = func() map[string]bool {
	m := map[string]bool{}
	for _, r := range []struct {
		release string
		ivs     int // sub-versions IV0..IV(n-1); 0: the release has none
	}{
		{"0.8.0", 0}, {"0.8.1", 0}, {"0.8.2", 0}, {"0.9.0", 0},
		{"0.10.0", 2}, {"0.10.1", 3}, {"0.10.2", 1}, {"0.11.0", 3},
		{"1.0", 1}, {"1.1", 1}, {"2.0", 2}, {"2.1", 3}, {"2.2", 2}, {"2.3", 2}, {"2.4", 2},
		{"2.5", 1}, {"2.6", 1}, {"2.7", 3}, {"2.8", 2},
		{"3.0", 2}, {"3.1", 1}, {"3.2", 1}, {"3.3", 4}, {"3.4", 1}, {"3.5", 3}, {"3.6", 3},
		{"3.7", 5}, {"3.8", 1}, {"3.9", 1},
	} {
		m[r.release] = true
		for i := 0; i < r.ivs; i++ {
			m[fmt.Sprintf("%s-IV%d", r.release, i)] = true
		}
	}
	return m
}()

func between(lo, hi float64) func(string) error {
	return func(v string) error {
		f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if f < lo || f > hi {
			return fmt.Errorf("Value must be between %v and %v", lo, hi)
		}
		return nil
	}
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("String must be one of: %s", strings.Join(allowed, ", "))
	}
}

func listOf(allowed ...string) func(string) error {
	return func(v string) error {
		if strings.TrimSpace(v) == "" {
			return nil
		}
		for _, item := range strings.Split(v, ",") {
			if err := oneOf(allowed...)(strings.TrimSpace(item)); err != nil {
				return fmt.Errorf("Invalid value %s: must be a comma-separated list of %s", item, strings.Join(allowed, ", "))
			}
		}
		return nil
	}
}

const maxLong = "9223372036854775807"

// Topic configs, in Kafka's names (TopicConfig).
var defs = []*Def{
	{Name: "cleanup.policy", Type: List, Default: "delete", Synonyms: []string{"log.cleanup.policy"},
		Doc: "delete or compact or both: delete applies retention.ms and retention.bytes, compact keeps the latest record of each key", valid: listOf("compact", "delete")},
	{Name: "compression.type", Type: String, Default: "producer", Synonyms: []string{"compression.type"},
		Doc: "Inlet stores batches as the producer compressed them ('producer')", valid: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")},
	{Name: "compression.gzip.level", Type: Int, Default: "-1", Synonyms: []string{"compression.gzip.level"},
		Doc: "accepted and ignored: Inlet never recompresses", valid: levelOf(-1, 1, 9)},
	{Name: "compression.lz4.level", Type: Int, Default: "9", Synonyms: []string{"compression.lz4.level"},
		Doc: "accepted and ignored: Inlet never recompresses", valid: levelOf(9, 1, 17)},
	{Name: "compression.zstd.level", Type: Int, Default: "3", Synonyms: []string{"compression.zstd.level"},
		Doc: "accepted and ignored: Inlet never recompresses", valid: levelOf(3, -131072, 22)},
	{Name: "delete.retention.ms", Type: Long, Default: "86400000", Synonyms: []string{"log.cleaner.delete.retention.ms"}, valid: atLeast(0)},
	// KIP-1150's diskless topics; the broker default is Inkless's log.diskless.enable (static
	// here: --log-diskless-enable), resolved into the topic's configs at creation
	// (WithDisklessDefault), so that a later default never turns an existing topic over.
	{Name: "diskless.enable", Type: Boolean, Default: "false", Synonyms: []string{"log.diskless.enable"}, StaticSynonym: true,
		Doc: "true: a produce is acknowledged only once its batches are in an object in the bucket (docs/diskless.md); set at creation only"},
	{Name: "file.delete.delay.ms", Type: Long, Default: "60000", Synonyms: []string{"log.segment.delete.delay.ms"}, valid: atLeast(0)},
	{Name: "flush.messages", Type: Long, Default: maxLong, Synonyms: []string{"log.flush.interval.messages"},
		Doc: "Inlet fsyncs every group commit before acknowledging, whatever this says", valid: atLeast(1)},
	{Name: "flush.ms", Type: Long, Default: maxLong, Synonyms: []string{"log.flush.interval.ms"}, valid: atLeast(0)},
	{Name: "follower.replication.throttled.replicas", Type: List, Default: "", Synonyms: []string{"follower.replication.throttled.replicas"}},
	{Name: "index.interval.bytes", Type: Int, Default: "4096", Synonyms: []string{"log.index.interval.bytes"}, valid: atLeast(0)},
	{Name: "leader.replication.throttled.replicas", Type: List, Default: "", Synonyms: []string{"leader.replication.throttled.replicas"}},
	{Name: "local.retention.bytes", Type: Long, Default: "-2", Synonyms: []string{"log.local.retention.bytes"}, valid: atLeast(-2)},
	{Name: "local.retention.ms", Type: Long, Default: "-2", Synonyms: []string{"log.local.retention.ms"}, valid: atLeast(-2)},
	{Name: "max.compaction.lag.ms", Type: Long, Default: maxLong, Synonyms: []string{"log.cleaner.max.compaction.lag.ms"}, valid: atLeast(1)},
	{Name: "max.message.bytes", Type: Int, Default: "1048588", Synonyms: []string{"message.max.bytes"},
		Doc: "the largest record batch accepted for this topic", valid: atLeast(0)},
	// Kafka 4.0 removed message.downconversion.enable, message.format.version and
	// message.timestamp.difference.max.ms (KIP-724, KIP-896, KIP-937); a 3.x broker accepts
	// them and clients pinned to 3.x send them, so they are accepted (and ignored: Inlet
	// stores record batches v2 as sent and never down-converts).
	{Name: "message.downconversion.enable", Type: Boolean, Default: "true", Synonyms: []string{"log.message.downconversion.enable"},
		Doc: "accepted and ignored (removed in Kafka 4.0): Inlet never down-converts"},
	{Name: "message.format.version", Type: String, Default: "3.0-IV1", Synonyms: []string{"log.message.format.version"}, StaticSynonym: true,
		Doc: "accepted and ignored (removed in Kafka 4.0): Inlet stores record batches v2 as sent", valid: metadataVersion},
	{Name: "message.timestamp.after.max.ms", Type: Long, Default: maxLong, Synonyms: []string{"log.message.timestamp.after.max.ms"}, valid: atLeast(0)},
	{Name: "message.timestamp.before.max.ms", Type: Long, Default: maxLong, Synonyms: []string{"log.message.timestamp.before.max.ms"}, valid: atLeast(0)},
	{Name: "message.timestamp.difference.max.ms", Type: Long, Default: maxLong, Synonyms: []string{"log.message.timestamp.difference.max.ms"}, valid: atLeast(0)},
	{Name: "message.timestamp.type", Type: String, Default: "CreateTime", Synonyms: []string{"log.message.timestamp.type"},
		Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the time it is committed", valid: oneOf("CreateTime", "LogAppendTime")},
	{Name: "min.cleanable.dirty.ratio", Type: Double, Default: "0.5", Synonyms: []string{"log.cleaner.min.cleanable.ratio"}, valid: between(0, 1)},
	{Name: "min.compaction.lag.ms", Type: Long, Default: "0", Synonyms: []string{"log.cleaner.min.compaction.lag.ms"}, valid: atLeast(0)},
	{Name: "min.insync.replicas", Type: Int, Default: "1", Synonyms: []string{"min.insync.replicas"}, valid: atLeast(1)},
	{Name: "preallocate", Type: Boolean, Default: "false", Synonyms: []string{"log.preallocate"}},
	{Name: "remote.storage.enable", Type: Boolean, Default: "false", Synonyms: []string{"remote.log.storage.system.enable"}},
	{Name: "retention.bytes", Type: Long, Default: "-1", Synonyms: []string{"log.retention.bytes"},
		Doc: "the most bytes a partition keeps; older batches are deleted in the background (-1: no limit)"},
	{Name: "retention.ms", Type: Long, Default: "604800000", Synonyms: []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}, BrokerDefault: "168",
		Doc: "batches whose newest timestamp is older than this are deleted in the background (-1: keep forever)", valid: atLeast(-1)},
	{Name: "segment.bytes", Type: Int, Default: "1073741824", Synonyms: []string{"log.segment.bytes"}, valid: atLeast(14)}, // Kafka 3.x's LegacyRecord.RECORD_OVERHEAD_V0 (4.x: 1 MiB)
	{Name: "segment.index.bytes", Type: Int, Default: "10485760", Synonyms: []string{"log.index.size.max.bytes"}, valid: atLeast(4)},
	{Name: "segment.jitter.ms", Type: Long, Default: "0", Synonyms: []string{"log.roll.jitter.ms", "log.roll.jitter.hours"}, valid: atLeast(0)},
	{Name: "segment.ms", Type: Long, Default: "604800000", Synonyms: []string{"log.roll.ms", "log.roll.hours"}, BrokerDefault: "168", valid: atLeast(1)},
	{Name: "unclean.leader.election.enable", Type: Boolean, Default: "false", Synonyms: []string{"unclean.leader.election.enable"}},
}

var byName = func() map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for _, d := range defs {
		m[d.Name] = d
	}
	return m
}()

// Defs returns every topic config definition, sorted by name.
func Defs() []*Def { return defs }

// Lookup finds a topic config by name.
func Lookup(name string) (*Def, bool) {
	d, ok := byName[name]
	return d, ok
}

// Validate checks one topic config: the name must be known (Kafka answers an unknown name
// with INVALID_CONFIG, "Unknown topic config name") and the value valid for its type.
func Validate(name, value string) error {
	d, ok := byName[name]
	if !ok {
		return fmt.Errorf("Unknown topic config name: %s", name)
	}
	return d.Validate(value)
}

// ValidateAll checks a whole set of topic overrides.
func ValidateAll(configs map[string]string) error {
	names := make([]string, 0, len(configs))
	for k := range configs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := Validate(k, configs[k]); err != nil {
			return err
		}
	}
	return nil
}

// Settings are the topic configs the log acts on, parsed once when a topic's configs change.
// A zero MaxMessageBytes means the broker default applies.
type Settings struct {
	MaxMessageBytes int   // 0: the broker's message.max.bytes
	LogAppendTime   bool  // message.timestamp.type=LogAppendTime
	RetentionMs     int64 // < 0: no time limit
	RetentionBytes  int64 // < 0: no size limit
	Compact         bool  // cleanup.policy contains compact
	Delete          bool  // cleanup.policy contains delete (retention applies)

	// Tiered storage (KIP-405). RetentionMs and RetentionBytes are then the totals across the
	// tiers, and the local limits bound what stays on the node's disk.
	RemoteStorage bool // remote.storage.enable
	// Diskless: diskless.enable (KIP-1150): acknowledged once in the bucket (package diskless).
	Diskless bool
	// LocalRetentionMs, LocalRetentionBytes: local.retention.ms, local.retention.bytes, resolved:
	// -2 (following retention.*) is replaced by the value followed, and a local limit looser
	// than the total (or unbounded, -1, under a bounded total) by the total, as Kafka's
	// LogConfig.localRetentionMs/Bytes and UnifiedLog.localRetentionMs read them. Never -2.
	LocalRetentionMs, LocalRetentionBytes int64

	// What compaction acts on (cleanup.policy=compact).
	DeleteRetentionMs       int64   // delete.retention.ms: how long a tombstone outlives what it deletes
	MinCleanableRatio       float64 // min.cleanable.dirty.ratio
	MinCompactionLagMs      int64   // min.compaction.lag.ms: records younger than this stay
	SegmentMs, SegmentBytes int64   // segment.ms, segment.bytes: when Kafka's active segment rolls
}

// Parse computes the settings of a topic from its overrides (validated before they were
// stored; an unparsable value falls back to the default).
func Parse(configs map[string]string) Settings {
	s := Settings{RetentionMs: 604800000, RetentionBytes: -1, Delete: true,
		DeleteRetentionMs: 86400000, MinCleanableRatio: 0.5, SegmentMs: 604800000, SegmentBytes: 1 << 30}
	for name, dst := range map[string]*int64{"delete.retention.ms": &s.DeleteRetentionMs,
		"min.compaction.lag.ms": &s.MinCompactionLagMs, "segment.ms": &s.SegmentMs, "segment.bytes": &s.SegmentBytes} {
		if v, ok := configs[name]; ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				*dst = n
			}
		}
	}
	if v, ok := configs["min.cleanable.dirty.ratio"]; ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			s.MinCleanableRatio = f
		}
	}
	if v, ok := configs["max.message.bytes"]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil && n >= 0 {
			s.MaxMessageBytes = int(n)
			if s.MaxMessageBytes == 0 {
				s.MaxMessageBytes = -1 // an explicit 0 admits nothing; keep it apart from "unset"
			}
		}
	}
	if configs["message.timestamp.type"] == "LogAppendTime" {
		s.LogAppendTime = true
	}
	if v, ok := configs["retention.ms"]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			s.RetentionMs = n
		}
	}
	if v, ok := configs["retention.bytes"]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			s.RetentionBytes = n
		}
	}
	if v, ok := configs["cleanup.policy"]; ok {
		s.Delete = false
		for _, p := range strings.Split(v, ",") {
			switch strings.TrimSpace(p) {
			case "compact":
				s.Compact = true
			case "delete":
				s.Delete = true
			}
		}
	}
	if s.RetentionMs == math.MaxInt64 {
		s.RetentionMs = -1
	}
	s.RemoteStorage = strings.EqualFold(strings.TrimSpace(configs["remote.storage.enable"]), "true")
	s.Diskless = isTrue(configs["diskless.enable"])
	s.LocalRetentionMs = localLimit(configs["local.retention.ms"], s.RetentionMs)
	s.LocalRetentionBytes = localLimit(configs["local.retention.bytes"], s.RetentionBytes)
	return s
}

// localLimit resolves a local.retention.* value against its total (retention.*, already
// resolved, -1 for none): -2, unset or unparsable follows the total; a limit looser than a
// bounded total is the total (CheckCombination refuses such a setting, but broker defaults
// and values stored before may still combine to one).
func localLimit(v string, total int64) int64 {
	total = max(total, -1) // retention.bytes takes any negative for "no limit"
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n == -2 {
		return total
	}
	if n == math.MaxInt64 || n < 0 {
		n = -1
	}
	if total >= 0 && (n < 0 || n > total) {
		return total
	}
	return n
}

// CheckCombination applies the cross-field rules Kafka applies to a topic's configs at
// CreateTopics, AlterConfigs and IncrementalAlterConfigs (LogConfig.validateTopicLogConfigValues),
// after each value passed Validate. configs is the topic's whole set in force: its overrides
// over the broker defaults (TopicDefaults). remoteAvailable says whether the broker has
// remote storage configured (Kafka's remote.log.storage.system.enable). The errors' texts are
// Kafka's; the caller answers them with INVALID_CONFIG.
//
// With remote.storage.enable=true:
//   - the broker must have remote storage (validateRemoteStorageOnlyIfSystemEnabled);
//   - cleanup.policy must be delete alone, or empty (validateRemoteStorageRequiresDeleteCleanupPolicy);
//   - under a bounded retention.bytes, local.retention.bytes must be -2 or within it, not -1
//     (validateRemoteStorageRetentionSize), and the same for the times
//     (validateRemoteStorageRetentionTime).
func CheckCombination(configs map[string]string, remoteAvailable bool) error {
	if err := checkDiskless(configs, remoteAvailable); err != nil {
		return err
	}
	if !strings.EqualFold(strings.TrimSpace(configs["remote.storage.enable"]), "true") {
		return nil
	}
	if !remoteAvailable {
		return errors.New("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	}
	if v, ok := configs["cleanup.policy"]; ok && strings.TrimSpace(v) != "" {
		items := strings.Split(v, ",")
		if len(items) != 1 || strings.TrimSpace(items[0]) != "delete" {
			return errors.New("Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.")
		}
	}
	long := func(name string) int64 {
		d := byName[name]
		v, ok := configs[name]
		if !ok {
			v = d.Default
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			n, _ = strconv.ParseInt(d.Default, 10, 64)
		}
		return n
	}
	if total, local := long("retention.bytes"), long("local.retention.bytes"); total > -1 && local != -2 {
		if err := checkLocalLimit("retention.bytes", total, "local.retention.bytes", local); err != nil {
			return err
		}
	}
	if total, local := long("retention.ms"), long("local.retention.ms"); total != -1 && local != -2 {
		if err := checkLocalLimit("retention.ms", total, "local.retention.ms", local); err != nil {
			return err
		}
	}
	return nil
}

// checkLocalLimit is the common part of Kafka's validateRemoteStorageRetentionSize and
// validateRemoteStorageRetentionTime; its texts are ConfigException(name, value, message)'s.
func checkLocalLimit(totalName string, total int64, localName string, local int64) error {
	if local == -1 {
		return fmt.Errorf("Invalid value %d for configuration %s: Value must not be -1 as %s value is set as %d.", local, localName, totalName, total)
	}
	if local > total {
		return fmt.Errorf("Invalid value %d for configuration %s: Value must not be more than %s property value: %d", local, localName, totalName, total)
	}
	return nil
}

func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// checkDiskless applies the rules of diskless.enable=true: the node needs a bucket; a
// compacted topic cannot be diskless (compaction rewrites batches the bucket already holds,
// which the commit log cannot follow yet); and a topic is diskless or tiered, not both
// (Inkless refuses the pair outside its own migrations too).
func checkDiskless(configs map[string]string, bucket bool) error {
	if !isTrue(configs["diskless.enable"]) {
		return nil
	}
	if !bucket {
		return errors.New("Diskless topics need a bucket: the node was started without --s3-bucket. Topic cannot be configured with diskless.enable=true.")
	}
	for _, p := range strings.Split(configs["cleanup.policy"], ",") {
		if strings.TrimSpace(p) == "compact" {
			return errors.New("Diskless topics do not support cleanup.policy=compact.")
		}
	}
	if isTrue(configs["remote.storage.enable"]) {
		return errors.New("It is not valid to set a value for both diskless.enable and remote.storage.enable.")
	}
	return nil
}

// CheckDisklessChange refuses a change of diskless.enable on an existing topic (cur: its
// overrides now, next: after the change): a topic is diskless from its creation or never, as
// in Inkless without its migration path (the batches already acknowledged locally are not in
// the bucket).
func CheckDisklessChange(cur, next map[string]string) error {
	if isTrue(cur["diskless.enable"]) != isTrue(next["diskless.enable"]) {
		return errors.New("diskless.enable cannot be changed on an existing topic: it is set when the topic is created.")
	}
	return nil
}

// WithDisklessDefault gives a new topic's overrides the broker default of diskless.enable
// (--log-diskless-enable) when they do not set it: diskless.enable=true is added unless the
// topic is compacted or tiered, which cannot be diskless. The result is a new map when it
// differs; configs is not changed.
func WithDisklessDefault(configs map[string]string, def bool) map[string]string {
	if _, set := configs["diskless.enable"]; !def || set || isTrue(configs["remote.storage.enable"]) ||
		strings.Contains(configs["cleanup.policy"], "compact") {
		return configs
	}
	out := make(map[string]string, len(configs)+1)
	for k, v := range configs {
		out[k] = v
	}
	out["diskless.enable"] = "true"
	return out
}
