package loadgen

import (
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults. Each is the value a zero Config field gets.
const (
	DefaultBroker    = "127.0.0.1:9092"
	DefaultTopic     = "loadgen"
	DefaultProducers = 16

	// DefaultPartitions matches DefaultProducers: over a run every producer writes every
	// partition (a new one every 64 KiB by default), so 16 x 16 producer-partition streams
	// reach the broker.
	DefaultPartitions = 16

	DefaultRecordSize = 100

	// DefaultSchemaID is the schema id in Avro values; examples/loadgen-avro.yaml registers
	// examples/loadgen-value.avsc under it.
	DefaultSchemaID int32 = 1

	// DefaultLinger is the linger of librdkafka 2.x (linger.ms=5) and of the Java producer since
	// Kafka 4.0 (KIP-1030), the clients most producers run. kgo's own default is 10ms.
	DefaultLinger = 5 * time.Millisecond

	// DefaultBatchMaxBytes is kgo's default, Kafka's classic max.message.bytes (1000012): the
	// largest batch a stock broker accepts, so no batch is ever refused for size.
	DefaultBatchMaxBytes int32 = 1_000_012

	// DefaultMaxBufferedRecords is per producer, twice kgo's 50,000. A producer sustains at most
	// MaxBufferedRecords / ack latency records a second (Little's law): 100,000 records over a
	// slow 50 ms commit still allow 2M records/s per producer, so the client buffer never caps a
	// flat-out run. The price is loadgen memory (about 300 bytes a buffered record, ~0.5 GB for
	// 16 full producers) and, flat out, ack latency that is mostly time queued in this buffer:
	// use Rate to measure latency.
	DefaultMaxBufferedRecords = 100_000

	// DefaultPartitioner is "uniform", what an unconfigured kgo client uses; see Partitioners.
	DefaultPartitioner = "uniform"

	// DefaultFlushTimeout bounds the wait for outstanding acks after producing stops.
	DefaultFlushTimeout = 60 * time.Second

	// NoLinger as Config.Linger sends batches as soon as the client can (kgo linger 0); a zero
	// Linger means DefaultLinger.
	NoLinger time.Duration = -1

	// DefaultTransactionalIDPrefix and DefaultTxnRecords apply to transactional runs: producer
	// i's transactional id is "<prefix>-<run id>-<i>", and it ends a transaction every
	// DefaultTxnRecords records.
	DefaultTransactionalIDPrefix = "loadgen"
	DefaultTxnRecords            = 10_000
)

// Compressions are the accepted Config.Compression values. "none" is set explicitly: kgo
// compresses with snappy unless told otherwise.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// Partitioners are the accepted Config.Partitioner values:
//
//   - "roundrobin": each record goes to the next partition. Every partition gets an
//     equal share of every producer's records from the first second of the run, even for a
//     short --records run, and the broker sees all producer x partition streams at once, the
//     hardest case for its per-partition idempotence state. The cost is batches 1/partitions
//     the size a sticky partitioner builds.
//   - "sticky": kgo.StickyPartitioner, which fills one partition's batch before moving to a
//     random other one: fewer, larger batches; a short run may leave partitions empty.
//   - "uniform" (default): what an unconfigured kgo client uses, UniformBytesPartitioner(64 KiB,
//     adaptive, keys): a new partition every 64 KiB, favouring partitions with less backlog.
//     Round-robin spreads every linger window over all partitions, so the client builds
//     partitions-times smaller batches and spends its CPU on them: flat out against one node
//     on this 2-core machine, 16 idempotent producers reached 1.3 M records/s with it and
//     2.4 M with this default, at 1.3 and 0.7 us of loadgen CPU a record
//     (scripts/partitioner-ab.sh, BENCHMARKS.md "loadgen's own cost").
//   - "per-producer": producer i writes only partition i mod the topic's partition count (of
//     every topic it writes), the shape of one writer per partition (a keyed stream, a
//     connector task): each producer builds one batch per linger window, as large as its rate
//     allows, and each partition's batches come from one producer id. With fewer producers
//     than partitions the partitions above the producer count stay empty; with more, several
//     producers share a partition. kgo.ManualPartitioner with every record's Partition set
//     to i would be the same.
var Partitioners = []string{"roundrobin", "sticky", "uniform", PerProducerPartitioner}

// PerProducerPartitioner is the Partitioners name of one partition per producer.
const PerProducerPartitioner = "per-producer"

// Config describes one load run. The zero value of every field except Idempotent selects a
// default; the zero Idempotent is false, plain (non-idempotent) producers.
type Config struct {
	Brokers []string `json:"brokers"`
	Topic   string   `json:"topic"`
	// Partitions is used when the topic is created (with kadm, before producing). An existing
	// topic keeps its partition count; Result.Partitions reports the one used.
	Partitions int `json:"partitions"`
	// Topics above 1 spreads the records over that many topics, named by TopicNames
	// ("<Topic>-0000", "<Topic>-0001", ...), each with Partitions partitions and all created
	// before producing; producer i sends its record n to topic (i+n) mod Topics, and the
	// partitioner picks the partition within it. 0 and 1 are the single topic Topic. Verify
	// reads back one topic only and is refused with several.
	Topics int `json:"topics,omitempty"`
	// Producers is the number of producers, each its own kgo.Client with its own connection.
	Producers int `json:"producers"`
	// Idempotent selects kgo's idempotent producer; false sets kgo.DisableIdempotentWrite.
	// Both use acks=all.
	Idempotent bool `json:"idempotent"`

	RecordSize         int           `json:"record_size"` // value bytes, at least ValueHeaderSize (raw) or AvroMinRecordSize (avro)
	Linger             time.Duration `json:"linger_ns"`   // NoLinger for none
	BatchMaxBytes      int32         `json:"batch_max_bytes"`
	Compression        string        `json:"compression"`
	MaxBufferedRecords int           `json:"max_buffered_records"` // per producer
	Partitioner        string        `json:"partitioner"`

	// ValueFormat is FormatRaw (default: value.go) or FormatAvro (avro.go): every value in
	// Confluent wire format with schema id SchemaID (0: DefaultSchemaID) around an Avro
	// record. SchemaID is ignored for raw values.
	ValueFormat string `json:"value_format"`
	SchemaID    int32  `json:"schema_id"`

	// Duration and Records stop the run, whichever comes first; with neither, the run lasts
	// until ctx is done. Records is the total over all producers (spread evenly), counted as
	// sent records, all of which end acknowledged or failed.
	Duration time.Duration `json:"duration_ns"`
	Records  int64         `json:"records"`

	// Rate is records per second over all producers; 0 sends flat out. With a rate the load is
	// open loop: record i of a producer has an intended send time fixed in advance, and its
	// latency is measured from that time, so a stalled broker shows as latency instead of
	// silently slowing the sender (coordinated omission).
	Rate float64 `json:"rate"`

	// MaxInFlight is produce requests in flight per broker for plain producers; 0 is kgo's
	// default, 1 (retries cannot reorder records). Idempotent producers always have 5 (kgo
	// and Kafka fix it), so setting 5 here runs plain producers like for like with them;
	// any other value with Idempotent is an error.
	MaxInFlight int `json:"max_in_flight"`

	FlushTimeout time.Duration `json:"flush_timeout_ns"`
	Verify       bool          `json:"verify"`

	// Transactional gives each producer its own transactional id and wraps its records in
	// transactions of TxnRecords records (txn.go); it needs Idempotent. TxnAbortFraction of
	// the transactions (chosen by a counter, so runs repeat) are aborted instead of committed.
	// Producer i's transactional id is "<TransactionalIDPrefix>-<TxnRunID>-<i>"; an empty
	// TxnRunID gets a fresh one at the start of Run, so that runs never fence each other.
	// Verification then reads with read_committed and checks each transaction's outcome.
	Transactional         bool    `json:"transactional,omitempty"`
	TransactionalIDPrefix string  `json:"transactional_id_prefix,omitempty"`
	TxnRunID              string  `json:"txn_run_id,omitempty"`
	TxnRecords            int     `json:"txn_records,omitempty"`
	TxnAbortFraction      float64 `json:"txn_abort_fraction,omitempty"`

	// Live receives the topic line at the start and one line a second; nil prints nothing.
	Live io.Writer `json:"-"`
}

// normalize fills defaults and checks the values.
func (c Config) normalize() (Config, error) {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{DefaultBroker}
	}
	setDefault(&c.Topic, DefaultTopic)
	setDefault(&c.Partitions, DefaultPartitions)
	setDefault(&c.Producers, DefaultProducers)
	setDefault(&c.RecordSize, DefaultRecordSize)
	setDefault(&c.ValueFormat, FormatRaw)
	c.ValueFormat = strings.ToLower(c.ValueFormat)
	if c.ValueFormat == FormatAvro {
		setDefault(&c.SchemaID, DefaultSchemaID)
	} else {
		c.SchemaID = 0
	}
	setDefault(&c.Linger, DefaultLinger)
	setDefault(&c.BatchMaxBytes, DefaultBatchMaxBytes)
	setDefault(&c.Compression, "none")
	setDefault(&c.MaxBufferedRecords, DefaultMaxBufferedRecords)
	setDefault(&c.Partitioner, DefaultPartitioner)
	setDefault(&c.FlushTimeout, DefaultFlushTimeout)
	c.Compression = strings.ToLower(c.Compression)
	c.Partitioner = strings.ToLower(c.Partitioner)
	if c.Transactional {
		setDefault(&c.TransactionalIDPrefix, DefaultTransactionalIDPrefix)
		setDefault(&c.TxnRecords, DefaultTxnRecords)
	}

	switch {
	case c.Partitions < 1 || int64(c.Partitions) > math.MaxInt32:
		return c, fmt.Errorf("partitions must be in [1, %d], got %d", math.MaxInt32, c.Partitions)
	case c.Topics < 0:
		return c, fmt.Errorf("topics must not be negative, got %d", c.Topics)
	case c.Topics > 1 && c.Verify:
		return c, fmt.Errorf("verification reads back a single topic; it cannot check a run over %d topics", c.Topics)
	case c.Producers < 1 || int64(c.Producers) > math.MaxUint32:
		// The producer index is a uint32 in every record value.
		return c, fmt.Errorf("producers must be in [1, %d], got %d", uint32(math.MaxUint32), c.Producers)
	case c.ValueFormat != FormatRaw && c.ValueFormat != FormatAvro:
		return c, fmt.Errorf("value format %q is not one of %s", c.ValueFormat, strings.Join(ValueFormats, ", "))
	case c.ValueFormat == FormatRaw && c.RecordSize < ValueHeaderSize:
		return c, fmt.Errorf("record size must be at least %d bytes (producer and sequence number), got %d",
			ValueHeaderSize, c.RecordSize)
	case c.ValueFormat == FormatAvro && c.RecordSize < AvroMinRecordSize:
		return c, fmt.Errorf("avro record size must be at least %d bytes (wire-format header, producer, sequence number, amount, note length), got %d",
			AvroMinRecordSize, c.RecordSize)
	case c.ValueFormat == FormatAvro && c.SchemaID < 1:
		// Confluent schema ids are positive int32s.
		return c, fmt.Errorf("schema id must be in [1, %d], got %d", math.MaxInt32, c.SchemaID)
	case c.BatchMaxBytes < 512 || c.BatchMaxBytes > 1<<30:
		// kgo's own bounds for ProducerBatchMaxBytes.
		return c, fmt.Errorf("batch max bytes must be in [512, %d], got %d", 1<<30, c.BatchMaxBytes)
	case int64(c.RecordSize) > int64(c.BatchMaxBytes)-128:
		// A record must fit a batch with its framing (61-byte batch header, record header).
		return c, fmt.Errorf("record size %d does not fit batch max bytes %d", c.RecordSize, c.BatchMaxBytes)
	case c.Linger < NoLinger:
		return c, fmt.Errorf("linger must not be negative, got %v", c.Linger)
	case c.MaxBufferedRecords < 1:
		return c, fmt.Errorf("max buffered records must be at least 1, got %d", c.MaxBufferedRecords)
	case c.Duration < 0:
		return c, fmt.Errorf("duration must not be negative, got %v", c.Duration)
	case c.Records < 0:
		return c, fmt.Errorf("records must not be negative, got %d", c.Records)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return c, fmt.Errorf("rate must be a non-negative number, got %v", c.Rate)
	case c.FlushTimeout < 0:
		return c, fmt.Errorf("flush timeout must not be negative, got %v", c.FlushTimeout)
	case c.MaxInFlight < 0:
		return c, fmt.Errorf("max in flight must not be negative, got %d", c.MaxInFlight)
	case c.Idempotent && c.MaxInFlight != 0 && c.MaxInFlight != idempotentMaxInFlight:
		return c, fmt.Errorf("idempotent producers have %d requests in flight per broker (kgo fixes it), got %d",
			idempotentMaxInFlight, c.MaxInFlight)
	case c.Transactional && !c.Idempotent:
		return c, fmt.Errorf("transactional producers are idempotent; plain producers cannot be transactional")
	case !c.Transactional && (c.TxnRecords != 0 || c.TxnAbortFraction != 0 || c.TransactionalIDPrefix != "" || c.TxnRunID != ""):
		return c, fmt.Errorf("transaction settings need transactional producers")
	case c.TxnRecords < 0:
		return c, fmt.Errorf("records per transaction must be at least 1, got %d", c.TxnRecords)
	case c.TxnAbortFraction < 0 || c.TxnAbortFraction > 1 || math.IsNaN(c.TxnAbortFraction):
		return c, fmt.Errorf("transaction abort fraction must be in [0, 1], got %v", c.TxnAbortFraction)
	}
	if _, err := compressionCodec(c.Compression); err != nil {
		return c, err
	}
	if _, err := partitioner(c.Partitioner, 0); err != nil {
		return c, err
	}
	return c, nil
}

// TopicNames are the topics of the run: Topic alone, or with Topics above 1 "<Topic>-0000" and
// on, four digits at least so that the names sort in order.
func (c Config) TopicNames() []string {
	if c.Topics <= 1 {
		return []string{c.Topic}
	}
	names := make([]string, c.Topics)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", c.Topic, i)
	}
	return names
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q is not one of %s", name, strings.Join(Compressions, ", "))
}

// partitioner is the partitioner name gives producer index.
func partitioner(name string, index int) (kgo.Partitioner, error) {
	switch name {
	case PerProducerPartitioner:
		return perProducerPartitioner(index), nil
	case "roundrobin":
		return kgo.RoundRobinPartitioner(), nil
	case "sticky":
		return kgo.StickyPartitioner(), nil
	case "uniform":
		return kgo.UniformBytesPartitioner(64<<10, true, true, nil), nil
	}
	return nil, fmt.Errorf("partitioner %q is not one of %s", name, strings.Join(Partitioners, ", "))
}

// perProducerPartitioner sends every record of producer index to partition index mod n, n the
// partition count of the record's topic as kgo last saw it in the metadata. It is consistent
// (a record never moves to another partition), like kgo.ManualPartitioner.
func perProducerPartitioner(index int) kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return func(_ *kgo.Record, n int) int { return index % n }
	})
}

// The kgo settings Run pins that the Config does not expose, stated here so they are printed
// and recorded with every result. They are kgo's defaults, set explicitly so a kgo upgrade
// cannot change a benchmark silently.
const (
	// produceRequestTimeout is the broker-side timeout in each produce request (kgo default).
	produceRequestTimeout = 10 * time.Second
	// plainMaxInFlight is kgo's default for non-idempotent producers: one produce request per
	// broker at a time keeps retries from reordering records.
	plainMaxInFlight = 1
	// idempotentMaxInFlight is fixed by kgo (and Kafka) at 5 for idempotent producers; the
	// option that sets it is ignored for them.
	idempotentMaxInFlight = 5
	// txnTimeout is the transaction timeout transactional producers ask for (kgo default): the
	// broker aborts a transaction left open longer.
	txnTimeout = 40 * time.Second
)

// TransactionalID is producer index's transactional id.
func (c Config) TransactionalID(index int) string {
	return fmt.Sprintf("%s-%s-%d", c.TransactionalIDPrefix, c.TxnRunID, index)
}

// producerOpts are the kgo options of producer index. Every option that affects throughput is
// set explicitly, and each appears in Settings.
func (c Config) producerOpts(index int) []kgo.Opt {
	codec, _ := compressionCodec(c.Compression) // checked by normalize
	part, _ := partitioner(c.Partitioner, index)
	linger := c.Linger
	if linger == NoLinger {
		linger = 0
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(fmt.Sprintf("inlet-loadgen-%d", index)),
		kgo.DefaultProduceTopic(c.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(linger),
		kgo.ProducerBatchMaxBytes(c.BatchMaxBytes),
		kgo.ProducerBatchCompression(codec),
		kgo.MaxBufferedRecords(c.MaxBufferedRecords),
		kgo.RecordPartitioner(part),
		kgo.ProduceRequestTimeout(produceRequestTimeout),
		// RecordRetries and RecordDeliveryTimeout stay at kgo's defaults, unlimited and none:
		// a record fails only when the client gives up on the broker, which is what an
		// exactly-once check wants.
		//
		// kgo takes an EOF on a connection's first read (ApiVersions) for a TLS or SASL
		// misconfiguration and fails the records at once (ErrFirstReadEOF). Against a broker
		// that is killed and restarted under load (bench chaos), that EOF is a kill landing
		// mid-handshake, so it is retried like any other dropped connection.
		kgo.AlwaysRetryEOF(),
	}
	if !c.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(c.plainMaxInFlight()))
	}
	if c.Transactional {
		opts = append(opts, kgo.TransactionalID(c.TransactionalID(index)), kgo.TransactionTimeout(txnTimeout))
	}
	return opts
}

// plainMaxInFlight is MaxInFlight for plain producers, kgo's default when unset.
func (c Config) plainMaxInFlight() int {
	if c.MaxInFlight > 0 {
		return c.MaxInFlight
	}
	return plainMaxInFlight
}

// Settings is the resolved configuration of a run, every throughput-relevant kgo setting
// included: it is printed before a run and recorded in its Result.
type Settings struct {
	Brokers            []string      `json:"brokers"`
	Topic              string        `json:"topic"`
	Topics             int           `json:"topics,omitempty"` // above 1: TopicNames, Topic their prefix
	Partitions         int           `json:"partitions"`       // after Run: the topic's actual count (each topic's)
	Producers          int           `json:"producers"`
	Idempotent         bool          `json:"idempotent"`
	Acks               string        `json:"acks"`
	MaxInFlight        int           `json:"max_in_flight_per_broker"`
	RecordSize         int           `json:"record_size"`
	ValueFormat        string        `json:"value_format"`
	SchemaID           int32         `json:"schema_id,omitempty"` // avro only
	Key                string        `json:"key"`
	Linger             time.Duration `json:"linger_ns"`
	BatchMaxBytes      int32         `json:"batch_max_bytes"`
	Compression        string        `json:"compression"`
	MaxBufferedRecords int           `json:"max_buffered_records"`
	MaxBufferedBytes   string        `json:"max_buffered_bytes"`
	Partitioner        string        `json:"partitioner"`
	RecordRetries      string        `json:"record_retries"`
	DeliveryTimeout    string        `json:"record_delivery_timeout"`
	ProduceTimeout     time.Duration `json:"produce_request_timeout_ns"`
	Rate               float64       `json:"rate"`
	Duration           time.Duration `json:"duration_ns"`
	Records            int64         `json:"records"`
	FlushTimeout       time.Duration `json:"flush_timeout_ns"`
	Verify             bool          `json:"verify"`
	FranzGo            string        `json:"franz_go"`

	// Transactional runs only: the transactional ids (producer i's is the pattern with {i}
	// replaced; the run id is chosen when the run starts unless the Config names one), the
	// records per transaction, the fraction aborted by choice and kgo's transaction timeout.
	Transactional    bool          `json:"transactional,omitempty"`
	TransactionalIDs string        `json:"transactional_ids,omitempty"`
	TxnRecords       int           `json:"txn_records,omitempty"`
	TxnAbortFraction float64       `json:"txn_abort_fraction,omitempty"`
	TxnTimeout       time.Duration `json:"txn_timeout_ns,omitempty"`
}

// Settings fills defaults, checks the config and returns the settings a run will use. An error
// is a usage error.
func (c Config) Settings() (Settings, error) {
	n, err := c.normalize()
	if err != nil {
		return Settings{}, err
	}
	return n.settings(), nil
}

func (c Config) settings() Settings {
	s := Settings{
		Brokers:            c.Brokers,
		Topic:              c.Topic,
		Partitions:         c.Partitions,
		Producers:          c.Producers,
		Idempotent:         c.Idempotent,
		Acks:               "all",
		MaxInFlight:        c.plainMaxInFlight(),
		RecordSize:         c.RecordSize,
		ValueFormat:        c.ValueFormat,
		SchemaID:           c.SchemaID,
		Key:                "nil",
		Linger:             max(c.Linger, 0),
		BatchMaxBytes:      c.BatchMaxBytes,
		Compression:        c.Compression,
		MaxBufferedRecords: c.MaxBufferedRecords,
		MaxBufferedBytes:   "unlimited",
		Partitioner:        c.Partitioner,
		RecordRetries:      "unlimited",
		DeliveryTimeout:    "none",
		ProduceTimeout:     produceRequestTimeout,
		Rate:               c.Rate,
		Duration:           c.Duration,
		Records:            c.Records,
		FlushTimeout:       c.FlushTimeout,
		Verify:             c.Verify,
		FranzGo:            franzGoVersion(),
	}
	if c.Idempotent {
		s.MaxInFlight = idempotentMaxInFlight
	}
	if c.Topics > 1 {
		s.Topics = c.Topics
	}
	if c.Transactional {
		runID := c.TxnRunID
		if runID == "" {
			runID = "<run id>"
		}
		s.Transactional = true
		s.TransactionalIDs = fmt.Sprintf("%s-%s-{i}", c.TransactionalIDPrefix, runID)
		s.TxnRecords = c.TxnRecords
		s.TxnAbortFraction = c.TxnAbortFraction
		s.TxnTimeout = txnTimeout
	}
	return s
}

func franzGoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/twmb/franz-go" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// Write prints the settings, one per line.
func (s Settings) Write(w io.Writer) error {
	stop := "until interrupted"
	switch {
	case s.Duration > 0 && s.Records > 0:
		stop = fmt.Sprintf("after %v or %d records", s.Duration, s.Records)
	case s.Duration > 0:
		stop = fmt.Sprintf("after %v", s.Duration)
	case s.Records > 0:
		stop = fmt.Sprintf("after %d records", s.Records)
	}
	rate := "flat out"
	if s.Rate > 0 {
		rate = fmt.Sprintf("%.0f records/s (open loop)", s.Rate)
	}
	format := s.ValueFormat
	if format == FormatAvro {
		format = fmt.Sprintf("avro (Confluent wire format, schema id %d, examples/loadgen-value.avsc)", s.SchemaID)
	}
	linger := s.Linger.String()
	if s.Linger == 0 {
		linger = "none"
	}
	topics := fmt.Sprintf("topic %q, %d partitions", s.Topic, s.Partitions)
	if s.Topics > 1 {
		names := Config{Topic: s.Topic, Topics: s.Topics}.TopicNames()
		topics = fmt.Sprintf("%d topics %q..%q, %d partitions each", s.Topics, names[0], names[len(names)-1], s.Partitions)
	}
	_, err := fmt.Fprintf(w, `loadgen: %d producers (one kgo client each), %s, brokers %s
  franz-go               %s
  idempotent             %t
  acks                   %s
  max in flight/broker   %d
  record                 %d-byte value, key %s
  value format           %s
  linger                 %s
  batch max bytes        %d
  compression            %s
  max buffered records   %d per producer
  max buffered bytes     %s
  partitioner            %s
  record retries         %s
  delivery timeout       %s
  produce req timeout    %v
  rate                   %s
  stop                   %s (flush timeout %v)
  verify                 %t
`, s.Producers, topics, strings.Join(s.Brokers, ","), s.FranzGo, s.Idempotent, s.Acks,
		s.MaxInFlight, s.RecordSize, s.Key, format, linger, s.BatchMaxBytes, s.Compression, s.MaxBufferedRecords,
		s.MaxBufferedBytes, s.Partitioner, s.RecordRetries, s.DeliveryTimeout, s.ProduceTimeout, rate, stop,
		s.FlushTimeout, s.Verify)
	if err == nil && s.Transactional {
		_, err = fmt.Fprintf(w, `  transactional          ids %s (i = 0..%d), %d records each, %g aborted by choice, timeout %v
`, s.TransactionalIDs, s.Producers-1, s.TxnRecords, s.TxnAbortFraction, s.TxnTimeout)
	}
	return err
}
