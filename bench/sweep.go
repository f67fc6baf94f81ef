package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"inlet/bench/human"
)

// SweepOptions are the flags of `bench sweep`.
type SweepOptions struct {
	Env
	Load Load
	// Workers are the --workers values of inlet to measure.
	Workers []int
	Repeat  int
	// Storage is inlet's --storage; InletArgs are further inlet flags.
	Storage   string
	InletArgs []string
}

// Sweep measures inlet at each worker count, Repeat times, each run on a fresh server and data
// directory. The order is repeat-major (1 2 4 8 16, 1 2 4 8 16, ...) so that drift of the
// machine over the sweep spreads over every worker count instead of biasing the last ones.
// It writes the result file and returns it; a run that failed is kept in it with its error.
func Sweep(ctx context.Context, o SweepOptions) (*File, error) {
	if len(o.Workers) == 0 || o.Repeat < 1 {
		return nil, errors.New("need at least one worker count and one repeat")
	}
	if err := o.Env.Prepare(); err != nil {
		return nil, err
	}
	f := o.Env.newFile(KindSweep, o.Load.Label()+", "+storageLabel(o.Storage))
	prog := newProgress(o.Env.Stderr, KindSweep, len(o.Workers)*o.Repeat, perPointEstimate(o.Load, o.Env.Pause))
	for rep := 1; rep <= o.Repeat && ctx.Err() == nil; rep++ {
		for _, w := range o.Workers {
			if ctx.Err() != nil {
				break
			}
			prog.begin("workers %d, repeat %d/%d", w, rep, o.Repeat)
			run := o.Env.measure(ctx, o.Env.InletTarget("inlet", o.Load, o.Storage, w, o.InletArgs), o.Load, 0)
			run.Workers, run.Repeat = w, rep
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

func storageLabel(s string) string {
	if s == "" {
		return "default storage"
	}
	return s + " storage"
}

// writeSummaryTable prints f's medians as aligned text.
func writeSummaryTable(w io.Writer, f *File) {
	fmt.Fprintf(w, "%s: %s\n", f.Kind, f.Label)
	header := []string{"target", "workers", "rate", "runs", "records/s", "MB/s", "p50", "p99", "p99.9", "req p99", "CPU s/M rec", "peak RSS", "disk/acked"}
	if f.Baseline != "" {
		header = append(header, "rec/s ratio", "CPU/rec ratio")
	}
	rows := [][]string{header}
	for _, s := range f.Summary {
		workers, rate := "default", "flat out"
		if s.Workers > 0 {
			workers = fmt.Sprint(s.Workers)
		}
		if s.Rate > 0 {
			rate = human.Thousands(s.Rate)
		}
		runs := fmt.Sprint(s.Runs)
		if s.Failed > 0 {
			runs = fmt.Sprintf("%d (%d failed)", s.Runs, s.Failed)
		}
		row := []string{s.Target, workers, rate, runs}
		if s.Runs == s.Failed {
			row = append(row, "–", "–", "–", "–", "–", "–", "–", "–", "–")
		} else {
			row = append(row, human.Thousands(s.RecordsPerSec), human.Fixed(s.MBPerSec, 1), human.Micros(s.P50Us), human.Micros(s.P99Us),
				human.Micros(s.P999Us), human.MicrosOrNone(s.RequestP99Us), human.Fixed(s.CPUSecondsPerMillion, 2), human.MiB(s.PeakRSSBytes), human.Fixed(s.WriteAmplification, 2))
		}
		if f.Baseline != "" {
			row = append(row, human.Ratio(s.RecordsPerSecRatio), human.Ratio(s.CPUPerRecordRatio))
		}
		rows = append(rows, row)
	}
	writeAligned(w, rows)
	writeConsumeTable(w, f)
}

// writeAligned prints rows as columns, the first left-aligned, the others right-aligned.
func writeAligned(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
