package bench

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"inlet/bench/proc"
	"inlet/loadgen"
)

func sampleFile(kind string) *File {
	started := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	f := &File{
		Kind: kind, Label: "idempotent, 16 producers, 100-byte records", Command: "bin/bench " + kind + " --repeat 2",
		Flags:   map[string]string{"repeat": "2", "producers": "16"},
		Machine: proc.Machine{CPUModel: "Test CPU", Cores: 2, GitCommit: "abc", GitDirty: true, Date: started},
		Started: started, Finished: started.Add(time.Minute),
	}
	settings := loadgen.Settings{Producers: 16, Idempotent: true, RecordSize: 100, Duration: 20 * time.Second}
	if kind == KindChaos {
		f.Chaos = &ChaosOutcome{KillEverySeconds: 3, Kills: 4, Verdict: "exactly once: ok", OK: true,
			Loadgen: &loadgen.Result{Settings: settings, Acked: 1000, Verify: &loadgen.VerifyResult{Acked: 1000}}}
		return f
	}
	f.Runs = []Run{
		{Target: "inlet", Workers: 1, Repeat: 1, RecordsPerSec: 1000, Acked: 20000, P99Us: 5000,
			Server: proc.ProcStats{PeakRSSBytes: 1 << 20}, Loadgen: &loadgen.Result{Settings: settings}},
		{Target: "inlet", Workers: 2, Repeat: 1, Error: "loadgen: refused, \"quoted\"\nnewline"},
	}
	f.Summary = Summarize(f.Runs, "")
	return f
}

// TestWriteFileRoundTrip: a written result file reads back equal, under a name made of its
// kind and start time, and a second file with the same start time gets a suffix instead of
// overwriting the first.
func TestWriteFileRoundTrip(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "results")
	f := sampleFile(KindSweep)
	path, err := writeFile(root, dir, f)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "sweep-20250304-050607.json"); path != want || f.Name != "results/sweep-20250304-050607.json" {
		t.Fatalf("wrote %s (name %s), want %s", path, f.Name, want)
	}
	g := sampleFile(KindSweep)
	path2, err := writeFile(root, dir, g)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path2) != "sweep-20250304-050607-2.json" {
		t.Fatalf("second file %s overwrote or misnamed", path2)
	}
	files, err := ReadFiles(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("read %d files, want 2", len(files))
	}
	got := files[0]
	if got.Name != f.Name {
		t.Errorf("first file read is %s, want %s", got.Name, f.Name)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("round trip changed the file:\n got %+v\nwant %+v", got, f)
	}
}

// TestAppendCSVWritesHeaderOnce: the first append writes the header and a row per run, the
// second only rows; fields with commas, quotes and newlines survive.
func TestAppendCSVWritesHeaderOnce(t *testing.T) {
	dir := t.TempDir()
	f := sampleFile(KindSweep)
	f.Name = "results/sweep-x.json"
	for range 2 {
		if _, err := appendCSV(dir, f); err != nil {
			t.Fatal(err)
		}
	}
	fh, err := os.Open(filepath.Join(dir, "sweep.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	recs, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+2*len(f.Runs) {
		t.Fatalf("%d records, want a header and %d rows", len(recs), 2*len(f.Runs))
	}
	if !reflect.DeepEqual(recs[0], runCSVHeader) {
		t.Fatalf("header %v", recs[0])
	}
	col := func(row []string, name string) string {
		for i, h := range runCSVHeader {
			if h == name {
				return row[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	r1, r2 := recs[1], recs[2]
	if col(r1, "file") != "results/sweep-x.json" || col(r1, "workers") != "1" || col(r1, "records_per_sec") != "1000" ||
		col(r1, "p99_us") != "5000" || col(r1, "producers") != "16" || col(r1, "git_dirty") != "true" || col(r1, "error") != "" {
		t.Errorf("row 1: %v", r1)
	}
	if col(r2, "error") != "loadgen: refused, \"quoted\"\nnewline" {
		t.Errorf("row 2 error column: %q", col(r2, "error"))
	}
}

func TestAppendCSVChaosRow(t *testing.T) {
	dir := t.TempDir()
	f := sampleFile(KindChaos)
	f.Name = "results/chaos-x.json"
	if _, err := appendCSV(dir, f); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "chaos.csv"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != strings.Join(chaosCSVHeader, ",") {
		t.Fatalf("chaos.csv:\n%s", b)
	}
	if want := `results/chaos-x.json,2025-03-04T05:06:07Z,abc,true,"idempotent, 16 producers, 100-byte records",16,true,20,3,4,1000,0,0,exactly once: ok,true`; lines[1] != want {
		t.Errorf("row\n %s\nwant\n %s", lines[1], want)
	}
}

// TestAppendCSVRefusesForeignHeader: rows are not appended under another version's header.
func TestAppendCSVRefusesForeignHeader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sweep.csv")
	if err := os.WriteFile(path, []byte("a,b,c\n1,2,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := appendCSV(dir, sampleFile(KindSweep)); err == nil {
		t.Fatal("appended under a different header")
	}
	if b, _ := os.ReadFile(path); string(b) != "a,b,c\n1,2,3\n" {
		t.Errorf("file changed: %q", b)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
		ok   bool
	}{
		{nil, 0, false},
		{[]float64{math.NaN()}, 0, false},
		{[]float64{3}, 3, true},
		{[]float64{5, 1, 3}, 3, true},
		{[]float64{4, 1, 3, 2}, 2.5, true},
		{[]float64{2, math.NaN(), 9, 4}, 4, true},
	} {
		in := append([]float64(nil), tc.in...)
		got, ok := median(in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("median(%v) = %v, %t; want %v, %t", tc.in, got, ok, tc.want, tc.ok)
		}
		for i := range in {
			if !(in[i] == tc.in[i] || math.IsNaN(in[i]) && math.IsNaN(tc.in[i])) {
				t.Errorf("median reordered its input: %v", in)
				break
			}
		}
	}
}

func TestRatio(t *testing.T) {
	if r, ok := ratio(3, 2); !ok || r != 1.5 {
		t.Errorf("ratio(3, 2) = %v, %t", r, ok)
	}
	for _, tc := range [][2]float64{{1, 0}, {math.NaN(), 1}, {1, math.Inf(1)}} {
		if _, ok := ratio(tc[0], tc[1]); ok {
			t.Errorf("ratio(%v, %v) is defined", tc[0], tc[1])
		}
	}
	if got := perMillion(2, 4_000_000); got != 0.5 {
		t.Errorf("perMillion(2 s, 4M records) = %v, want 0.5", got)
	}
	if got := perMillion(2, 0); got != 0 {
		t.Errorf("perMillion with no records = %v", got)
	}
}

// TestSummarizeMediansAndRatios: medians per point in first-appearance order, failed runs
// counted but not used, ratios to the baseline's medians, none for a point without runs.
func TestSummarizeMediansAndRatios(t *testing.T) {
	runs := []Run{
		{Target: "inlet", RecordsPerSec: 100, CPUSecondsPerMillion: 2, Acked: 1},
		{Target: "kfake", RecordsPerSec: 50, CPUSecondsPerMillion: 5, Acked: 1},
		{Target: "dead", Error: "x"},
		{Target: "inlet", RecordsPerSec: 300, CPUSecondsPerMillion: 4, Acked: 1},
		{Target: "kfake", RecordsPerSec: 70, CPUSecondsPerMillion: 6, Acked: 1},
		{Target: "inlet", Error: "interrupted", RecordsPerSec: 1e9, Acked: 1},
		{Target: "kfake", RecordsPerSec: 0, Acked: 0}, // nothing acknowledged: not ok
	}
	sum := Summarize(runs, "inlet")
	if len(sum) != 3 || sum[0].Target != "inlet" || sum[1].Target != "kfake" || sum[2].Target != "dead" {
		t.Fatalf("points %+v", sum)
	}
	in, kf, dead := sum[0], sum[1], sum[2]
	if in.Runs != 3 || in.Failed != 1 || in.RecordsPerSec != 200 || in.CPUSecondsPerMillion != 3 {
		t.Errorf("inlet %+v", in)
	}
	if kf.Runs != 3 || kf.Failed != 1 || kf.RecordsPerSec != 60 || kf.CPUSecondsPerMillion != 5.5 {
		t.Errorf("kfake %+v", kf)
	}
	if in.RecordsPerSecRatio == nil || *in.RecordsPerSecRatio != 1 {
		t.Errorf("baseline ratio %v", in.RecordsPerSecRatio)
	}
	if kf.RecordsPerSecRatio == nil || *kf.RecordsPerSecRatio != 0.3 || kf.CPUPerRecordRatio == nil || *kf.CPUPerRecordRatio != 5.5/3 {
		t.Errorf("kfake ratios %v %v", kf.RecordsPerSecRatio, kf.CPUPerRecordRatio)
	}
	if dead.RecordsPerSecRatio != nil || dead.CPUPerRecordRatio != nil || dead.Failed != 1 {
		t.Errorf("dead %+v", dead)
	}
	if s := Summarize(runs, "absent"); s[1].RecordsPerSecRatio != nil {
		t.Errorf("ratios without a baseline: %+v", s[1])
	}
	// Points differ by workers and rate as well as target.
	pts := Summarize([]Run{{Target: "inlet", Workers: 1}, {Target: "inlet", Workers: 2}, {Target: "inlet", Workers: 2, Rate: 5}}, "")
	if len(pts) != 3 {
		t.Errorf("%d points, want 3", len(pts))
	}
}

// TestCompactLeavesKeepsJSONEqual: collapsing small objects onto one line changes only
// whitespace, also around strings holding quotes, braces, commas and escaped newlines.
func TestCompactLeavesKeepsJSONEqual(t *testing.T) {
	v := map[string]any{
		"buckets": []map[string]any{{"low_us": 1, "high_us": 2, "count": 3}, {"low_us": 4, "high_us": 5, "count": 6}},
		"tricky":  map[string]any{"a": "x \"{,\n}\" y", "b": []int{1, 2}, "c": map[string]any{"d": "e, f"}},
		"six":     map[string]any{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6},
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	c := compactLeaves(b)
	var before, after any
	if err := json.Unmarshal(b, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(c, &after); err != nil {
		t.Fatalf("compacted JSON does not parse: %v\n%s", err, c)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("compacting changed the value:\n%s", c)
	}
	if !strings.Contains(string(c), `{"count": 3, "high_us": 2, "low_us": 1}`) || !strings.Contains(string(c), `"d": "e, f"}`) {
		t.Errorf("leaf objects not on one line:\n%s", c)
	}
	if strings.Contains(string(c), `{"a": 1, "b": 2`) {
		t.Errorf("an object of six fields was collapsed:\n%s", c)
	}
}
