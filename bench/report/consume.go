package report

import (
	"fmt"
	"path/filepath"
	"strings"

	"inlet/bench"
	"inlet/bench/human"
	"inlet/bench/svg"
)

// sectionConsume is the BENCHMARKS.md section of the consume phases of compare files; it is
// not a result kind of its own.
const sectionConsume = "consume"

// Chart file names of the consume section, in the charts directory.
const (
	chartConsumeCatchup = "consume-catchup.svg"
	chartConsumeCPU     = "consume-catchup-cpu.svg"
	chartConsumeTail    = "consume-tail-p99.svg"
)

// consumeFiles are the compare files with a consume phase.
func consumeFiles(files []*bench.File) []*bench.File {
	var out []*bench.File
	for _, f := range files {
		if f.Consume != nil {
			out = append(out, f)
		}
	}
	return out
}

// consumeCell wraps a cell that needs a measured consume summary.
func consumeCell(f func(c *bench.ConsumeSummary) string) func(s *bench.Summary) string {
	return func(s *bench.Summary) string {
		if !s.Consume.Measured() {
			return "–"
		}
		return f(s.Consume)
	}
}

var consumeColumns = []column{
	colTarget,
	{"runs", "---:", func(s *bench.Summary) string {
		if s.Consume == nil {
			return "–"
		}
		return s.Consume.RunsText()
	}},
	{"catch-up records/s", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Thousands(c.CatchupRecordsPerSec) })},
	{"vs baseline", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Ratio(c.CatchupRecordsPerSecRatio) })},
	{"catch-up MB/s", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Fixed(c.CatchupMBPerSec, 1) })},
	{"records / server CPU-s", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Thousands(c.CatchupRecordsPerCPUSecond) })},
	{"vs baseline", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Ratio(c.CatchupPerCPURatio) })},
	{"tail records/s", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Thousands(c.TailRecordsPerSec) })},
	{"tail server CPU", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Fixed(c.TailServerCPUCores, 2) + " cores" })},
	{"vs baseline", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Ratio(c.TailCPURatio) })},
	{"e2e p50", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Micros(c.TailP50Us) })},
	{"e2e p99", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Micros(c.TailP99Us) })},
	{"e2e p99.9", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Micros(c.TailP999Us) })},
	{"e2e max", "---:", consumeCell(func(c *bench.ConsumeSummary) string { return human.Micros(c.TailMaxUs) })},
}

const consumeNotes = "Each run's broker is the one the produce figures above were measured on: after the produce run " +
	"(and its /proc reading) loadgen fills a topic of its own flat out with the same load but the consume phase's own " +
	"partitioner, linger, batch size and buffer (its shape: `default` keeps the produce run's, `pinned` has producer i write " +
	"only partition i), every record acknowledged. Catch-up: the consumers (kgo clients, partitions assigned directly, no group) read every partition " +
	"from its start offset to the high watermark listed after the fill; records/s run from just before the clients are " +
	"created to the last record, and records / server CPU-s divide the records by the broker's utime+stime over the same " +
	"window (read in 1/CLK_TCK steps, 10 ms: use a fill of millions of records). The fill was just written: a broker that " +
	"writes through the page cache may serve the whole catch-up from memory, while Inlet writes its segments with " +
	"O_DIRECT and reads all but the last --fetch-cache bytes (64 MiB) from the disk. Tail: producers with the fill's settings send at the fixed rate (open loop) while the same consumers follow the end; each value " +
	"carries its intended send time and the end-to-end latency runs from it to the PollFetches return that delivered the " +
	"record, so it includes linger, the produce round trip, the broker's fetch wake-up and the fetch. Tail server CPU is " +
	"the broker's CPU seconds per wall second over the tail, from the first send to the last record received; every " +
	"acknowledged record must be received once and none may fail, or the run counts as failed. The consumers and " +
	"producers share the machine with the broker."

// consumeHeading names a consume configuration: its load, shape and targets.
func consumeHeading(f *bench.File) string {
	shape := ""
	if f.Consume.Shape != "" {
		shape = ", consume shape " + f.Consume.Shape
	}
	return fmt.Sprintf("%s%s: %s", f.Label, shape, strings.Join(targetNames(f), ", "))
}

func renderConsume(b *strings.Builder, files []*bench.File, link, chartLink func(string) string, charts map[string][]byte) {
	gs, older := shown(chartedFirst(groupsBy(files, func(f *bench.File) string {
		return f.Label + "\x00" + f.Consume.Label() + "\x00" + strings.Join(targetNames(f), ",")
	})))
	for gi, g := range gs {
		f := g[0]
		sum := bench.Summarize(f.Runs, f.Baseline)
		fmt.Fprintf(b, "### %s\n\n", consumeHeading(f))
		provenance(b, f, link)
		fmt.Fprintf(b, "Consume phase: %s. Baseline: `%s`.\n\n", f.Consume.Label(), f.Baseline)
		table(b, consumeColumns, sum)
		var failures []string
		for _, r := range f.Runs {
			if c := r.Consume; c != nil && c.Skipped == "" && c.Error != "" {
				failures = append(failures, fmt.Sprintf("- `%s`, repeat %d: %s", r.Target, r.Repeat, mdEscape(c.Error)))
			}
		}
		if len(failures) > 0 {
			fmt.Fprintf(b, "Failed consume phases:\n\n%s\n\n", strings.Join(failures, "\n"))
		}
		earlier(b, g[1:], link)
		if gi != 0 {
			continue
		}
		sub := f.Label + " · " + f.Started.UTC().Format("2006-01-02") + " · " + filepath.Base(f.Name)
		thr := svg.BarChart{Title: "Catch-up read records/s by broker", Subtitle: sub, YLabel: "records/s (median)"}
		eff := svg.BarChart{Title: "Catch-up records per server CPU-second", Subtitle: sub, YLabel: "records / CPU-s (median)"}
		lat := svg.BarChart{Title: fmt.Sprintf("Tail end-to-end p99 at %s records/s", human.Thousands(f.Consume.TailRate)), Subtitle: sub,
			YLabel: "e2e p99 (ms, median)", YFormat: func(v float64) string { return svg.TrimFloat(v) }}
		for _, m := range sum {
			if m.Consume == nil || m.Consume.Skipped != "" {
				continue
			}
			tb, eb, lb := svg.Bar{Label: m.Target}, svg.Bar{Label: m.Target}, svg.Bar{Label: m.Target}
			if m.Consume.Measured() {
				tb.Value, eb.Value, lb.Value = m.Consume.CatchupRecordsPerSec, m.Consume.CatchupRecordsPerCPUSecond, m.Consume.TailP99Us/1e3
			}
			for _, r := range f.Runs {
				if r.Target == m.Target && r.Consume.OK() {
					tb.Raw = append(tb.Raw, r.Consume.Catchup.RecordsPerSec)
					eb.Raw = append(eb.Raw, r.Consume.Catchup.RecordsPerCPUSecond)
					lb.Raw = append(lb.Raw, float64(r.Consume.Tail.E2E.P99Us)/1e3)
				}
			}
			thr.Bars, eff.Bars, lat.Bars = append(thr.Bars, tb), append(eff.Bars, eb), append(lat.Bars, lb)
		}
		charts[chartConsumeCatchup], charts[chartConsumeCPU], charts[chartConsumeTail] = thr.SVG(), eff.SVG(), lat.SVG()
		fmt.Fprintf(b, "![%s](%s) ![%s](%s) ![%s](%s)\n\n", thr.Title, chartLink(chartConsumeCatchup), eff.Title,
			chartLink(chartConsumeCPU), lat.Title, chartLink(chartConsumeTail))
	}
	olderConfigurations(b, older, consumeHeading, link)
	b.WriteString(consumeNotes + " `inlet-discard` stores nothing and is not read.\n")
}
