// Package rebalance is `bench rebalance`: the time a consumer group takes to hand partitions
// to a member that joins it, for the classic protocol (cooperative-sticky) and KIP-848's
// consumer protocol, on each broker, each run on a fresh broker process.
//
// A run (Measure, run.go): a topic of 16 partitions, a producer writing a modest bounded rate
// into every partition, 4 franz-go members that settle, then a 5th member; the figure is the
// time from the 5th member's start until every partition has delivered a record produced
// after that start to the member that owns it once the group has settled again (Tracker,
// tracker.go, defines it exactly). The runs go broker × protocol in turn, repeated, and the
// summary is the median and the worst per cell. Everything is on loopback and bounded in
// time; the output is text, meant to be kept as results/rebalance-<date>.txt.
package rebalance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"inlet/bench"
	"inlet/bench/proc"
)

// Options are the flags of `bench rebalance`.
type Options struct {
	bench.Env
	Shape Shape
	// Targets are built-in broker names (bench.TargetInlet, bench.TargetKfake); Protocols
	// of Protocols.
	Targets   []string
	Protocols []string
	Repeat    int
	// InletArgs are extra inlet flags; KfakeBin the kfake-broker binary (empty: build it).
	InletArgs []string
	KfakeBin  string
	// Seed of the join delays (0: from the clock); printed.
	Seed int64
	// Timeline prints each run's assignments, revocations and first deliveries after the
	// join.
	Timeline bool
}

// DefaultShape is the group and load of the figures in BENCHMARKS.md.
var DefaultShape = Shape{Partitions: 16, Members: 4, Rate: 50, Steady: 2 * time.Second, Jitter: 5 * time.Second,
	StartTimeout: 60 * time.Second, JoinTimeout: 60 * time.Second}

// Result is one run.
type Result struct {
	Target, Protocol string
	Repeat           int
	Outcome
}

// Run measures every target × protocol o.Repeat times, interleaved (A1 A2 B1 B2, A1 A2 B1
// B2, ...), prints a line per run (and its timeline with o.Timeline) on o.Stdout as it goes,
// then the summary table; it returns the runs.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Repeat < 1 {
		return nil, errors.New("--repeat must be at least 1")
	}
	for _, p := range o.Protocols {
		if !slices.Contains(Protocols, p) {
			return nil, fmt.Errorf("unknown protocol %q (known: %s)", p, strings.Join(Protocols, ", "))
		}
	}
	if err := o.Env.Prepare(); err != nil {
		return nil, err
	}
	targets, err := o.targets()
	if err != nil {
		return nil, err
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5eed))
	w := o.Env.Stdout
	m := proc.DescribeMachine(o.Env.Root)
	fmt.Fprintf(w, "bench rebalance: %s\n", o.Env.Command)
	fmt.Fprintf(w, "commit %s (work tree dirty: %t), %s, %d cores, %s, %s, %s\n", m.GitCommit, m.GitDirty, m.CPUModel,
		m.Cores, m.Kernel, m.GoVersion, m.Date.Format(time.RFC3339))
	s := o.Shape
	fmt.Fprintf(w, "shape: %d partitions, %d members then one more, %g records/s into each partition, join %v + U[0, %v) after the first members settled, seed %d\n",
		s.Partitions, s.Members, s.Rate, s.Steady, s.Jitter, o.Seed)
	for _, t := range targets {
		fmt.Fprintf(w, "target %s: %s\n", t.Name, strings.Join(bench.DisplayArgv(t.Argv, o.Env.Root), " "))
	}
	fmt.Fprintln(w)

	var results []Result
	n := 0
	for rep := 1; rep <= o.Repeat && ctx.Err() == nil; rep++ {
		for _, t := range targets {
			for _, p := range o.Protocols {
				if ctx.Err() != nil {
					break
				}
				n++
				fmt.Fprintf(o.Env.Stderr, "bench rebalance: [%d/%d] %s %s, repeat %d\n", n, o.Repeat*len(targets)*len(o.Protocols), t.Name, p, rep)
				r := Result{Target: t.Name, Protocol: p, Repeat: rep, Outcome: o.one(ctx, t, p, rep, rng)}
				results = append(results, r)
				writeRun(w, r, o.Timeline)
				sleep(ctx, o.Env.Pause)
			}
		}
	}
	fmt.Fprintln(w)
	WriteSummary(w, results, o.Targets, o.Protocols)
	if ctx.Err() != nil {
		return results, fmt.Errorf("interrupted after %d runs", len(results))
	}
	return results, nil
}

// one is one run on a fresh broker process and data directory.
func (o *Options) one(ctx context.Context, t proc.Target, protocol string, rep int, rng *rand.Rand) Outcome {
	base, err := os.MkdirTemp(o.Env.TmpDir, "inlet-rebalance-"+t.Name+"-")
	if err != nil {
		return Outcome{Seconds: nanf(), Err: err}
	}
	defer os.RemoveAll(base)
	dir, logPath := filepath.Join(base, "data"), filepath.Join(base, "server.log")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return Outcome{Seconds: nanf(), Err: err}
	}
	srv, err := proc.Start(t, dir, logPath)
	if err != nil {
		return Outcome{Seconds: nanf(), Err: err}
	}
	out := Measure(ctx, srv.Addr(), "rebalance", fmt.Sprintf("rebalance-%s-%d", protocol, rep), protocol, o.Shape, rng)
	if _, err := srv.Stop(); err != nil && out.Err == nil {
		out.Err = fmt.Errorf("stop: %w", err)
	}
	if out.Err != nil {
		out.Err = fmt.Errorf("%w (server log: %s)", out.Err, strings.ReplaceAll(proc.LogTail(logPath, 5), "\n", " | "))
	}
	return out
}

// targets are the commands of the built-in targets, on a fresh data directory and port each.
func (o *Options) targets() ([]proc.Target, error) {
	var ts []proc.Target
	for _, name := range o.Targets {
		switch name {
		case bench.TargetInlet:
			ts = append(ts, o.Env.InletTarget(name, bench.Load{Partitions: int(o.Shape.Partitions)}, "", 0, o.InletArgs))
		case bench.TargetKfake:
			if o.KfakeBin == "" {
				bin, err := o.Env.Build("kfake-broker", "inlet/cmd/kfake-broker")
				if err != nil {
					return nil, err
				}
				o.KfakeBin = bin
			}
			ts = append(ts, proc.Target{Name: name, Argv: []string{o.KfakeBin, "--listen", "127.0.0.1:{port}",
				"--default-partitions", fmt.Sprint(o.Shape.Partitions)}})
		default:
			return nil, fmt.Errorf("unknown target %q (rebalance knows %s and %s)", name, bench.TargetInlet, bench.TargetKfake)
		}
	}
	if len(ts) == 0 {
		return nil, errors.New("no targets")
	}
	return ts, nil
}

// writeRun prints one run: its figure, the group type, the join delay, and with timeline
// every event after the join.
func writeRun(w io.Writer, r Result, timeline bool) {
	fig := "FAILED"
	if !math.IsNaN(r.Seconds) {
		fig = fmt.Sprintf("%.3f s", r.Seconds)
	}
	fmt.Fprintf(w, "run %s %s repeat %d: %s (group type %s; first members settled in %.3f s; join %.3f s after; %d records produced)\n",
		r.Target, r.Protocol, r.Repeat, fig, r.GroupType, r.StartSeconds, r.Delay.Seconds(), r.Produced)
	if r.Err != nil {
		fmt.Fprintf(w, "  error: %v\n", r.Err)
	}
	if timeline {
		for _, e := range r.Events {
			fmt.Fprintf(w, "  %s\n", e.String(0))
		}
	}
}

// Cell is one target × protocol's summary.
type Cell struct {
	Median, Worst float64 // seconds over the settled runs
	Runs, Failed  int
}

// Summarize computes each cell's median and worst over its runs that settled.
func Summarize(results []Result) map[[2]string]Cell {
	xs := map[[2]string][]float64{}
	cells := map[[2]string]Cell{}
	for _, r := range results {
		k := [2]string{r.Target, r.Protocol}
		c := cells[k]
		c.Runs++
		if math.IsNaN(r.Seconds) || r.Err != nil {
			c.Failed++
		} else {
			xs[k] = append(xs[k], r.Seconds)
		}
		cells[k] = c
	}
	for k, c := range cells {
		if len(xs[k]) > 0 {
			c.Median, c.Worst = median(xs[k]), slices.Max(xs[k])
		} else {
			c.Median, c.Worst = nanf(), nanf()
		}
		cells[k] = c
	}
	return cells
}

// WriteSummary prints the table: a row per target and protocol, median and worst seconds.
func WriteSummary(w io.Writer, results []Result, targets, protocols []string) {
	cells := Summarize(results)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "broker\tprotocol\tmedian s\tworst s\truns\tfailed")
	for _, t := range targets {
		for _, p := range protocols {
			c, ok := cells[[2]string{t, p}]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%d\t%d\n", t, p, c.Median, c.Worst, c.Runs, c.Failed)
		}
	}
	tw.Flush()
}

// median of a non-empty slice (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func nanf() float64 { return math.NaN() }
