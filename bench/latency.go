package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"inlet/bench/human"
	"inlet/bench/proc"
)

// LatencyOptions are the flags of `bench latency`.
type LatencyOptions struct {
	Env
	Load   Load
	Repeat int
	// Rates are offered loads: fractions of Of when Of > 0 or OfFlat, else records/s.
	Rates []float64
	Of    float64
	// OfFlat measures the flat-out rate first (one run, recorded with rate 0) and uses it as
	// Of.
	OfFlat bool
	// Storage, Workers (0: inlet's default) and InletArgs configure inlet.
	Storage   string
	Workers   int
	InletArgs []string
	// Target, when its name is set, is measured instead of inlet (a --peer: its own command
	// line and topic configs, e.g. a topic created with diskless.enable=true).
	Target proc.Target
}

// ParseRates parses a comma-separated list of positive numbers.
func ParseRates(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !finite(v) || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// ParseInts parses a comma-separated list of positive integers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// Latency runs loadgen open loop (--rate) at each offered load against a fresh inlet, Repeat
// times (repeat-major), for the latency-against-offered-load chart. Latency is measured from
// each record's intended send time, so a stalled broker shows as latency.
func Latency(ctx context.Context, o LatencyOptions) (*File, error) {
	if len(o.Rates) == 0 || o.Repeat < 1 {
		return nil, errors.New("need at least one rate and one repeat")
	}
	if o.Of < 0 {
		return nil, errors.New("--of must not be negative")
	}
	if o.Of == 0 && !o.OfFlat && slices.Min(o.Rates) < 1 {
		return nil, errors.New("a rate below 1 record/s; fractions need --of <records/s> or --of flat")
	}
	if err := o.Env.Prepare(); err != nil {
		return nil, err
	}
	label := o.Load.Label() + ", " + storageLabel(o.Storage)
	if o.Workers > 0 {
		label += fmt.Sprintf(", %d workers", o.Workers)
	}
	target := o.Env.InletTarget("inlet", o.Load, o.Storage, o.Workers, o.InletArgs)
	if o.Target.Name != "" {
		target, label = o.Target, o.Load.Label()+", "+o.Target.Name
	}
	f := o.Env.newFile(KindLatency, label)
	points := len(o.Rates) * o.Repeat
	if o.OfFlat {
		points++
	}
	prog := newProgress(o.Env.Stderr, KindLatency, points, perPointEstimate(o.Load, o.Env.Pause))
	of := o.Of
	if o.OfFlat {
		prog.begin("flat out, to find the rate the loads are fractions of")
		run := o.Env.measure(ctx, target, o.Load, 0)
		run.Workers, run.Repeat = o.Workers, 1
		prog.end(&run)
		f.Runs = append(f.Runs, run)
		o.Env.pause(ctx)
		if !run.OK() {
			if err := o.Env.finishRuns(ctx, f, ""); err != nil {
				return f, err
			}
			return f, fmt.Errorf("the flat-out run failed: %s", run.Error)
		}
		of = run.RecordsPerSec
	}
	rates := make([]float64, len(o.Rates))
	for i, r := range o.Rates {
		rates[i] = r
		if of > 0 {
			rates[i] = r * of
		}
	}
	for rep := 1; rep <= o.Repeat && ctx.Err() == nil; rep++ {
		for _, rate := range rates {
			if ctx.Err() != nil {
				break
			}
			prog.begin("offered %s records/s, repeat %d/%d", human.Thousands(rate), rep, o.Repeat)
			run := o.Env.measure(ctx, target, o.Load, rate)
			run.Workers, run.Repeat = o.Workers, rep
			prog.end(&run)
			f.Runs = append(f.Runs, run)
			o.Env.pause(ctx)
		}
	}
	if err := o.Env.finishRuns(ctx, f, ""); err != nil {
		return f, err
	}
	writeSummaryTable(o.Env.Stdout, f)
	return f, nil
}
