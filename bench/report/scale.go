package report

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"inlet/bench"
	"inlet/bench/human"
	"inlet/bench/svg"
)

// Chart file names of the scale section, per dimension, in the charts directory.
func chartScaleThroughput(dim string) string { return "scale-" + dim + "-throughput.svg" }
func chartScaleCPU(dim string) string        { return "scale-" + dim + "-cpu.svg" }

const scaleIntro = "Each curve changes one load parameter from the base point and keeps the others; at every point " +
	"the brokers ran alternately (A B A B …), each run on a fresh broker process and data directory. A built-in " +
	"target's `--default-partitions` and a peer's `{partitions}` follow the point's partition count (1 on the topics " +
	"curve, where loadgen creates the topics `<topic>-0000`… before producing and each producer sends its records to " +
	"the topics in turn). The producers' buffers are cut at points with more producers or larger records so that all " +
	"of them together buffer at most 160 MB of values, what 16 producers of 100-byte records buffer at loadgen's " +
	"default (a run's `max_buffered_records` is in its raw file). loadgen's values repeat one padding, so its batches " +
	"compress far better than real data (disk / acked bytes shows by how much): the compression curve is a best case. Flagged: a broker whose peak RSS went above inlet's " +
	"`--inflight-budget` plus 256 MiB in any run of the point, and any failed record (such a run counts as failed).\n\n"

const scaleNotes = "Server CPU µs / record is the broker's utime+stime per acknowledged record (the same figure as " +
	"CPU s / M records elsewhere); server CPU s is its total over the run; peak RSS is the highest VmHWM of the " +
	"point's runs. " + columnNotes + "\n"

// scaleAxis maps a dimension's points to chart x values: the number itself on a log axis, or
// for compression (names) evenly spaced positions labelled with the names.
func scaleAxis(dim string, points []string) (x func(string) float64, format func(float64) string) {
	if dim != bench.DimCompression {
		return func(p string) float64 {
				v, err := strconv.ParseFloat(p, 64)
				if err != nil {
					return math.NaN()
				}
				return v
			}, func(v float64) string {
				return strconv.FormatFloat(v, 'f', -1, 64)
			}
	}
	return func(p string) float64 {
			i := slices.Index(points, p)
			if i < 0 {
				return math.NaN()
			}
			return math.Exp2(float64(i))
		}, func(v float64) string {
			i := int(math.Round(math.Log2(v)))
			if i < 0 || i >= len(points) {
				return ""
			}
			return points[i]
		}
}

// scaleFiles are the files that measured dim, newest first.
func scaleFiles(files []*bench.File, dim string) []*bench.File {
	var out []*bench.File
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		if f.Scale.Has(dim) && slices.ContainsFunc(f.Runs, func(r bench.Run) bool { return r.Dimension == dim }) {
			out = append(out, f)
		}
	}
	return out
}

func renderScale(b *strings.Builder, files []*bench.File, link, chartLink func(string) string, charts map[string][]byte) {
	b.WriteString(scaleIntro)
	for _, dim := range bench.ScaleDimensions {
		fs := scaleFiles(files, dim)
		if len(fs) == 0 {
			continue
		}
		f := fs[0]
		limit := f.Scale.RSSLimitBytes
		sum := bench.DimensionSummaries(bench.SummarizeScale(f.Runs, f.Baseline), dim)
		fmt.Fprintf(b, "### %s: %s\n\n", bench.ScaleTitles[dim], strings.Join(targetNames(f), ", "))
		provenance(b, f, link)
		fmt.Fprintf(b, "Base: %s (%s). Baseline: `%s`. Flagged: peak RSS above %s, failed records.\n\n",
			f.Scale.Base, f.Label, f.Baseline, human.MiB(float64(limit)))
		table(b, []column{
			{dim, "---:", func(s *bench.Summary) string { return s.Point }},
			colTarget, colRuns, colRecords, colRecRatio, colMB,
			{"server CPU µs / record", "---:", measured(func(s *bench.Summary) string { return human.Fixed(s.CPUSecondsPerMillion, 2) })},
			colCPURatio,
			{"server CPU s", "---:", measured(func(s *bench.Summary) string { return human.Fixed(s.CPUSeconds, 1) })},
			{"peak RSS (max)", "---:", func(s *bench.Summary) string {
				if s.MaxPeakRSSBytes == 0 {
					return "–"
				}
				return human.MiB(float64(s.MaxPeakRSSBytes))
			}},
			{"flags", "---", func(s *bench.Summary) string {
				flags := bench.ScaleFlags(s, limit)
				if len(flags) == 0 {
					return ""
				}
				return "**" + mdEscape(strings.Join(flags, "; ")) + "**"
			}},
		}, sum)
		var failures []string
		for _, r := range f.Runs {
			if r.Dimension == dim && r.Error != "" {
				failures = append(failures, fmt.Sprintf("- %s %s, `%s`, repeat %d: %s", dim, r.Point, r.Target, r.Repeat,
					mdEscape(truncate(r.Error, 300))))
			}
		}
		if len(failures) > 0 {
			fmt.Fprintf(b, "Failed runs:\n\n%s\n\n", strings.Join(failures, "\n"))
		}
		for _, t := range f.Targets {
			fmt.Fprintf(b, "- `%s`: %s\n", t.Name, code(human.CommandLine(t.Argv)))
		}
		if len(f.Targets) > 0 {
			b.WriteString("\n")
		}
		earlier(b, fs[1:], link)

		var points []string
		for _, d := range f.Scale.Dimensions {
			if d.Name == dim {
				points = d.Points
			}
		}
		x, xf := scaleAxis(dim, points)
		sub := f.Label + " · " + f.Started.UTC().Format("2006-01-02") + " · " + filepath.Base(f.Name)
		thr := svg.LineChart{Title: "Acknowledged records/s: " + strings.ToLower(bench.ScaleTitles[dim]), Subtitle: sub,
			XLabel: bench.ScaleTitles[dim], YLabel: "records/s (median)", LogX: true, XFormat: xf}
		cpu := svg.LineChart{Title: "Server CPU µs per record: " + strings.ToLower(bench.ScaleTitles[dim]), Subtitle: sub,
			XLabel: bench.ScaleTitles[dim], YLabel: "CPU µs / record (median)", LogX: true, XFormat: xf,
			YFormat: func(v float64) string { return svg.TrimFloat(v) }}
		for _, name := range targetNames(f) {
			ts, cs := svg.Series{Name: name}, svg.Series{Name: name}
			for _, m := range sum {
				if m.Target == name && m.Runs > m.Failed {
					ts.Points = append(ts.Points, svg.Point{X: x(m.Point), Y: m.RecordsPerSec})
					cs.Points = append(cs.Points, svg.Point{X: x(m.Point), Y: m.CPUSecondsPerMillion})
				}
			}
			for _, r := range f.Runs {
				if r.Dimension == dim && r.Target == name && r.OK() {
					ts.Raw = append(ts.Raw, svg.Point{X: x(r.Point), Y: r.RecordsPerSec})
					cs.Raw = append(cs.Raw, svg.Point{X: x(r.Point), Y: r.CPUSecondsPerMillion})
				}
			}
			thr.Series, cpu.Series = append(thr.Series, ts), append(cpu.Series, cs)
		}
		tn, cn := chartScaleThroughput(dim), chartScaleCPU(dim)
		charts[tn], charts[cn] = thr.SVG(), cpu.SVG()
		fmt.Fprintf(b, "![%s](%s) ![%s](%s)\n\n", thr.Title, chartLink(tn), cpu.Title, chartLink(cn))
	}
	b.WriteString(scaleNotes)
}

// truncate shortens s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
