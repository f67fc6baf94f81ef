package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"inlet/bench/human"
	"inlet/bench/proc"
	"inlet/loadgen"
)

// Load is the loadgen side of every measurement. Linger and compression are pinned in
// config rather than left to defaults, so a loadgen default changing cannot move a figure.
type Load struct {
	Producers  int
	Partitions int
	RecordSize int
	Idempotent bool
	Duration   time.Duration
	// MaxBufferedRecords per producer; 0 is loadgen's default.
	MaxBufferedRecords int
	Topic              string
	// ValueFormat and SchemaID are loadgen's (empty and 0: its defaults, raw values).
	ValueFormat string
	SchemaID    int32
	// MaxInFlight is loadgen's --max-inflight (plain producers; 0: kgo's default, 1).
	MaxInFlight int
	// Transactional, TxnRecords and TxnAbortFraction are loadgen's --transactional,
	// --txn-records (0: loadgen's default) and --txn-abort-fraction.
	Transactional    bool
	TxnRecords       int
	TxnAbortFraction float64
	// Compression is loadgen's producer compression; empty: benchCompression.
	Compression string
	// Topics above 1 spreads the records over that many topics "<Topic>-0000"... of
	// Partitions partitions each (loadgen's Config.Topics); 0 and 1: the single Topic.
	Topics int
}

// Linger and compression of every bench run: librdkafka's and the Java client's linger, and
// no compression (kgo would use snappy otherwise) unless a Load names one (bench scale).
const (
	benchLinger      = 5 * time.Millisecond
	benchCompression = "none"
)

// Config is the loadgen configuration of the load against addr at rate records/s (0: flat
// out).
func (l Load) Config(addr string, rate float64) loadgen.Config {
	topic := l.Topic
	if topic == "" {
		topic = "bench"
	}
	compression := l.Compression
	if compression == "" {
		compression = benchCompression
	}
	cfg := loadgen.Config{
		Brokers:            []string{addr},
		Topic:              topic,
		Topics:             l.Topics,
		Partitions:         l.Partitions,
		Producers:          l.Producers,
		Idempotent:         l.Idempotent,
		RecordSize:         l.RecordSize,
		Linger:             benchLinger,
		Compression:        compression,
		MaxBufferedRecords: l.MaxBufferedRecords,
		Duration:           l.Duration,
		Rate:               rate,
		ValueFormat:        l.ValueFormat,
		SchemaID:           l.SchemaID,
		MaxInFlight:        l.MaxInFlight,
	}
	if l.Transactional {
		cfg.Transactional, cfg.TxnRecords, cfg.TxnAbortFraction = true, l.TxnRecords, l.TxnAbortFraction
	}
	return cfg
}

// Label describes the load for grouping results.
func (l Load) Label() string {
	mode := "plain"
	switch {
	case l.Transactional:
		records := l.TxnRecords
		if records == 0 {
			records = loadgen.DefaultTxnRecords
		}
		mode = fmt.Sprintf("transactional (%d records a transaction", records)
		if l.TxnAbortFraction > 0 {
			mode += fmt.Sprintf(", %g aborted", l.TxnAbortFraction)
		}
		mode += ")"
	case l.Idempotent:
		mode = "idempotent"
	}
	label := fmt.Sprintf("%s, %d producers, %d-byte records", mode, l.Producers, l.RecordSize)
	if l.ValueFormat != "" && l.ValueFormat != loadgen.FormatRaw {
		label += " (" + l.ValueFormat + ")"
	}
	if !l.Idempotent && l.MaxInFlight > 0 {
		label += fmt.Sprintf(", %d in flight", l.MaxInFlight)
	}
	if l.Topics > 1 {
		label += fmt.Sprintf(", %d topics", l.Topics)
	}
	if l.Compression != "" && l.Compression != benchCompression {
		label += ", " + l.Compression + " compression"
	}
	return label
}

// Env is what every measuring subcommand shares.
type Env struct {
	// Root is the repository root (found from the working directory when empty).
	Root string
	// ResultsDir receives the JSON and CSV files; empty: Root/results.
	ResultsDir string
	// TmpDir holds each run's fresh data directory; empty: os.TempDir().
	TmpDir string
	// InletBin is the broker binary; empty: build Root/bin/inlet with go build first.
	InletBin string
	// KeepData keeps each run's data directory and server log.
	KeepData bool
	// Pause between runs lets the kernel finish writeback of the previous run's files.
	Pause time.Duration
	// Command is the command line as typed; Flags every flag of the subcommand.
	Command string
	Flags   map[string]string
	// Stdout gets the final table, Stderr the progress lines, Live (if set) loadgen's
	// per-second lines.
	Stdout, Stderr, Live io.Writer

	clkTck int
}

// Prepare fills the Env's defaults and builds the inlet binary if needed.
func (e *Env) Prepare() error {
	if e.Stdout == nil {
		e.Stdout = io.Discard
	}
	if e.Stderr == nil {
		e.Stderr = io.Discard
	}
	if e.Root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if e.Root, err = FindRoot(wd); err != nil {
			return err
		}
	}
	if e.ResultsDir == "" {
		e.ResultsDir = filepath.Join(e.Root, "results")
	}
	if e.TmpDir == "" {
		e.TmpDir = os.TempDir()
	}
	if e.Flags == nil {
		e.Flags = map[string]string{}
	}
	e.clkTck = proc.ClockTicks()
	if e.InletBin == "" {
		bin, err := e.build("inlet", "inlet/cmd/inlet")
		if err != nil {
			return err
		}
		e.InletBin = bin
	}
	return nil
}

// Build compiles pkg into Root/bin/name and returns the binary's path (for subcommands
// outside this package, such as bench/rebalance's kfake-broker).
func (e *Env) Build(name, pkg string) (string, error) { return e.build(name, pkg) }

// build compiles pkg into Root/bin/name.
func (e *Env) build(name, pkg string) (string, error) {
	bin := filepath.Join(e.Root, "bin", name)
	fmt.Fprintf(e.Stderr, "bench: go build -o %s %s\n", RelPath(e.Root, bin), pkg)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = e.Root
	cmd.Stdout, cmd.Stderr = e.Stderr, e.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return bin, nil
}

// FindRoot returns the directory at or above dir holding the go.mod of module inlet.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			isInlet := sc.Scan() && strings.TrimSpace(sc.Text()) == "module inlet"
			f.Close()
			if isInlet {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of module inlet at or above %s", dir)
		}
	}
}

// newFile starts a result file.
func (e *Env) newFile(kind, label string) *File {
	f := &File{Kind: kind, Label: label, Command: e.Command, Flags: e.Flags, Machine: proc.DescribeMachine(e.Root),
		Started: time.Now().UTC()}
	if t := proc.FSType(e.TmpDir); t == "tmpfs" || t == "overlayfs" {
		note := fmt.Sprintf("data directories are under %s, a %s: fsync costs nothing there and write_bytes may not count; use --tmp-dir on a disk", e.TmpDir, t)
		f.Notes = append(f.Notes, note)
		fmt.Fprintln(e.Stderr, "bench: warning:", note)
	}
	return f
}

// finish computes nothing; it writes f to results/ as JSON, appends its CSV rows and says
// where they went.
// finishRuns marks f interrupted when ctx ended the measurement, computes its medians (and
// ratios to baseline, if any), and writes it (finish).
func (e *Env) finishRuns(ctx context.Context, f *File, baseline string) error {
	f.Interrupted = ctx.Err() != nil
	f.Summary = Summarize(f.Runs, baseline)
	return e.finish(f)
}

func (e *Env) finish(f *File) error {
	f.Finished = time.Now().UTC()
	path, err := writeFile(e.Root, e.ResultsDir, f)
	if err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	fmt.Fprintf(e.Stderr, "bench: wrote %s\n", RelPath(e.Root, path))
	csvPath, err := appendCSV(e.ResultsDir, f)
	if err != nil {
		// The JSON file holds everything; a CSV that cannot take the rows is not worth the run.
		fmt.Fprintf(e.Stderr, "bench: warning: %v\n", err)
	} else {
		fmt.Fprintf(e.Stderr, "bench: appended to %s\n", RelPath(e.Root, csvPath))
	}
	return nil
}

// InletTarget is the inlet command with the bench's standard flags.
func (e *Env) InletTarget(name string, load Load, storage string, workers int, extra []string) proc.Target {
	return e.inletTargetWith(name, strconv.Itoa(load.Partitions), storage, workers, extra)
}

// inletTargetWith is InletTarget with --default-partitions given as text: a count, or
// {partitions} for a target measured at several partition counts (bench scale).
func (e *Env) inletTargetWith(name, partitions, storage string, workers int, extra []string) proc.Target {
	argv := []string{e.InletBin, "--listen", "127.0.0.1:{port}", "--data-dir", "{dir}",
		"--default-partitions", partitions}
	if storage != "" {
		argv = append(argv, "--storage", storage)
	}
	if workers > 0 {
		argv = append(argv, "--workers", strconv.Itoa(workers))
	}
	return proc.Target{Name: name, Argv: append(argv, extra...)}
}

// measure runs t on a fresh data directory under one loadgen run and returns the run, with
// every problem (an interrupted ctx included) in Run.Error.
func (e *Env) measure(ctx context.Context, t proc.Target, load Load, rate float64) Run {
	return e.measureThen(ctx, t, load, rate, nil)
}

// measureThen is measure, calling then (if not nil) on the running broker after the loadgen
// run and the reading of its /proc figures, before the broker is stopped: a further phase on
// the same broker (compare --consume) cannot move the produce figures. then is not called
// when the broker is no longer running.
func (e *Env) measureThen(ctx context.Context, t proc.Target, load Load, rate float64, then func(*proc.Server, *Run)) Run {
	t = t.WithPartitions(load.Partitions)
	run := Run{Target: t.Name, Rate: rate, Started: time.Now().UTC()}
	fail := func(format string, a ...any) Run {
		msg := fmt.Sprintf(format, a...)
		if run.Error != "" {
			run.Error += "; " + msg
		} else {
			run.Error = msg
		}
		return run
	}
	base, err := os.MkdirTemp(e.TmpDir, "inlet-bench-"+t.Name+"-")
	if err != nil {
		return fail("%v", err)
	}
	keep := e.KeepData
	defer func() {
		if keep {
			fmt.Fprintf(e.Stderr, "bench: kept %s\n", base)
		} else {
			os.RemoveAll(base)
		}
	}()
	dir, logPath := filepath.Join(base, "data"), filepath.Join(base, "server.log")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fail("%v", err)
	}
	run.DataFS = proc.FSType(dir)
	srv, err := proc.Start(t, dir, logPath)
	if err != nil {
		return fail("%v", err)
	}
	run.Argv = t.Expand(srv.Port(), dir)

	cfg := load.Config(srv.Addr(), rate)
	if len(t.TopicConfigs) > 0 {
		if cfg.Topics > 1 {
			srv.Stop()
			return fail("topic configs of %s: only a load of one topic is created with them, not %d", t.Name, cfg.Topics)
		}
		if err := createTopic(ctx, srv.Addr(), cfg.Topic, cfg.Partitions, t.TopicConfigs); err != nil {
			srv.Stop()
			return fail("%v (server log: %s)", err, strings.ReplaceAll(proc.LogTail(logPath, 5), "\n", " | "))
		}
	}
	cfg.Live = e.Live
	res, lerr := loadgen.Run(ctx, cfg)
	stats, serr := srv.Stats(e.clkTck)
	if tiered(t.TopicConfigs) && srv.Running() {
		if run.Tier, err = tierSplit(ctx, srv.Addr(), cfg.Topic, cfg.Partitions); err != nil {
			run.TierError = err.Error()
		}
	}
	if then != nil && srv.Running() {
		then(srv, &run)
	}
	exit, xerr := srv.Stop()
	run.Exit = exit
	if lerr != nil {
		fail("loadgen: %v", lerr)
	}
	if serr != nil {
		fail("reading /proc: %v", serr)
	}
	if xerr != nil {
		fail("stop: %v", xerr)
	}
	if run.Error != "" {
		run.Error += " (server log: " + strings.ReplaceAll(proc.LogTail(logPath, 5), "\n", " | ") + ")"
	}
	if res != nil {
		run.Loadgen = res
		run.RecordsPerSec, run.MBPerSec = res.RecordsPerSec, res.MBPerSec
		run.P50Us, run.P99Us, run.P999Us = res.Latency.P50Us, res.Latency.P99Us, res.Latency.P999Us
		run.RequestP50Us, run.RequestP99Us = res.RequestRoundTrip.P50Us, res.RequestRoundTrip.P99Us
		run.Acked, run.Failed, run.AckedValueBytes = res.Acked, res.Failed, res.Bytes
		run.ElapsedSeconds = res.Elapsed.Seconds()
		switch {
		case res.Interrupted:
			fail("interrupted")
		case res.FlushTimedOut:
			fail("acks still outstanding %v after sending stopped", res.Settings.FlushTimeout)
		case res.Acked == 0:
			fail("nothing acknowledged")
		}
		if res.Failed > 0 {
			fail("%d records failed: %v", res.Failed, res.Errors)
		}
	}
	if serr == nil {
		run.Server = stats
		run.CPUSecondsPerMillion = perMillion(stats.CPUSeconds, run.Acked)
		if run.AckedValueBytes > 0 {
			run.WriteAmplification = float64(stats.WriteBytes) / float64(run.AckedValueBytes)
		}
	}
	return run
}

// pause sleeps e.Pause unless ctx ends first.
func (e *Env) pause(ctx context.Context) {
	if e.Pause <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(e.Pause):
	}
}

// progress prints which point is running and about how long is left.
type progress struct {
	w        io.Writer
	kind     string
	total    int
	done     int
	began    time.Time
	estimate time.Duration // of one point before any has finished
}

func newProgress(w io.Writer, kind string, total int, perPoint time.Duration) *progress {
	return &progress{w: w, kind: kind, total: total, began: time.Now(), estimate: perPoint}
}

// left estimates the time the remaining points take from the ones done so far.
func (p *progress) left() time.Duration {
	per := p.estimate
	if p.done > 0 {
		per = time.Since(p.began) / time.Duration(p.done)
	}
	return per * time.Duration(p.total-p.done)
}

func (p *progress) begin(format string, a ...any) {
	fmt.Fprintf(p.w, "bench %s: [%d/%d] %s (about %s left)\n", p.kind, p.done+1, p.total, fmt.Sprintf(format, a...),
		p.left().Round(time.Second))
}

func (p *progress) end(r *Run) {
	p.done++
	if r.Error != "" {
		fmt.Fprintf(p.w, "bench %s:        FAILED: %s\n", p.kind, r.Error)
		return
	}
	switch {
	case r.Tier != nil:
		fmt.Fprintf(p.w, "bench %s:        tier at the end: %s records only in the remote tier (dropped from local disk), %s on local disk\n",
			p.kind, human.Thousands(float64(r.Tier.RemoteOnlyRecords)), human.Thousands(float64(r.Tier.LocalRecords)))
	case r.TierError != "":
		fmt.Fprintf(p.w, "bench %s:        tier at the end: not listed: %s\n", p.kind, r.TierError)
	}
	fmt.Fprintf(p.w, "bench %s:        %s records/s, %.1f MB/s, p50 %s, p99 %s, request p99 %s, %.2f CPU s/M records, %s peak RSS, %.2f disk B/acked B\n",
		p.kind, human.Thousands(r.RecordsPerSec), r.MBPerSec, human.Micros(float64(r.P50Us)), human.Micros(float64(r.P99Us)),
		human.Micros(float64(r.RequestP99Us)), r.CPUSecondsPerMillion, human.MiB(float64(r.Server.PeakRSSBytes)), r.WriteAmplification)
}

// perPointEstimate is a guess at one point's wall time before any has run: the load, the
// producers' warm-up and flush, server start and stop, the pause.
func perPointEstimate(load Load, pause time.Duration) time.Duration {
	return load.Duration + 4*time.Second + pause
}
