// Package report is `bench report`: it renders BENCHMARKS.md and its SVG charts from the
// result files the harness (package bench) wrote.
//
// Write reads every results/*.json (bench.ReadFiles), groups the files of each kind by the
// load they measured, recomputes the medians from their runs (bench.Summarize and the scale
// and consume summaries), renders one markdown section per kind between its markers
// (<!-- bench:<kind>:begin --> ... end), keeping all text outside the markers, and draws the
// charts through bench/svg. It reads and writes files only; one goroutine, no locks.
//
// Files: report.go (Write, sections, the sweep, compare, latency and chaos sections),
// scale.go (the scale section), consume.go (the consume section).
package report

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"inlet/bench"
	"inlet/bench/human"
	"inlet/bench/svg"
)

// Options are the flags of `bench report`.
type Options struct {
	// Root is the repository root (found from the working directory when empty).
	Root string
	// ResultsDir is read for results/*.json; empty: Root/results.
	ResultsDir string
	// Out is the markdown file whose marked sections are rewritten; empty: Root/BENCHMARKS.md.
	Out string
	// ChartsDir receives the SVG charts; empty: ResultsDir.
	ChartsDir string
	Stderr    io.Writer
}

// section is one generated part of BENCHMARKS.md, between
// <!-- bench:<kind>:begin --> and <!-- bench:<kind>:end -->.
type section struct {
	kind    string
	heading string // used only when the markers are not in the document yet
	body    string
}

// sectionOrder and headings of the generated sections.
var sectionHeadings = []struct{ kind, heading string }{
	{bench.KindSweep, "Throughput against event-loop workers"},
	{bench.KindLatency, "Ack latency against offered load"},
	{bench.KindCompare, "Inlet against other brokers"},
	{sectionConsume, "Reading back: catch-up and tail"},
	{bench.KindScale, "Scale curves"},
	{bench.KindChaos, "Chaos: kill -9 under load"},
}

const reportHeader = `# Benchmarks

Every figure here was measured by ` + "`bin/bench`" + ` (` + "`make bench`" + `, ` + "`make chaos`" + `) and names
the exact command, the machine, the commit and the raw result files under ` + "`results/`" + `. The
sections between ` + "`<!-- bench:... -->`" + ` markers are rewritten by ` + "`bin/bench report`" + `; text
outside them is kept.
`

func beginMarker(kind string) string { return "<!-- bench:" + kind + ":begin -->" }
func endMarker(kind string) string   { return "<!-- bench:" + kind + ":end -->" }

// applySections replaces the text between each section's markers in doc, keeping everything
// outside them; a section whose markers are missing (or out of order) is appended with its
// heading. An empty doc gets the report header first.
func applySections(doc string, sections []section) string {
	if strings.TrimSpace(doc) == "" {
		doc = reportHeader
	}
	for _, s := range sections {
		begin, end := beginMarker(s.kind), endMarker(s.kind)
		i := strings.Index(doc, begin)
		j := -1
		if i >= 0 {
			if k := strings.Index(doc[i:], end); k >= 0 {
				j = i + k
			}
		}
		body := strings.TrimRight(s.body, "\n")
		if i >= 0 && j >= 0 {
			doc = doc[:i+len(begin)] + "\n" + body + "\n" + doc[j:]
			continue
		}
		if !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		doc += "\n## " + s.heading + "\n\n" + begin + "\n" + body + "\n" + end + "\n"
	}
	return doc
}

// Write reads every result file and rewrites the generated sections of BENCHMARKS.md and the
// charts. It returns the files written.
func Write(o Options) ([]string, error) {
	if o.Root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		if o.Root, err = bench.FindRoot(wd); err != nil {
			return nil, err
		}
	}
	if o.ResultsDir == "" {
		o.ResultsDir = filepath.Join(o.Root, "results")
	}
	if o.Out == "" {
		o.Out = filepath.Join(o.Root, "BENCHMARKS.md")
	}
	if o.ChartsDir == "" {
		o.ChartsDir = o.ResultsDir
	}
	files, err := bench.ReadFiles(o.Root, o.ResultsDir)
	if err != nil {
		return nil, err
	}
	outDir, err := filepath.Abs(filepath.Dir(o.Out))
	if err != nil {
		return nil, err
	}
	// link turns a path relative to the root into one relative to the markdown file.
	link := func(name string) string {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(o.Root, p)
		}
		if r, err := filepath.Rel(outDir, p); err == nil {
			return filepath.ToSlash(r)
		}
		return filepath.ToSlash(p)
	}
	chartsRel := bench.RelPath(o.Root, o.ChartsDir)
	sections, charts := renderReport(files, chartsRel, link)

	var written []string
	if len(charts) > 0 {
		if err := os.MkdirAll(o.ChartsDir, 0o755); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(charts)) {
		p := filepath.Join(o.ChartsDir, name)
		if err := os.WriteFile(p, charts[name], 0o644); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	old, err := os.ReadFile(o.Out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return written, err
	}
	doc := applySections(string(old), sections)
	if err := os.WriteFile(o.Out, []byte(doc), 0o644); err != nil {
		return written, err
	}
	return append(written, o.Out), nil
}

// Chart file names, in the charts directory.
const (
	chartSweep      = "sweep-throughput.svg"
	chartLatency    = "latency-p99.svg"
	chartCompare    = "compare-throughput.svg"
	chartCompareCPU = "compare-cpu.svg"
)

// renderReport renders the sections and charts from files (oldest first). chartsDir is the
// charts' directory relative to the root; link maps a root-relative path to a link from the
// markdown file.
func renderReport(files []*bench.File, chartsDir string, link func(string) string) ([]section, map[string][]byte) {
	byKind := map[string][]*bench.File{}
	for _, f := range files {
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	charts := map[string][]byte{}
	chartLink := func(name string) string { return link(filepath.ToSlash(filepath.Join(chartsDir, name))) }
	var out []section
	for _, h := range sectionHeadings {
		var b strings.Builder
		fs := byKind[h.kind]
		if h.kind == sectionConsume {
			fs = consumeFiles(byKind[bench.KindCompare])
		}
		if len(fs) == 0 {
			fmt.Fprintf(&b, "_No %s results yet: %s._\n", h.kind, howToRun(h.kind))
			out = append(out, section{h.kind, h.heading, b.String()})
			continue
		}
		switch h.kind {
		case bench.KindSweep:
			renderSweep(&b, fs, link, chartLink, charts)
		case bench.KindLatency:
			renderLatency(&b, fs, link, chartLink, charts)
		case bench.KindCompare:
			renderCompare(&b, fs, link, chartLink, charts)
		case bench.KindChaos:
			renderChaos(&b, fs, link)
		case sectionConsume:
			renderConsume(&b, fs, link, chartLink, charts)
		case bench.KindScale:
			renderScale(&b, fs, link, chartLink, charts)
		}
		out = append(out, section{h.kind, h.heading, b.String()})
	}
	return out, charts
}

func howToRun(kind string) string {
	switch kind {
	case bench.KindSweep, bench.KindCompare:
		return "run `make bench`"
	case bench.KindChaos:
		return "run `make chaos`"
	case sectionConsume:
		return "run `bin/bench compare --consume`"
	case bench.KindScale:
		return "run `bin/bench scale --peer ...`"
	}
	return "run `bin/bench " + kind + "`"
}

// groups splits files (oldest first) by label, newest group first, each group newest first.
func groups(files []*bench.File) [][]*bench.File {
	// The same load against different sets of brokers is a different comparison: an
	// inlet-only run must not hide the newest run against the peers.
	return groupsBy(files, func(f *bench.File) string { return f.Label + "\x00" + strings.Join(targetNames(f), ",") })
}

// groupsBy is groups with the files of a group named by key.
func groupsBy(files []*bench.File, key func(*bench.File) string) [][]*bench.File {
	idx := map[string]int{}
	var out [][]*bench.File
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		key := key(f)
		g, ok := idx[key]
		if !ok {
			g = len(out)
			idx[key] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], f)
	}
	return out
}

func targetNames(f *bench.File) []string {
	names := make([]string, len(f.Targets))
	for i, t := range f.Targets {
		names[i] = t.Name
	}
	return names
}

// provenance writes the command, date, commit, machine and raw files of f.
func provenance(b *strings.Builder, f *bench.File, link func(string) string) {
	m := f.Machine
	csvName := filepath.ToSlash(filepath.Join(filepath.Dir(f.Name), f.Kind+".csv"))
	dirty := ""
	if m.GitDirty {
		dirty = " (dirty work tree)"
	}
	fmt.Fprintf(b, "%s\n\n", code(f.Command))
	fmt.Fprintf(b, "%s · commit `%s`%s · %s, %d cores, %.1f GiB, Linux %s, %s · raw: [%s](%s), [%s](%s)\n",
		f.Started.UTC().Format("2006-01-02 15:04 UTC"), human.ShortCommit(m.GitCommit), dirty, m.CPUModel, m.Cores,
		float64(m.MemoryBytes)/(1<<30), m.Kernel, m.GoVersion, link(f.Name), link(f.Name),
		link(csvName), link(csvName))
	if f.Interrupted {
		b.WriteString("\n> Interrupted before every point was measured.\n")
	}
	for _, n := range f.Notes {
		fmt.Fprintf(b, "\n> Note: %s\n", n)
	}
	b.WriteString("\n")
}

// shownGroups is how many configurations of a section are rendered in full, newest first (the
// charted one of compare and consume counts among them). Older configurations are listed by a
// line each that links their newest file: their figures stay in results/, and the page shows
// what was measured last rather than every load ever measured.
const shownGroups = 3

// listedOlder bounds the older configurations listed by a line each; the rest are counted.
const listedOlder = 6

// shown splits a section's groups (in the order they are rendered) into those rendered in full
// and the older rest.
func shown(gs [][]*bench.File) (full, older [][]*bench.File) {
	if len(gs) <= shownGroups {
		return gs, nil
	}
	return gs[:shownGroups], gs[shownGroups:]
}

// olderConfigurations lists the groups not rendered in full: heading, newest file, date, commit.
func olderConfigurations(b *strings.Builder, gs [][]*bench.File, heading func(*bench.File) string, link func(string) string) {
	if len(gs) == 0 {
		return
	}
	b.WriteString("Older configurations (newest run of each; `bin/bench report` renders the newest " +
		fmt.Sprint(shownGroups) + " in full):\n\n")
	for i, g := range gs {
		if i == listedOlder {
			fmt.Fprintf(b, "- and %d older configurations, each under `results/` with its command in the file\n", len(gs)-i)
			break
		}
		f := g[0]
		fmt.Fprintf(b, "- %s: [%s](%s) (%s, `%s`", mdEscape(heading(f)), filepath.Base(f.Name), link(f.Name),
			f.Started.UTC().Format("2006-01-02"), human.ShortCommit(f.Machine.GitCommit))
		if n := len(g) - 1; n > 0 {
			fmt.Fprintf(b, "; %d earlier", n)
		}
		b.WriteString(")\n")
	}
	b.WriteString("\n")
}

func earlier(b *strings.Builder, fs []*bench.File, link func(string) string) {
	if len(fs) == 0 {
		return
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("[%s](%s) (%s, `%s`)", filepath.Base(f.Name), link(f.Name),
			f.Started.UTC().Format("2006-01-02"), human.ShortCommit(f.Machine.GitCommit))
	}
	fmt.Fprintf(b, "Earlier runs of this configuration: %s.\n\n", strings.Join(parts, ", "))
}

// code renders s as inline code, with a longer fence if s contains backticks.
func code(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

const columnNotes = "Medians over the repeats (failed runs are counted, not used). Records/s and MB/s " +
	"(10^6 bytes of record values) are acknowledged records over the run, first send to last ack. " +
	"Ack latency is per record, from the Produce call to the acknowledgement (flat out it includes " +
	"time queued in the producer's buffer). Server CPU is utime+stime of the broker process " +
	"(/proc/PID/stat, read just before SIGTERM) per million acknowledged records; peak RSS is its " +
	"VmHWM. Disk/acked is write_bytes of /proc/PID/io divided by the acknowledged value bytes " +
	"(acked records × record size; keys are nil, Kafka batch and record framing is not counted)."

type column struct {
	head, align string
	cell        func(s *bench.Summary) string
}

func table(b *strings.Builder, cols []column, rows []bench.Summary) {
	for _, c := range cols {
		b.WriteString("| " + c.head + " ")
	}
	b.WriteString("|\n")
	for _, c := range cols {
		b.WriteString("|" + c.align)
	}
	b.WriteString("|\n")
	for i := range rows {
		s := &rows[i]
		for _, c := range cols {
			v := "–"
			if c.cell != nil {
				v = c.cell(s)
			}
			b.WriteString("| " + v + " ")
		}
		b.WriteString("|\n")
	}
	b.WriteString("\n")
}

// measured wraps a cell that needs at least one successful run.
func measured(f func(s *bench.Summary) string) func(s *bench.Summary) string {
	return func(s *bench.Summary) string {
		if s.Runs == s.Failed {
			return "–"
		}
		return f(s)
	}
}

func runsCell(s *bench.Summary) string { return human.Runs(s.Runs, s.Failed) }

var (
	colRuns     = column{"runs", "---:", runsCell}
	colRecords  = column{"records/s", "---:", measured(func(s *bench.Summary) string { return human.Thousands(s.RecordsPerSec) })}
	colMB       = column{"MB/s", "---:", measured(func(s *bench.Summary) string { return human.Fixed(s.MBPerSec, 1) })}
	colP50      = column{"ack p50", "---:", measured(func(s *bench.Summary) string { return human.Micros(s.P50Us) })}
	colP99      = column{"ack p99", "---:", measured(func(s *bench.Summary) string { return human.Micros(s.P99Us) })}
	colP999     = column{"ack p99.9", "---:", measured(func(s *bench.Summary) string { return human.Micros(s.P999Us) })}
	colReqP50   = column{"request p50", "---:", measured(func(s *bench.Summary) string { return human.MicrosOrNone(s.RequestP50Us) })}
	colReqP99   = column{"request p99", "---:", measured(func(s *bench.Summary) string { return human.MicrosOrNone(s.RequestP99Us) })}
	colCPU      = column{"server CPU s / M records", "---:", measured(func(s *bench.Summary) string { return human.Fixed(s.CPUSecondsPerMillion, 2) })}
	colRSS      = column{"server peak RSS", "---:", measured(func(s *bench.Summary) string { return human.MiB(s.PeakRSSBytes) })}
	colDisk     = column{"disk / acked bytes", "---:", measured(func(s *bench.Summary) string { return human.Fixed(s.WriteAmplification, 2) })}
	colWorkers  = column{"workers", "---:", func(s *bench.Summary) string { return workersText(s.Workers) }}
	colTarget   = column{"target", "---", func(s *bench.Summary) string { return s.Target }}
	colRecRatio = column{"records/s vs baseline", "---:", func(s *bench.Summary) string { return human.Ratio(s.RecordsPerSecRatio) }}
	colCPURatio = column{"CPU / record vs baseline", "---:", func(s *bench.Summary) string { return human.Ratio(s.CPUPerRecordRatio) }}
	colOffered  = column{"offered records/s", "---:", func(s *bench.Summary) string {
		if s.Rate == 0 {
			return "flat out"
		}
		return human.Thousands(s.Rate)
	}}
)

func workersText(w int) string {
	if w == 0 {
		return "default"
	}
	return fmt.Sprint(w)
}

func renderSweep(b *strings.Builder, files []*bench.File, link, chartLink func(string) string, charts map[string][]byte) {
	chart := svg.LineChart{Title: "Inlet throughput against gnet event-loop workers", Subtitle: "newest sweep of each configuration; dots are single runs", XLabel: "inlet --workers",
		YLabel: "acknowledged records/s (median)", LogX: true, XFormat: func(v float64) string { return svg.TrimFloat(v) }}
	gs, older := shown(groups(files))
	for _, g := range gs {
		f := g[0]
		sum := bench.Summarize(f.Runs, "")
		fmt.Fprintf(b, "### %s\n\n", f.Label)
		provenance(b, f, link)
		table(b, []column{colWorkers, colRuns, colRecords, colMB, colP50, colP99, colP999, colCPU, colRSS, colDisk}, sum)
		earlier(b, g[1:], link)
		s := svg.Series{Name: f.Label}
		for _, m := range sum {
			if m.Runs > m.Failed && m.Workers > 0 {
				s.Points = append(s.Points, svg.Point{X: float64(m.Workers), Y: m.RecordsPerSec})
			}
		}
		for _, r := range f.Runs {
			if r.OK() && r.Workers > 0 {
				s.Raw = append(s.Raw, svg.Point{X: float64(r.Workers), Y: r.RecordsPerSec})
			}
		}
		slices.SortFunc(s.Points, func(a, b svg.Point) int { return cmpFloat(a.X, b.X) })
		chart.Series = append(chart.Series, s)
	}
	olderConfigurations(b, older, func(f *bench.File) string { return f.Label }, link)
	charts[chartSweep] = chart.SVG()
	fmt.Fprintf(b, "![%s](%s)\n\n%s\n", chart.Title, chartLink(chartSweep), columnNotes)
}

func renderLatency(b *strings.Builder, files []*bench.File, link, chartLink func(string) string, charts map[string][]byte) {
	chart := svg.LineChart{Title: "Inlet ack latency p99 against offered load", Subtitle: "newest latency run of each configuration; dots are single runs", XLabel: "offered records/s (open loop)",
		YLabel: "ack latency p99 (ms, median)", YFormat: func(v float64) string { return svg.TrimFloat(v) }}
	gs, older := shown(groups(files))
	for _, g := range gs {
		f := g[0]
		sum := bench.Summarize(f.Runs, "")
		// Offered rate ascending, the flat-out reference last.
		slices.SortStableFunc(sum, func(a, b bench.Summary) int {
			if (a.Rate == 0) != (b.Rate == 0) {
				if a.Rate == 0 {
					return 1
				}
				return -1
			}
			return cmpFloat(a.Rate, b.Rate)
		})
		fmt.Fprintf(b, "### %s\n\n", f.Label)
		provenance(b, f, link)
		table(b, []column{colOffered, colRuns, {"achieved records/s", "---:", colRecords.cell}, colP50, colP99, colP999, colReqP50, colReqP99, colCPU}, sum)
		earlier(b, g[1:], link)
		s := svg.Series{Name: f.Label}
		for _, m := range sum {
			if m.Runs > m.Failed && m.Rate > 0 {
				s.Points = append(s.Points, svg.Point{X: m.Rate, Y: m.P99Us / 1e3})
			}
		}
		for _, r := range f.Runs {
			if r.OK() && r.Rate > 0 {
				s.Raw = append(s.Raw, svg.Point{X: r.Rate, Y: float64(r.P99Us) / 1e3})
			}
		}
		chart.Series = append(chart.Series, s)
	}
	olderConfigurations(b, older, func(f *bench.File) string { return f.Label }, link)
	charts[chartLatency] = chart.SVG()
	fmt.Fprintf(b, "![%s](%s)\n\nWith an offered rate loadgen runs open loop: each record has an intended send time fixed in "+
		"advance and its latency is measured from it, so a stalled broker shows as latency rather than as a slower sender. "+
		"Request p50/p99 are per produce request, from writing it to reading its response (kgo's BrokerE2E): the "+
		"broker's share of the ack latency with the network, without linger and the producer's own queueing. "+
		"%s\n", chart.Title, chartLink(chartLatency), columnNotes)
}

// chartedFirst moves the group the charts show to the front: the newest comparison of several
// brokers (or, with none, the newest); the rest stay newest first.
func chartedFirst(gs [][]*bench.File) [][]*bench.File {
	charted := 0
	for gi, g := range gs {
		if len(g[0].Targets) > 1 {
			charted = gi
			break
		}
	}
	return append(append([][]*bench.File{gs[charted]}, gs[:charted]...), gs[charted+1:]...)
}

func renderCompare(b *strings.Builder, files []*bench.File, link, chartLink func(string) string, charts map[string][]byte) {
	gs, older := shown(chartedFirst(groups(files)))
	charted := 0
	for gi, g := range gs {
		f := g[0]
		sum := bench.Summarize(f.Runs, f.Baseline)
		fmt.Fprintf(b, "### %s: %s\n\n", f.Label, strings.Join(targetNames(f), ", "))
		provenance(b, f, link)
		fmt.Fprintf(b, "Baseline: `%s`. Targets ran alternately (A B C A B C …) so that drift of the machine spreads over all of them.\n\n", f.Baseline)
		table(b, []column{colTarget, colRuns, colRecords, colRecRatio, colMB, colP50, colP99, colCPU, colCPURatio, colRSS, colDisk}, sum)
		// The command of each target, {port} and {dir} standing for the loopback port and the
		// fresh data directory of each run.
		for _, t := range f.Targets {
			fmt.Fprintf(b, "- `%s`: %s\n", t.Name, code(human.CommandLine(t.Argv)))
		}
		if len(f.Targets) > 0 {
			b.WriteString("\n")
		}
		earlier(b, g[1:], link)
		if gi != charted {
			continue
		}
		sub := f.Label + " · " + f.Started.UTC().Format("2006-01-02") + " · " + filepath.Base(f.Name)
		thr := svg.BarChart{Title: "Acknowledged records/s by broker", Subtitle: sub, YLabel: "records/s (median)"}
		cpu := svg.BarChart{Title: "Server CPU seconds per million records", Subtitle: sub, YLabel: "CPU s / M records (median)",
			YFormat: func(v float64) string { return svg.TrimFloat(v) }}
		for _, m := range sum {
			tb, cb := svg.Bar{Label: m.Target, Value: m.RecordsPerSec}, svg.Bar{Label: m.Target, Value: m.CPUSecondsPerMillion}
			if m.Runs == m.Failed {
				tb.Value, cb.Value = 0, 0
			}
			for _, r := range f.Runs {
				if r.Target == m.Target && r.OK() {
					tb.Raw = append(tb.Raw, r.RecordsPerSec)
					cb.Raw = append(cb.Raw, r.CPUSecondsPerMillion)
				}
			}
			thr.Bars, cpu.Bars = append(thr.Bars, tb), append(cpu.Bars, cb)
		}
		charts[chartCompare], charts[chartCompareCPU] = thr.SVG(), cpu.SVG()
		fmt.Fprintf(b, "![%s](%s) ![%s](%s)\n\n", thr.Title, chartLink(chartCompare), cpu.Title, chartLink(chartCompareCPU))
	}
	olderConfigurations(b, older, func(f *bench.File) string { return f.Label + ": " + strings.Join(targetNames(f), ", ") }, link)
	b.WriteString("Targets: `inlet` is durable (acknowledges after fsync); `inlet-discard` acknowledges without storing " +
		"(`--storage discard`, the protocol path alone); `kfake` is franz-go's in-memory fake broker; `kfake-sync` is kfake " +
		"with a data directory and an fsync per batch (`kfake.DataDir` + `kfake.SyncWrites`), run by `cmd/kfake-broker`. " +
		"Ratios are a target's median over the baseline's. " + columnNotes + "\n")
}

// maxChaosRows bounds the chaos table.
const maxChaosRows = 30

func renderChaos(b *strings.Builder, files []*bench.File, link func(string) string) {
	b.WriteString("Every run SIGKILLs inlet at random moments while the producers send (gaps uniform in " +
		"[0.5, 1.5] × the kill period), restarts it on the same data directory and port, then reads " +
		"every record back: idempotent producers must see every acknowledged record exactly once, " +
		"plain producers at least once (duplicates counted).\n\n")
	b.WriteString("| date | commit | configuration | kills survived | acked | lost | duplicates | verdict | command | raw |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---|---|---|\n")
	n := 0
	for i := len(files) - 1; i >= 0 && n < maxChaosRows; i-- {
		f := files[i]
		c := f.Chaos
		if c == nil {
			continue
		}
		n++
		acked, lost, dups := "–", "–", "–"
		if c.Loadgen != nil && c.Loadgen.Verify != nil {
			v := c.Loadgen.Verify
			acked, lost, dups = human.Thousands(float64(v.Acked)), human.Thousands(float64(v.Lost)), human.Thousands(float64(v.Duplicates))
		}
		verdict := c.Verdict
		if !c.OK {
			verdict = "**" + verdict + "**"
		}
		dirty := ""
		if f.Machine.GitDirty {
			dirty = " (dirty)"
		}
		fmt.Fprintf(b, "| %s | `%s`%s | %s | %d | %s | %s | %s | %s | %s | [%s](%s) |\n",
			f.Started.UTC().Format("2006-01-02 15:04"), human.ShortCommit(f.Machine.GitCommit), dirty, mdEscape(f.Label), c.Kills,
			acked, lost, dups, mdEscape(verdict), mdEscape(code(f.Command)), filepath.Base(f.Name), link(f.Name))
	}
	b.WriteString("\n")
}

// mdEscape keeps a table cell from ending early.
func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
