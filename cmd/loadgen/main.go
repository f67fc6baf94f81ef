// Command loadgen runs kgo producers flat out (or at a rate) against a Kafka-compatible broker,
// prints throughput and ack latency, and with --verify reads every record back to check
// exactly-once (idempotent) or at-least-once (--plain) delivery. With --transactional each
// producer wraps its records in transactions of --txn-records records, aborts
// --txn-abort-fraction of them, and --verify checks that committed records are read exactly
// once and aborted ones never (read_committed). With --value-format avro every
// value is an Avro record in Confluent wire format (examples/loadgen-value.avsc, schema id
// --schema-id), which a broker validating on produce accepts: see examples/loadgen-avro.yaml.
//
// Exit status: 0 ok, 1 run error or failed verification, 2 usage error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"inlet/loadgen"
)

func main() {
	os.Exit(run())
}

// cli is loadgen's command line: the run's Config and what is turned into it.
type cli struct {
	cfg                                 loadgen.Config
	brokers, jsonPath                   string
	plain, quiet                        bool
	schemaID, batchMaxBytes, txnRecords *int
	txnPrefix                           *string
	txnAbort                            *float64
}

// defineFlags declares every flag on the default flag set.
func defineFlags() *cli {
	c := &cli{}
	cfg := &c.cfg
	flag.StringVar(&c.brokers, "brokers", loadgen.DefaultBroker, "comma-separated seed brokers")
	flag.StringVar(&cfg.Topic, "topic", loadgen.DefaultTopic, "topic to produce to (created if missing)")
	flag.IntVar(&cfg.Partitions, "partitions", loadgen.DefaultPartitions, "partitions when creating the topic")
	flag.IntVar(&cfg.Producers, "producers", loadgen.DefaultProducers, "producers, one kgo client each")
	flag.BoolVar(&cfg.Idempotent, "idempotent", true, "idempotent producers (exactly once)")
	flag.BoolVar(&c.plain, "plain", false, "plain producers: no idempotence (at least once); same as --idempotent=false")
	flag.IntVar(&cfg.RecordSize, "record-size", loadgen.DefaultRecordSize, "record value bytes")
	flag.StringVar(&cfg.ValueFormat, "value-format", loadgen.FormatRaw,
		"record values: raw (producer, sequence, padding) or avro (Confluent wire format, examples/loadgen-value.avsc)")
	c.schemaID = flag.Int("schema-id", int(loadgen.DefaultSchemaID), "schema id in avro values (--value-format avro)")
	flag.DurationVar(&cfg.Linger, "linger", loadgen.DefaultLinger, "producer linger (0 for none)")
	c.batchMaxBytes = flag.Int("batch-max-bytes", int(loadgen.DefaultBatchMaxBytes), "producer batch max bytes")
	flag.StringVar(&cfg.Compression, "compression", "none", "batch compression: "+strings.Join(loadgen.Compressions, ", "))
	flag.IntVar(&cfg.MaxBufferedRecords, "max-buffered-records", loadgen.DefaultMaxBufferedRecords,
		"records each producer buffers before Produce blocks")
	flag.StringVar(&cfg.Partitioner, "partitioner", loadgen.DefaultPartitioner,
		"partitioner: "+strings.Join(loadgen.Partitioners, ", ")+" ("+loadgen.PerProducerPartitioner+": producer i writes only partition i mod the partition count)")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Second, "stop after this long (0: no limit; when only --records is given: none)")
	flag.Int64Var(&cfg.Records, "records", 0, "stop after this many records in total")
	flag.Float64Var(&cfg.Rate, "rate", 0, "records per second over all producers, open loop (0: flat out)")
	flag.DurationVar(&cfg.FlushTimeout, "flush-timeout", loadgen.DefaultFlushTimeout,
		"how long to wait for outstanding acks after sending stops")
	flag.IntVar(&cfg.MaxInFlight, "max-inflight", 0,
		"produce requests in flight per broker, plain producers (0: kgo's default, 1; idempotent producers always have 5)")
	flag.BoolVar(&cfg.Verify, "verify", false, "read every record back and check delivery")
	flag.BoolVar(&cfg.Transactional, "transactional", false,
		"transactional producers: each its own transactional id, records in transactions; --verify reads with read_committed and checks each transaction's outcome")
	c.txnPrefix = flag.String("transactional-id-prefix", loadgen.DefaultTransactionalIDPrefix,
		"transactional id prefix (--transactional): producer i's id is <prefix>-<run id>-<i>")
	c.txnRecords = flag.Int("txn-records", loadgen.DefaultTxnRecords, "records per transaction per producer (--transactional)")
	c.txnAbort = flag.Float64("txn-abort-fraction", 0,
		"fraction of transactions aborted instead of committed, chosen by a counter (--transactional)")
	flag.StringVar(&c.jsonPath, "json", "", "write the whole result as JSON to this file")
	flag.BoolVar(&c.quiet, "quiet", false, "no per-second lines")
	return c
}

// check refuses contradicting or unused flags and completes the Config from the flags that
// are not its fields.
func (c *cli) check() error {
	cfg := &c.cfg
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	if c.plain && set["idempotent"] && cfg.Idempotent {
		return fmt.Errorf("--plain and --idempotent contradict each other")
	}
	if c.plain {
		cfg.Idempotent = false
	}
	for _, name := range []string{"transactional-id-prefix", "txn-records", "txn-abort-fraction"} {
		if set[name] && !cfg.Transactional {
			return fmt.Errorf("--%s is only used with --transactional", name)
		}
	}
	if cfg.Transactional {
		if c.plain {
			return fmt.Errorf("--plain and --transactional contradict each other: transactional producers are idempotent")
		}
		if *c.txnPrefix == "" {
			return fmt.Errorf("--transactional-id-prefix must not be empty")
		}
		if *c.txnRecords < 1 {
			return fmt.Errorf("--txn-records must be at least 1, got %d", *c.txnRecords)
		}
		cfg.TransactionalIDPrefix, cfg.TxnRecords, cfg.TxnAbortFraction = *c.txnPrefix, *c.txnRecords, *c.txnAbort
	}
	if set["schema-id"] && !strings.EqualFold(cfg.ValueFormat, loadgen.FormatAvro) {
		return fmt.Errorf("--schema-id is only used with --value-format avro")
	}
	if *c.schemaID < 1 || *c.schemaID > math.MaxInt32 {
		return fmt.Errorf("--schema-id must be in [1, %d], got %d", math.MaxInt32, *c.schemaID)
	}
	cfg.SchemaID = int32(*c.schemaID)
	if set["records"] && !set["duration"] {
		cfg.Duration = 0
	}
	if cfg.Linger == 0 {
		cfg.Linger = loadgen.NoLinger
	}
	cfg.BatchMaxBytes = int32(min(max(*c.batchMaxBytes, -1), 1<<31-1))
	cfg.Brokers = strings.Split(c.brokers, ",")
	if !c.quiet {
		cfg.Live = os.Stdout
	}
	return nil
}

func run() int {
	c := defineFlags()
	flag.Parse()
	if err := c.check(); err != nil {
		return usage(err)
	}
	cfg, jsonPath := c.cfg, c.jsonPath

	settings, err := cfg.Settings()
	if err != nil {
		return usage(err)
	}
	if err := settings.Write(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		return 1
	}

	// The first interrupt stops sending and still waits for acks (and skips verification); the
	// second kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()

	res, err := loadgen.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		return 1
	}
	if err := res.WriteSummary(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		return 1
	}
	if jsonPath != "" {
		if err := writeJSON(jsonPath, res); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			return 1
		}
	}
	if res.Verify != nil && !res.Verify.OK {
		return 1
	}
	return 0
}

func usage(err error) int {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	flag.Usage()
	return 2
}

func writeJSON(path string, res *loadgen.Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
