// Command bench is Inlet's benchmark harness: it starts fresh brokers, drives them with
// loadgen, and writes results/ and BENCHMARKS.md.
//
//	bench sweep    throughput against inlet's --workers
//	bench compare  inlet against kfake and other brokers, alternating
//	bench latency  ack latency against offered load (open loop)
//	bench scale    throughput and broker cost along partitions, topics, producers, record size
//	               and compression, inlet against --peer brokers at each point
//	bench chaos    kill -9 and restart inlet under verified load
//	bench rebalance  a 5th member joining a 4-member group: classic against KIP-848, inlet against kfake
//	bench profile  CPU and allocation profiles of inlet under load
//	bench report   render BENCHMARKS.md and the charts from results/*.json
//
// Exit status: 0 ok, 1 error or failed chaos verification, 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"inlet/bench"
	"inlet/bench/human"
	"inlet/bench/proc"
	"inlet/bench/profile"
	"inlet/bench/rebalance"
	"inlet/bench/report"
	"inlet/bytesize"
	"inlet/loadgen"
)

const usageText = `usage: bench <command> [flags]

commands:
  sweep    throughput against inlet's --workers (fresh inlet per point)
  compare  the same load against inlet, inlet-discard, kfake, kfake-sync and --peer brokers
           (--consume: then fill, catch-up read and tail on the same broker)
  latency  ack latency at offered loads (--rates fractions of --of, or records/s)
  scale    throughput and broker CPU/RSS along one load dimension at a time (--dimension),
           inlet against --peer brokers alternating at each point
  chaos    SIGKILL and restart inlet under verified load
  rebalance  time until every partition is consumed again after a member joins a group,
           classic (cooperative-sticky) against KIP-848, inlet against kfake
  profile  CPU and allocation profiles of inlet under the standard load
  report   render BENCHMARKS.md and results/*.svg from results/*.json

'bench <command> --help' lists a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usageText)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A second signal kills the process.
	go func() { <-ctx.Done(); stop() }()
	os.Exit(run(ctx, os.Args[1], os.Args[2:]))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// common holds the flags every measuring command shares.
type common struct {
	fs        *flag.FlagSet
	load      bench.Load
	plain     bool
	env       bench.Env
	live      bool
	storage   string
	inletArgs stringList
}

func newCommon(name string, duration time.Duration) *common {
	c := &common{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := c.fs
	fs.IntVar(&c.load.Producers, "producers", 16, "producers, one kgo client each")
	fs.IntVar(&c.load.Partitions, "partitions", 16, "partitions of the topic (and inlet's --default-partitions)")
	fs.IntVar(&c.load.RecordSize, "record-size", 100, "record value bytes")
	fs.BoolVar(&c.load.Idempotent, "idempotent", true, "idempotent producers")
	fs.BoolVar(&c.plain, "plain", false, "plain producers (no idempotence); same as --idempotent=false")
	fs.IntVar(&c.load.MaxInFlight, "max-inflight", 0, "loadgen --max-inflight: produce requests in flight per broker of plain producers (0: kgo's default, 1; idempotent ones always have 5)")
	fs.DurationVar(&c.load.Duration, "duration", duration, "sending time of each run")
	fs.IntVar(&c.load.MaxBufferedRecords, "max-buffered-records", 0, "records each producer buffers (0: loadgen's default)")
	fs.StringVar(&c.load.Topic, "topic", "bench", "topic")
	fs.StringVar(&c.load.ValueFormat, "value-format", "raw", "loadgen --value-format: raw, or avro (Confluent wire format, examples/loadgen-value.avsc)")
	fs.Func("schema-id", "loadgen --schema-id of avro values (default: loadgen's, 1)", func(v string) error {
		id, err := strconv.ParseInt(v, 10, 32)
		if err != nil || id < 1 {
			return fmt.Errorf("%q is not a schema id in [1, 2147483647]", v)
		}
		c.load.SchemaID = int32(id)
		return nil
	})
	fs.StringVar(&c.env.ResultsDir, "results-dir", "", "where result JSON and CSV files go (default: results/ in the repository root)")
	fs.StringVar(&c.env.TmpDir, "tmp-dir", "", "parent of each run's fresh data directory (default: $TMPDIR or /tmp); must be on a real disk")
	fs.StringVar(&c.env.InletBin, "inlet-bin", "", "inlet binary (default: build bin/inlet with go build first)")
	fs.BoolVar(&c.env.KeepData, "keep-data", false, "keep each run's data directory and server log")
	fs.DurationVar(&c.env.Pause, "pause", time.Second, "pause between runs (lets writeback of the last run finish)")
	fs.BoolVar(&c.live, "live", false, "print loadgen's per-second lines on stderr")
	fs.StringVar(&c.storage, "storage", "segments", "inlet --storage (segments, pebble or discard)")
	fs.Var(&c.inletArgs, "inlet-arg", "extra inlet flag, repeatable (--inlet-arg=--max-group-bytes=8MiB)")
	fs.BoolVar(&c.load.Transactional, "transactional", false,
		"loadgen --transactional: records in transactions (chaos checks every committed record once, no aborted one)")
	fs.IntVar(&c.load.TxnRecords, "txn-records", loadgen.DefaultTxnRecords, "loadgen --txn-records: records per transaction per producer (--transactional)")
	fs.Float64Var(&c.load.TxnAbortFraction, "txn-abort-fraction", 0, "loadgen --txn-abort-fraction: fraction of transactions aborted (--transactional)")
	return c
}

// parse parses args and finishes the shared settings; false means a usage error was printed.
func (c *common) parse(args []string) bool {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		return false
	}
	if c.fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench %s: unexpected arguments: %s\n", c.fs.Name(), strings.Join(c.fs.Args(), " "))
		return false
	}
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.plain && set["idempotent"] && c.load.Idempotent {
		fmt.Fprintf(os.Stderr, "bench %s: --plain and --idempotent contradict each other\n", c.fs.Name())
		return false
	}
	if c.plain {
		c.load.Idempotent = false
	}
	if err := checkTxnFlags(c); err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", c.fs.Name(), err)
		return false
	}
	c.env.Command = human.CommandLine(append([]string{"bin/bench", c.fs.Name()}, args...))
	c.env.Flags = map[string]string{}
	c.fs.VisitAll(func(f *flag.Flag) { c.env.Flags[f.Name] = f.Value.String() })
	c.env.Stdout, c.env.Stderr = os.Stdout, os.Stderr
	if c.live {
		c.env.Live = os.Stderr
	}
	return true
}

func run(ctx context.Context, cmd string, args []string) int {
	switch cmd {
	case "sweep":
		return runSweep(ctx, cmd, args)
	case "compare":
		return runCompare(ctx, cmd, args)
	case "scale":
		return runScale(ctx, cmd, args)
	case "latency":
		return runLatency(ctx, cmd, args)
	case "chaos":
		return runChaos(ctx, cmd, args)
	case "profile":
		return runProfile(ctx, cmd, args)
	case "rebalance":
		return runRebalance(ctx, cmd, args)
	case "report":
		return runReport(cmd, args)
	case "help", "-h", "--help":
		fmt.Print(usageText)
		return 0
	}
	fmt.Fprintf(os.Stderr, "bench: unknown command %q\n\n%s", cmd, usageText)
	return 2
}

// runSweep is `bench sweep`: throughput against inlet's --workers.
func runSweep(ctx context.Context, cmd string, args []string) int {
	c := newCommon(cmd, 20*time.Second)
	workers := c.fs.String("workers", "1,2,4,8,16", "comma-separated inlet --workers values")
	repeat := c.fs.Int("repeat", 3, "runs of each worker count")
	if !c.parse(args) {
		return 2
	}
	ws, err := bench.ParseInts(*workers)
	if err != nil {
		return usage(cmd, fmt.Errorf("--workers: %w", err))
	}
	f, err := bench.Sweep(ctx, bench.SweepOptions{Env: c.env, Load: c.load, Workers: ws, Repeat: *repeat,
		Storage: c.storage, InletArgs: c.inletArgs})
	return exitFile(cmd, f, err)
}

// runCompare is `bench compare`: the same load against each target in turn, and with --consume the consume phase.
func runCompare(ctx context.Context, cmd string, args []string) int {
	c := newCommon(cmd, 20*time.Second)
	targets := c.fs.String("targets", strings.Join(bench.BuiltinTargets, ","), "built-in targets to measure ('' for none)")
	var peers stringList
	c.fs.Var(&peers, "peer", "another broker, repeatable: name='shell command with {port} and {dir}'")
	repeat := c.fs.Int("repeat", 3, "rounds over all targets")
	workers := c.fs.Int("workers", 0, "inlet --workers (0: inlet's default)")
	kfakeBin := c.fs.String("kfake-bin", "", "kfake-broker binary (default: build bin/kfake-broker)")
	consume := c.fs.Bool("consume", false, "after each produce run, on the same broker: fill a topic, read it back with --consumers (catch-up), then follow a --tail-rate tail")
	var cs bench.ConsumeSettings
	c.fs.Int64Var(&cs.FillRecords, "fill-records", bench.DefaultFillRecords, "--consume: records written flat out before the catch-up read")
	c.fs.IntVar(&cs.Consumers, "consumers", bench.DefaultConsumers, "--consume: consumer clients, the partitions dealt round-robin among them")
	c.fs.Float64Var(&cs.TailRate, "tail-rate", bench.DefaultTailRate, "--consume: records/s produced during the tail")
	c.fs.DurationVar(&cs.TailDuration, "tail-duration", bench.DefaultTailDuration, "--consume: sending time of the tail")
	c.fs.IntVar(&cs.TailProducers, "tail-producers", 0, "--consume: producers of the tail (0: --producers)")
	c.fs.DurationVar(&cs.Timeout, "consume-timeout", bench.DefaultConsumeTimeout, "--consume: bound of the fill and of the catch-up read each")
	addShapeFlags(c.fs, &cs)
	if !c.parse(args) {
		return 2
	}
	o := bench.CompareOptions{Env: c.env, Load: c.load, Repeat: *repeat, Storage: c.storage, Workers: *workers,
		InletArgs: c.inletArgs, KfakeBin: *kfakeBin}
	if *consume {
		o.Consume = &cs
	} else {
		for _, name := range append([]string{"fill-records", "consumers", "tail-rate", "tail-duration", "tail-producers", "consume-timeout"}, shapeFlags...) {
			if isSet(c.fs, name) {
				return usage(cmd, fmt.Errorf("--%s is only used with --consume", name))
			}
		}
	}
	var err error
	if o.Targets, o.Peers, err = parseTargets(*targets, peers); err != nil {
		return usage(cmd, err)
	}
	f, err := bench.Compare(ctx, o)
	return exitFile(cmd, f, err)
}

// runScale is `bench scale`: comparisons along one load dimension at a time.
func runScale(ctx context.Context, cmd string, args []string) int {
	c := newCommon(cmd, 10*time.Second)
	dims := c.fs.String("dimension", "all", "dimensions to measure, comma-separated: "+strings.Join(bench.ScaleDimensions, ", ")+", or all")
	pointHelp := map[string]string{
		bench.DimPartitions:  "partition counts of the one topic",
		bench.DimTopics:      "topic counts, one partition each",
		bench.DimProducers:   "producer counts (one client and connection each)",
		bench.DimRecordSize:  "record value sizes in bytes",
		bench.DimCompression: "producer compressions (" + strings.Join(loadgen.Compressions, ", ") + ")",
	}
	pointFlags := map[string]*string{}
	for _, d := range bench.ScaleDimensions {
		pointFlags[d] = c.fs.String(d+"-points", strings.Join(bench.DefaultScalePoints[d], ","), "comma-separated "+pointHelp[d])
	}
	targets := c.fs.String("targets", bench.TargetInlet, "built-in targets to measure ('' for none): "+strings.Join(bench.BuiltinTargets, ", "))
	var peers stringList
	c.fs.Var(&peers, "peer", "another broker, repeatable: name='shell command with {port}, {dir} and {partitions}' ({partitions}: the point's partition count)")
	repeat := c.fs.Int("repeat", 2, "rounds over all targets at each point")
	workers := c.fs.Int("workers", 0, "inlet --workers (0: inlet's default)")
	kfakeBin := c.fs.String("kfake-bin", "", "kfake-broker binary (default: build bin/kfake-broker)")
	rssLimit := c.fs.String("rss-limit", "", "flag a point whose broker peak RSS is above this (default: inlet's --inflight-budget, from --inlet-arg or 256MiB, plus 256MiB)")
	if !c.parse(args) {
		return 2
	}
	ds, err := bench.ParseDimensions(*dims)
	if err != nil {
		return usage(cmd, fmt.Errorf("--dimension: %w", err))
	}
	o := bench.ScaleOptions{Env: c.env, Base: c.load, Dimensions: ds, Points: map[string][]string{}, Repeat: *repeat,
		Storage: c.storage, Workers: *workers, InletArgs: c.inletArgs, KfakeBin: *kfakeBin}
	for _, d := range bench.ScaleDimensions {
		if !slices.Contains(ds, d) {
			if isSet(c.fs, d+"-points") {
				return usage(cmd, fmt.Errorf("--%s-points given, but --dimension does not measure %s", d, d))
			}
			continue
		}
		if o.Points[d], err = bench.ParsePoints(d, *pointFlags[d]); err != nil {
			return usage(cmd, fmt.Errorf("--%s-points: %w", d, err))
		}
	}
	if *rssLimit != "" {
		if o.RSSLimitBytes, err = bytesize.Parse(*rssLimit); err != nil {
			return usage(cmd, fmt.Errorf("--rss-limit: %w", err))
		}
	}
	if o.Targets, o.Peers, err = parseTargets(*targets, peers); err != nil {
		return usage(cmd, err)
	}
	f, err := bench.Scale(ctx, o)
	return exitFile(cmd, f, err)
}

// runLatency is `bench latency`: ack latency at offered loads.
func runLatency(ctx context.Context, cmd string, args []string) int {
	c := newCommon(cmd, 20*time.Second)
	rates := c.fs.String("rates", "0.25,0.5,0.75", "offered loads: fractions of --of, or records/s without --of")
	of := c.fs.String("of", "", "flat-out records/s the rates are fractions of, or 'flat' to measure it first (default: rates are records/s)")
	repeat := c.fs.Int("repeat", 1, "runs of each rate")
	workers := c.fs.Int("workers", 0, "inlet --workers (0: inlet's default)")
	peer := c.fs.String("peer", "", "measure this broker instead of inlet: name='shell command with {port} and {dir}', or name[key=value,...]='...' to create the topic with those configs")
	if !c.parse(args) {
		return 2
	}
	rs, err := bench.ParseRates(*rates)
	if err != nil {
		return usage(cmd, fmt.Errorf("--rates: %w", err))
	}
	o := bench.LatencyOptions{Env: c.env, Load: c.load, Repeat: *repeat, Rates: rs, Storage: c.storage,
		Workers: *workers, InletArgs: c.inletArgs}
	if *peer != "" {
		if o.Target, err = bench.ParsePeer(*peer); err != nil {
			return usage(cmd, fmt.Errorf("--peer: %w", err))
		}
	}
	switch *of {
	case "":
	case "flat":
		o.OfFlat = true
	default:
		if o.Of, err = strconv.ParseFloat(*of, 64); err != nil || o.Of <= 0 {
			return usage(cmd, fmt.Errorf("--of: %q is neither a positive number nor 'flat'", *of))
		}
	}
	f, err := bench.Latency(ctx, o)
	return exitFile(cmd, f, err)
}

// runChaos is `bench chaos`: SIGKILL and restart inlet under verified load; 1 when verification fails.
func runChaos(ctx context.Context, cmd string, args []string) int {
	c := newCommon(cmd, 60*time.Second)
	o := bench.ChaosOptions{}
	c.fs.DurationVar(&o.KillEvery, "kill-every", 3*time.Second, "mean time between SIGKILLs (each gap uniform in [0.5x, 1.5x])")
	c.fs.IntVar(&o.MaxKills, "max-kills", 0, "at most this many kills (0: as many as fit in --duration)")
	c.fs.DurationVar(&o.Down, "down", 0, "how long inlet stays dead before the restart")
	c.fs.Float64Var(&o.Rate, "rate", 0, "offered records/s over all producers (0: flat out)")
	c.fs.DurationVar(&o.FlushTimeout, "flush-timeout", 2*time.Minute, "how long to wait for outstanding acks after sending stops")
	c.fs.Int64Var(&o.Seed, "seed", 0, "seed of the kill schedule (0: from the clock; recorded)")
	c.fs.IntVar(&o.Workers, "workers", 0, "inlet --workers (0: inlet's default)")
	if !c.parse(args) {
		return 2
	}
	o.Env, o.Load, o.Storage, o.InletArgs = c.env, c.load, c.storage, c.inletArgs
	f, err := bench.Chaos(ctx, o)
	if code := exitFile(cmd, f, err); code != 0 {
		return code
	}
	if !f.Chaos.OK {
		fmt.Fprintf(os.Stderr, "bench chaos: FAILED: %s\n", strings.Join(f.Chaos.Failures, "; "))
		return 1
	}
	return 0
}

// runProfile is `bench profile`: CPU and allocation profiles of inlet under load.
func runProfile(ctx context.Context, cmd string, args []string) int {
	c := newCommon(cmd, 20*time.Second)
	o := profile.Options{}
	c.fs.StringVar(&o.OutDir, "out", "", "directory for the profiles (default: profiles/ in the repository root)")
	c.fs.IntVar(&o.Workers, "workers", 0, "inlet --workers (0: inlet's default)")
	if !c.parse(args) {
		return 2
	}
	o.Env, o.Load, o.Storage, o.InletArgs = c.env, c.load, c.storage, c.inletArgs
	files, err := profile.Run(ctx, o)
	for _, f := range files {
		fmt.Println(f)
	}
	return exit(cmd, err)
}

// runRebalance is `bench rebalance`: the time a group takes to hand partitions to a member
// that joins it, per broker and group protocol.
func runRebalance(ctx context.Context, cmd string, args []string) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	o := rebalance.Options{Shape: rebalance.DefaultShape}
	targets := fs.String("targets", bench.TargetInlet+","+bench.TargetKfake, "brokers to measure: inlet, kfake")
	protocols := fs.String("protocols", strings.Join(rebalance.Protocols, ","), "group protocols: classic (cooperative-sticky), consumer (KIP-848)")
	fs.IntVar(&o.Repeat, "repeat", 5, "rounds over all brokers and protocols")
	partitions := fs.Int("partitions", int(o.Shape.Partitions), "partitions of the topic")
	fs.IntVar(&o.Shape.Members, "members", o.Shape.Members, "members before the join (the join adds one)")
	fs.Float64Var(&o.Shape.Rate, "rate", o.Shape.Rate, "records/s produced into each partition")
	fs.DurationVar(&o.Shape.Steady, "steady", o.Shape.Steady, "least time the first members stay settled before the join")
	fs.DurationVar(&o.Shape.Jitter, "jitter", o.Shape.Jitter, "the join waits a further draw from [0, jitter)")
	fs.DurationVar(&o.Shape.JoinTimeout, "join-timeout", o.Shape.JoinTimeout, "bound of the rebalance (and of the first members' start)")
	fs.Int64Var(&o.Seed, "seed", 0, "seed of the join delays (0: from the clock; printed)")
	fs.BoolVar(&o.Timeline, "timeline", false, "print each run's assignments, revocations and first deliveries after the join")
	fs.StringVar(&o.Env.InletBin, "inlet-bin", "", "inlet binary (default: build bin/inlet with go build first)")
	fs.StringVar(&o.KfakeBin, "kfake-bin", "", "kfake-broker binary (default: build bin/kfake-broker)")
	fs.StringVar(&o.Env.TmpDir, "tmp-dir", "", "parent of each run's fresh data directory (default: $TMPDIR or /tmp)")
	fs.DurationVar(&o.Env.Pause, "pause", time.Second, "pause between runs")
	var inletArgs stringList
	fs.Var(&inletArgs, "inlet-arg", "extra inlet flag, repeatable")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		return usage(cmd, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	if *partitions < 1 || o.Shape.Members < 1 || o.Shape.Rate <= 0 || o.Shape.JoinTimeout <= 0 {
		return usage(cmd, errors.New("--partitions, --members, --rate and --join-timeout must be positive"))
	}
	o.Shape.Partitions, o.Shape.StartTimeout = int32(*partitions), o.Shape.JoinTimeout
	o.InletArgs = inletArgs
	o.Targets, _, _ = parseTargets(*targets, nil)
	o.Protocols, _, _ = parseTargets(*protocols, nil)
	o.Env.Command = human.CommandLine(append([]string{"bin/bench", cmd}, args...))
	o.Env.Stdout, o.Env.Stderr = os.Stdout, os.Stderr
	_, err := rebalance.Run(ctx, o)
	return exit(cmd, err)
}

// runReport is `bench report`: BENCHMARKS.md and the charts from the result files.
func runReport(cmd string, args []string) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	o := report.Options{Stderr: os.Stderr}
	fs.StringVar(&o.ResultsDir, "results-dir", "", "result files to read (default: results/ in the repository root)")
	fs.StringVar(&o.Out, "out", "", "markdown file to update (default: BENCHMARKS.md in the repository root)")
	fs.StringVar(&o.ChartsDir, "charts-dir", "", "where the SVG charts go (default: the results directory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		return usage(cmd, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	files, err := report.Write(o)
	for _, f := range files {
		fmt.Println(f)
	}
	return exit(cmd, err)
}

// shapeFlags are the flags of addShapeFlags.
var shapeFlags = []string{"consume-shape", "fill-partitioner", "fill-linger", "fill-batch-max-bytes", "fill-max-buffered-records",
	"fetch-max-bytes", "fetch-max-partition-bytes", "fetch-max-wait", "fetch-min-bytes"}

// addShapeFlags adds the flags of the consume phase's shape to fs: a preset (--consume-shape)
// and each of its settings, which override the preset's. Unset, a setting stays zero and takes
// the preset's value (bench.ConsumeSettings.Normalize), so the defaults are today's shape.
func addShapeFlags(fs *flag.FlagSet, cs *bench.ConsumeSettings) {
	var shapes []string
	for _, sh := range bench.ConsumeShapes {
		shapes = append(shapes, sh.Name+": "+sh.Description)
	}
	fs.StringVar(&cs.Shape, "consume-shape", bench.ShapeDefault, "--consume: preset of the producer and fetch settings below, which override it; "+
		strings.Join(shapes, "; "))
	fs.StringVar(&cs.Partitioner, "fill-partitioner", "", "--consume: partitioner of the fill's and the tail's producers: "+
		strings.Join(loadgen.Partitioners, ", ")+" ("+loadgen.PerProducerPartitioner+": producer i writes only partition i mod --partitions; default: the shape's)")
	fs.Func("fill-linger", "--consume: linger of the fill's and the tail's producers, 0 for none (default: the shape's, 5ms)", func(v string) error {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return err
		case d < 0:
			return fmt.Errorf("%q is negative", v)
		case d == 0:
			d = loadgen.NoLinger
		}
		cs.Linger = d
		return nil
	})
	fs.Func("fill-batch-max-bytes", "--consume: batch max bytes of the fill's and the tail's producers, e.g. 1MiB (default: the shape's)", sizeFlag(&cs.BatchMaxBytes))
	fs.Func("fill-max-buffered-records", "--consume: records each producer of the fill and the tail buffers (default: the shape's; default shape: --max-buffered-records)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive count", v)
		}
		cs.MaxBufferedRecords = n
		return nil
	})
	fs.Func("fetch-max-bytes", "--consume: the consumers' FetchMaxBytes, e.g. 50MiB (default: the shape's)", sizeFlag(&cs.FetchMaxBytes))
	fs.Func("fetch-max-partition-bytes", "--consume: the consumers' FetchMaxPartitionBytes, e.g. 10MiB (default: the shape's)", sizeFlag(&cs.FetchMaxPartitionBytes))
	fs.Func("fetch-min-bytes", "--consume: the consumers' FetchMinBytes (default: the shape's, 1)", sizeFlag(&cs.FetchMinBytes))
	fs.Func("fetch-max-wait", "--consume: the consumers' FetchMaxWait, at least 10ms (default: the shape's)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration", v)
		}
		cs.FetchMaxWait = d
		return nil
	})
}

// sizeFlag parses a positive size (bytesize.Parse: 1048576, 1MiB, 64KiB) into *dst.
func sizeFlag(dst *int32) func(string) error {
	return func(v string) error {
		n, err := bytesize.Parse(v)
		if err != nil || n < 1 || n > math.MaxInt32 {
			return fmt.Errorf("%q is not a size in [1, %d] bytes", v, math.MaxInt32)
		}
		*dst = int32(n)
		return nil
	}
}

// checkTxnFlags refuses transaction flags without --transactional, and --transactional with
// plain producers.
func checkTxnFlags(c *common) error {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !c.load.Transactional {
		for _, name := range []string{"txn-records", "txn-abort-fraction"} {
			if set[name] {
				return fmt.Errorf("--%s is only used with --transactional", name)
			}
		}
		c.load.TxnRecords, c.load.TxnAbortFraction = 0, 0
		return nil
	}
	switch {
	case !c.load.Idempotent:
		return errors.New("--transactional needs idempotent producers (not --plain)")
	case c.load.TxnRecords < 1:
		return fmt.Errorf("--txn-records must be at least 1, got %d", c.load.TxnRecords)
	case c.load.TxnAbortFraction < 0 || c.load.TxnAbortFraction > 1:
		return fmt.Errorf("--txn-abort-fraction must be in [0, 1], got %v", c.load.TxnAbortFraction)
	}
	return nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func usage(cmd string, err error) int {
	fmt.Fprintf(os.Stderr, "bench %s: %v\n", cmd, err)
	return 2
}

// exitFile is exit, and 1 for a run that was interrupted (its partial results are written).
func exitFile(cmd string, f *bench.File, err error) int {
	if code := exit(cmd, err); code != 0 {
		return code
	}
	if f != nil && f.Interrupted {
		fmt.Fprintf(os.Stderr, "bench %s: interrupted; the points measured so far are in %s\n", cmd, f.Name)
		return 1
	}
	return 0
}

func exit(cmd string, err error) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// parseTargets reads --targets (comma-separated built-in names) and the --peer values.
func parseTargets(targets string, peers []string) (names []string, parsed []proc.Target, err error) {
	for t := range strings.SplitSeq(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			names = append(names, t)
		}
	}
	for _, p := range peers {
		t, err := bench.ParsePeer(p)
		if err != nil {
			return nil, nil, err
		}
		parsed = append(parsed, t)
	}
	return names, parsed, nil
}
