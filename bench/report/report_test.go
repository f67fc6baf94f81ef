package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inlet/bench"
	"inlet/bench/proc"
)

// fixtureFiles reads bench/testdata/results as if it were the results directory of a root at
// bench/testdata.
func fixtureFiles(t *testing.T) []*bench.File {
	t.Helper()
	files, err := bench.ReadFiles("../testdata", filepath.Join("..", "testdata", "results"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sectionBody(t *testing.T, sections []section, kind string) string {
	t.Helper()
	for _, s := range sections {
		if s.kind == kind {
			return s.body
		}
	}
	t.Fatalf("no %s section", kind)
	return ""
}

func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q; it is:\n%s", what, w, text)
		}
	}
}

func TestReadFilesSkipsOtherJSONAndSortsByStart(t *testing.T) {
	files := fixtureFiles(t)
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	want := []string{
		"results/sweep-20240601-100000.json", "results/sweep-20250101-100000.json", "results/compare-20250102-100000.json",
		"results/latency-20250103-100000.json", "results/chaos-20250104-100000.json", "results/chaos-20250105-100000.json",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v (unrelated.json skipped, oldest first)", names, want)
	}
}

// TestReportSweepTableFromFixture checks the medians of the newest sweep, a failed run counted
// but not used, and the provenance line.
func TestReportSweepTableFromFixture(t *testing.T) {
	sections, charts := renderReport(fixtureFiles(t), "results", func(s string) string { return s })
	body := sectionBody(t, sections, bench.KindSweep)
	mustContain(t, "sweep section", body,
		"### idempotent, 16 producers, 100-byte records, segments storage",
		"`bin/bench sweep --workers 1,2 --repeat 3 --duration 20s`",
		"commit `0123456789ab`",
		"Test CPU @ 3.0GHz, 2 cores, 24.0 GiB, Linux 6.1.0-test, go1.26.8",
		"[results/sweep-20250101-100000.json](results/sweep-20250101-100000.json)",
		"[results/sweep.csv](results/sweep.csv)",
		"| workers | runs | records/s | MB/s | ack p50 | ack p99 | ack p99.9 | server CPU s / M records | server peak RSS | disk / acked bytes |",
		"| 1 | 3 | 110,000 | 11.0 | 1.05 ms | 5.20 ms | 9.10 ms | 0.95 | 105 MiB | 1.05 |",
		"| 2 | 3 (1 failed) | 160,000 | 16.0 | 1.25 ms | 6.20 ms | 10.00 ms | 1.30 | 210 MiB | 1.30 |",
		"Earlier runs of this configuration: [sweep-20240601-100000.json](results/sweep-20240601-100000.json) (2024-06-01, `fedcba987654`)",
		"![Inlet throughput against gnet event-loop workers](results/sweep-throughput.svg)",
	)
	if strings.Contains(body, "Old CPU") {
		t.Errorf("the older sweep of the same configuration got a table of its own:\n%s", body)
	}
	if _, ok := charts[chartSweep]; !ok {
		t.Errorf("no sweep chart")
	}
}

func TestReportCompareRatiosFromFixture(t *testing.T) {
	sections, charts := renderReport(fixtureFiles(t), "results", func(s string) string { return s })
	body := sectionBody(t, sections, bench.KindCompare)
	mustContain(t, "compare section", body,
		"Baseline: `inlet`.",
		"| inlet | 2 | 210,000 | 1.00× |",
		// kfake: 102,500 / 210,000 records/s; 4.8 / 2.1 CPU s per M records.
		"| kfake | 2 | 102,500 | 0.49× |",
		"| 4.80 | 2.29× |",
		"| other | 2 (2 failed) | – | – |",
		"- `other`: `/bin/sh -c 'run-other --port {port} | tee'`",
		"- `inlet`: `bin/inlet --listen 127.0.0.1:{port} --data-dir {dir}`",
	)
	for _, c := range []string{chartCompare, chartCompareCPU} {
		if _, ok := charts[c]; !ok {
			t.Errorf("no %s", c)
		}
	}
}

func TestReportLatencyOrderFromFixture(t *testing.T) {
	sections, _ := renderReport(fixtureFiles(t), "results", func(s string) string { return s })
	body := sectionBody(t, sections, bench.KindLatency)
	a := strings.Index(body, "| 100,000 | 1 | 99,900 | 3.00 ms | 8.00 ms | 15.00 ms |")
	b := strings.Index(body, "| 200,000 | 1 | 199,000 | 4.00 ms | 12.00 ms | 20.00 ms |")
	c := strings.Index(body, "| flat out | 1 | 400,000 | 300.00 ms | 900.00 ms | 1.00 s |")
	if a < 0 || b < 0 || c < 0 || !(a < b && b < c) {
		t.Fatalf("latency rows missing or not in offered-rate order (flat out last):\n%s", body)
	}
}

func TestReportChaosNewestFirstFromFixture(t *testing.T) {
	sections, _ := renderReport(fixtureFiles(t), "results", func(s string) string { return s })
	body := sectionBody(t, sections, bench.KindChaos)
	plain := strings.Index(body, "| 2025-01-05 10:00 | `111111111111` | plain, 16 producers, 100-byte records, segments storage, kill every 3s | 2 | 1,000 | 3 | 12 | **at least once: FAILED** |")
	idem := strings.Index(body, "| 2025-01-04 10:00 | `0123456789ab` (dirty) | idempotent, 16 producers, 100-byte records, segments storage, kill every 3s | 19 | 12,345,678 | 0 | 0 | exactly once: ok |")
	if plain < 0 || idem < 0 || plain > idem {
		t.Fatalf("chaos rows missing or not newest first:\n%s", body)
	}
}

func TestReportEmptyKindsSayHowToRun(t *testing.T) {
	sections, charts := renderReport(nil, "results", func(s string) string { return s })
	if len(charts) != 0 {
		t.Errorf("charts without data: %v", charts)
	}
	mustContain(t, "empty sweep section", sectionBody(t, sections, bench.KindSweep), "_No sweep results yet: run `make bench`._")
	mustContain(t, "empty chaos section", sectionBody(t, sections, bench.KindChaos), "_No chaos results yet: run `make chaos`._")
}

// TestApplySectionsKeepsTextOutsideMarkers: only the text between a section's markers
// changes; prose before, between and after is kept byte for byte, a section without markers
// is appended, and applying twice changes nothing more.
func TestApplySectionsKeepsTextOutsideMarkers(t *testing.T) {
	doc := "# My benchmarks\n\nHand-written intro.\n\n" +
		beginMarker(bench.KindSweep) + "\nold sweep table\n" + endMarker(bench.KindSweep) + "\n\nProse between.\n\n" +
		beginMarker(bench.KindChaos) + "\nold chaos\n" + endMarker(bench.KindChaos) + "\nTrailing words."
	sections := []section{
		{bench.KindSweep, "Sweep", "new sweep table\n"},
		{bench.KindCompare, "Compare heading", "new compare"},
		{bench.KindChaos, "Chaos", "new chaos"},
	}
	got := applySections(doc, sections)
	want := "# My benchmarks\n\nHand-written intro.\n\n" +
		beginMarker(bench.KindSweep) + "\nnew sweep table\n" + endMarker(bench.KindSweep) + "\n\nProse between.\n\n" +
		beginMarker(bench.KindChaos) + "\nnew chaos\n" + endMarker(bench.KindChaos) + "\nTrailing words.\n" +
		"\n## Compare heading\n\n" + beginMarker(bench.KindCompare) + "\nnew compare\n" + endMarker(bench.KindCompare) + "\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if again := applySections(got, sections); again != got {
		t.Fatalf("second application changed the document:\n%s", again)
	}
}

func TestApplySectionsNewDocumentHasHeaderAndAllMarkers(t *testing.T) {
	var sections []section
	for _, h := range sectionHeadings {
		sections = append(sections, section{h.kind, h.heading, "body of " + h.kind})
	}
	got := applySections("", sections)
	if !strings.HasPrefix(got, "# Benchmarks\n") {
		t.Errorf("no header:\n%s", got)
	}
	last := 0
	for _, h := range sectionHeadings {
		i := strings.Index(got, "## "+h.heading+"\n\n"+beginMarker(h.kind)+"\nbody of "+h.kind+"\n"+endMarker(h.kind))
		if i < last {
			t.Errorf("section %s missing or out of order:\n%s", h.kind, got)
		}
		last = i
	}
}

// TestReportRewritesBenchmarksFile runs Report on a copy of the fixtures with an existing
// BENCHMARKS.md and checks the file and the charts it writes.
func TestReportRewritesBenchmarksFile(t *testing.T) {
	root := t.TempDir()
	results := filepath.Join(root, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join("..", "testdata", "results"))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "results", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(results, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(root, "BENCHMARKS.md")
	intro := "# Benchmarks of Inlet\n\nKeep me.\n\n" + beginMarker(bench.KindSweep) + "\nstale\n" + endMarker(bench.KindSweep) + "\n\nKeep me too.\n"
	if err := os.WriteFile(out, []byte(intro), 0o644); err != nil {
		t.Fatal(err)
	}
	written, err := Write(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 5 { // four charts and the markdown
		t.Errorf("wrote %v, want four charts and BENCHMARKS.md", written)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	mustContain(t, "BENCHMARKS.md", doc, "# Benchmarks of Inlet\n\nKeep me.\n\n"+beginMarker(bench.KindSweep)+"\n### idempotent",
		endMarker(bench.KindSweep)+"\n\nKeep me too.\n", "| 1 | 3 | 110,000 |", beginMarker(bench.KindCompare), beginMarker(bench.KindLatency),
		beginMarker(bench.KindChaos), "(results/sweep-throughput.svg)", "(results/latency-p99.svg)")
	if strings.Contains(doc, "stale") {
		t.Errorf("old section content kept:\n%s", doc)
	}
	for _, c := range []string{chartSweep, chartLatency, chartCompare, chartCompareCPU} {
		b, err := os.ReadFile(filepath.Join(results, c))
		if err != nil {
			t.Fatalf("chart %s: %v", c, err)
		}
		checkSVG(t, b)
	}
}

// TestReportComparePeersNotHiddenByNewerSingleTargetRun: an inlet-only compare of the same load
// is a different comparison; the newest run against peers stays in the report, first, and its
// numbers are the ones charted.
func TestReportComparePeersNotHiddenByNewerSingleTargetRun(t *testing.T) {
	files := fixtureFiles(t)
	var peers *bench.File
	for _, f := range files {
		if f.Kind == bench.KindCompare && len(f.Targets) > 1 {
			peers = f
		}
	}
	if peers == nil {
		t.Fatal("fixture has no compare run with several targets")
	}
	alone := *peers
	alone.Name = "results/compare-later.json"
	alone.Started = peers.Started.Add(time.Hour)
	alone.Targets = peers.Targets[:1]
	alone.Runs = nil
	for _, r := range peers.Runs {
		if r.Target == peers.Targets[0].Name {
			r.RecordsPerSec = 999_999
			alone.Runs = append(alone.Runs, r)
		}
	}
	sections, charts := renderReport(append(files, &alone), "results", func(s string) string { return s })
	body := sectionBody(t, sections, bench.KindCompare)
	mustContain(t, "compare section", body, "| kfake | 2 | 102,500 | 0.49× |", "| inlet | 2 | 999,999 | 1.00× |")
	if strings.Index(body, "| kfake |") > strings.Index(body, "999,999") {
		t.Error("the comparison against peers is not first")
	}
	if svg := string(charts[chartCompare]); !strings.Contains(svg, "kfake") {
		t.Errorf("the chart is not of the comparison against peers:\n%s", svg)
	}
}

// checkSVG decodes b completely with encoding/xml and returns how many elements of each name
// it holds; the root must be an <svg> in the SVG namespace.
func checkSVG(t *testing.T, b []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	counts := map[string]int{}
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (el.Name.Local != "svg" || el.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element is %v, want svg in the SVG namespace", el.Name)
			}
			depth++
			counts[el.Name.Local]++
		case xml.EndElement:
			depth--
		}
	}
	if depth != 0 || counts["svg"] != 1 {
		t.Fatalf("unbalanced document (depth %d, %d svg elements)", depth, counts["svg"])
	}
	return counts
}

// TestReportListsOlderConfigurationsByALine: past shownGroups configurations, a section renders
// the newest in full (the charted comparison of several brokers among them), names the next
// listedOlder by a line that links their newest file, and counts the rest.
func TestReportListsOlderConfigurationsByALine(t *testing.T) {
	const n = shownGroups + listedOlder + 2 // loads 0 .. n-1, oldest first
	var files []*bench.File
	for i := range n {
		f := sampleFile(bench.KindCompare)
		f.Baseline = bench.TargetInlet
		f.Targets = []proc.Target{{Name: "inlet"}}
		if i == 0 {
			f.Targets = append(f.Targets, proc.Target{Name: "klite"}) // the oldest, charted
		}
		f.Label = fmt.Sprintf("load %d", i)
		f.Name = fmt.Sprintf("results/compare-%d.json", i)
		f.Started = f.Started.Add(time.Duration(i) * time.Hour)
		files = append(files, f)
	}
	// load 1 measured again just before the newest: its group is the second newest.
	again := *files[1]
	again.Name, again.Started = "results/compare-1b.json", files[n-1].Started.Add(-time.Minute)
	files = append(files[:n-1:n-1], &again, files[n-1])
	sections, _ := renderReport(files, "results", func(s string) string { return s })
	body := sectionBody(t, sections, bench.KindCompare)
	newest := fmt.Sprintf("load %d", n-1)
	mustContain(t, "compare section", body, "### load 0: inlet, klite", "### "+newest+": inlet", "### load 1: inlet",
		"Earlier runs of this configuration: [compare-1.json]",
		"Older configurations (newest run of each; `bin/bench report` renders the newest 3 in full):",
		fmt.Sprintf("- load %d: inlet: [compare-%d.json](results/compare-%d.json) (2025-03-04, `abc`)", n-2, n-2, n-2),
		"- and 2 older configurations, each under `results/` with its command in the file")
	for i := 2; i < n-1; i++ {
		if strings.Contains(body, fmt.Sprintf("### load %d:", i)) {
			t.Errorf("load %d is rendered in full", i)
		}
		listed := strings.Contains(body, fmt.Sprintf("- load %d: inlet:", i))
		if want := i >= n-1-listedOlder; listed != want {
			t.Errorf("load %d listed: %v, want %v", i, listed, want)
		}
	}
	if strings.Index(body, fmt.Sprintf("- load %d", n-2)) > strings.Index(body, fmt.Sprintf("- load %d", n-3)) {
		t.Error("older configurations are not newest first")
	}
}
