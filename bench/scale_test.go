package bench

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"inlet/bench/human"
	"inlet/bench/proc"
	"inlet/loadgen"
)

func TestParseDimensions(t *testing.T) {
	for in, want := range map[string][]string{
		"":                        ScaleDimensions,
		"all":                     ScaleDimensions,
		"compression, partitions": {DimCompression, DimPartitions},
		"record-size,":            {DimRecordSize},
	} {
		got, err := ParseDimensions(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseDimensions(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"partition", "topics,topics", ","} {
		if _, err := ParseDimensions(bad); err == nil {
			t.Errorf("ParseDimensions(%q) accepted", bad)
		}
	}
}

func TestParsePoints(t *testing.T) {
	if got, err := ParsePoints(DimPartitions, " 16,1000 "); err != nil || !slices.Equal(got, []string{"16", "1000"}) {
		t.Errorf("partitions: %v, %v", got, err)
	}
	if got, err := ParsePoints(DimCompression, "none,LZ4"); err != nil || !slices.Equal(got, []string{"none", "lz4"}) {
		t.Errorf("compression: %v, %v", got, err)
	}
	for dim, bad := range map[string]string{DimPartitions: "0", DimProducers: "x", DimCompression: "brotli",
		DimRecordSize: "100,100", DimTopics: ""} {
		if _, err := ParsePoints(dim, bad); err == nil {
			t.Errorf("ParsePoints(%s, %q) accepted", dim, bad)
		}
	}
}

func scaleBase() Load {
	return Load{Producers: 16, Partitions: 16, RecordSize: 100, Idempotent: true, Duration: 10 * time.Second}
}

// TestScalePointsChangeOneParameter: each point differs from the base in its dimension only
// (topics also sets one partition), and the producers' buffers shrink with producers × size.
func TestScalePointsChangeOneParameter(t *testing.T) {
	base := scaleBase()
	pts, err := scalePoints(base, []string{DimTopics, DimProducers, DimRecordSize, DimCompression, DimPartitions},
		map[string][]string{DimPartitions: {"16", "10000"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pts {
		names = append(names, p.dimension+"="+p.value)
	}
	want := []string{"topics=1000", "producers=16", "producers=256", "producers=1000", "record-size=100",
		"record-size=1024", "record-size=16384", "compression=none", "compression=lz4", "compression=zstd",
		"partitions=16", "partitions=10000"}
	if !slices.Equal(names, want) {
		t.Fatalf("points %v, want %v", names, want)
	}
	at := func(name string) Load {
		i := slices.Index(names, name)
		return pts[i].load
	}
	check := func(name string, want Load) {
		t.Helper()
		if got := at(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: load %+v, want %+v", name, got, want)
		}
	}
	with := func(f func(*Load)) Load { l := base; f(&l); return l }
	check("partitions=16", base)
	check("producers=16", base)
	check("compression=none", with(func(l *Load) { l.Compression = "none" }))
	check("partitions=10000", with(func(l *Load) { l.Partitions = 10000 }))
	check("topics=1000", with(func(l *Load) { l.Topics, l.Partitions = 1000, 1 }))
	check("compression=zstd", with(func(l *Load) { l.Compression = "zstd" }))
	check("producers=1000", with(func(l *Load) { l.Producers, l.MaxBufferedRecords = 1000, 1600 }))
	check("record-size=16384", with(func(l *Load) { l.RecordSize, l.MaxBufferedRecords = 16384, 610 }))

	// A buffer size given by the user stays.
	base.MaxBufferedRecords = 5000
	if pts, _ := scalePoints(base, []string{DimProducers}, map[string][]string{DimProducers: {"1000"}}); pts[0].load.MaxBufferedRecords != 5000 {
		t.Errorf("--max-buffered-records overridden: %d", pts[0].load.MaxBufferedRecords)
	}
	// loadgen's own checks run before any broker starts.
	if _, err := scalePoints(scaleBase(), []string{DimRecordSize}, map[string][]string{DimRecordSize: {"4"}}); err == nil {
		t.Error("a record size below loadgen's header was accepted")
	}
}

func TestLoadConfigCompressionAndTopics(t *testing.T) {
	cfg := scaleBase().Config("a:1", 0)
	if cfg.Compression != "none" || cfg.Topics != 0 {
		t.Errorf("base: compression %q, topics %d; want none and 0 (today's single topic)", cfg.Compression, cfg.Topics)
	}
	l := scaleBase()
	l.Compression, l.Topics = "lz4", 1000
	cfg = l.Config("a:1", 0)
	if cfg.Compression != "lz4" || cfg.Topics != 1000 {
		t.Errorf("compression %q, topics %d", cfg.Compression, cfg.Topics)
	}
	if got := l.Label(); !strings.Contains(got, "1000 topics") || !strings.Contains(got, "lz4 compression") {
		t.Errorf("label %q", got)
	}
	if got := scaleBase().Label(); got != "idempotent, 16 producers, 100-byte records" {
		t.Errorf("base label %q changed", got)
	}
}

func TestTargetWithPartitions(t *testing.T) {
	p, err := ParsePeer("klite=/k --listen 127.0.0.1:{port} --data-dir {dir} --default-partitions {partitions}")
	if err != nil {
		t.Fatal(err)
	}
	got := p.WithPartitions(1000).Expand(9092, "/d")
	if want := "/k --listen 127.0.0.1:9092 --data-dir /d --default-partitions 1000"; got[2] != want {
		t.Errorf("argv %q, want %q", got[2], want)
	}
	if !strings.Contains(p.Argv[2], "{partitions}") {
		t.Error("withPartitions changed the template")
	}
	plain := proc.Target{Name: "x", Argv: []string{"/x", "{port}"}}
	if q := plain.WithPartitions(5); &q.Argv[0] != &plain.Argv[0] {
		t.Error("a target without {partitions} was copied")
	}
	e := &Env{InletBin: "/inlet"}
	co := CompareOptions{Env: *e, Targets: []string{TargetInlet}, Peers: []proc.Target{p}}
	ts, err := co.targets("{partitions}")
	if err != nil {
		t.Fatal(err)
	}
	if got := human.CommandLine(ts[0].WithPartitions(7).Argv); !strings.Contains(got, "--default-partitions 7") {
		t.Errorf("inlet target %q does not follow the point", got)
	}
}

func TestInflightBudget(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, 256 << 20},
		{[]string{"--workers=2"}, 256 << 20},
		{[]string{"--inflight-budget=64MiB"}, 64 << 20},
		{[]string{"--inflight-budget", "1GiB", "--x"}, 1 << 30},
	} {
		if got, err := InflightBudget(c.args); err != nil || got != c.want {
			t.Errorf("InflightBudget(%q) = %d, %v; want %d", c.args, got, err, c.want)
		}
	}
	if _, err := InflightBudget([]string{"--inflight-budget=lots"}); err == nil {
		t.Error("a bad size was accepted")
	}
}

// scaleFile is a scale result: inlet and klite at two partition counts and one compression,
// klite failing records at 1000 partitions and outgrowing the RSS limit.
func scaleFile() *File {
	started := time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC)
	f := &File{Kind: KindScale, Label: "idempotent, 16 producers, 100-byte records, 16 partitions, inlet on segments storage",
		Command: "bin/bench scale --dimension partitions,compression", Machine: proc.Machine{Cores: 2, GitCommit: "abc", Date: started},
		Started: started, Finished: started.Add(time.Minute), Baseline: TargetInlet,
		Targets: []proc.Target{{Name: "inlet", Argv: []string{"bin/inlet", "--default-partitions", "{partitions}"}},
			{Name: "klite", Argv: []string{"/bin/sh", "-c", "klite --default-partitions {partitions}"}}},
		Scale: &ScaleSettings{RSSLimitBytes: 512 << 20, Base: ScaleBase{Producers: 16, Partitions: 16, RecordSize: 100,
			Compression: "none", Idempotent: true, DurationSeconds: 4},
			Dimensions: []ScaleDimension{{DimPartitions, []string{"16", "1000"}}, {DimCompression, []string{"lz4"}}}},
	}
	run := func(dim, point, target string, rep int, rps, cpuPerM float64, rss int64) Run {
		return Run{Target: target, Dimension: dim, Point: point, Repeat: rep, RecordsPerSec: rps, MBPerSec: rps * 100 / 1e6,
			Acked: uint64(rps * 4), CPUSecondsPerMillion: cpuPerM, Server: proc.ProcStats{CPUSeconds: rps * 4 * cpuPerM / 1e6, PeakRSSBytes: rss}}
	}
	f.Runs = []Run{
		run(DimPartitions, "16", "inlet", 1, 1_000_000, 1.0, 100<<20),
		run(DimPartitions, "16", "klite", 1, 500_000, 2.0, 300<<20),
		run(DimPartitions, "16", "inlet", 2, 1_200_000, 1.2, 110<<20),
		run(DimPartitions, "16", "klite", 2, 700_000, 2.2, 320<<20),
		run(DimPartitions, "1000", "inlet", 1, 800_000, 1.5, 200<<20),
		run(DimPartitions, "1000", "klite", 1, 200_000, 4.0, 900<<20),
		run(DimCompression, "lz4", "inlet", 1, 600_000, 1.8, 150<<20),
		run(DimCompression, "lz4", "klite", 1, 300_000, 3.0, 400<<20),
	}
	f.Runs[5].Failed, f.Runs[5].Error = 12, "12 records failed: map[timeout:12]"
	f.Summary = SummarizeScale(f.Runs, f.Baseline)
	return f
}

// TestSummarizeScaleRatiosPerPoint: each point's ratios are to inlet at that point, not at
// the first point, and the scale-only figures are filled.
func TestSummarizeScaleRatiosPerPoint(t *testing.T) {
	f := scaleFile()
	find := func(dim, point, target string) Summary {
		for _, s := range f.Summary {
			if s.Dimension == dim && s.Point == point && s.Target == target {
				return s
			}
		}
		t.Fatalf("no summary for %s %s %s", dim, point, target)
		return Summary{}
	}
	s := find(DimPartitions, "16", "klite")
	if s.RecordsPerSec != 600_000 || s.RecordsPerSecRatio == nil || *s.RecordsPerSecRatio != 600_000.0/1_100_000 {
		t.Errorf("klite at 16: %+v", s)
	}
	if s := find(DimCompression, "lz4", "klite"); *s.RecordsPerSecRatio != 0.5 || math.Abs(*s.CPUPerRecordRatio-3.0/1.8) > 1e-9 {
		t.Errorf("klite at lz4: ratios %v %v, want 0.5 and %v", *s.RecordsPerSecRatio, *s.CPUPerRecordRatio, 3.0/1.8)
	}
	s = find(DimPartitions, "1000", "klite")
	if s.Runs != 1 || s.Failed != 1 || s.FailedRecords != 12 || s.MaxPeakRSSBytes != 900<<20 || s.RecordsPerSecRatio != nil {
		t.Errorf("klite at 1000: %+v", s)
	}
	if s := find(DimPartitions, "16", "inlet"); s.CPUSeconds == 0 || s.MaxPeakRSSBytes != 110<<20 {
		t.Errorf("inlet at 16: %+v", s)
	}
}

func TestScaleFileRoundTrip(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "results")
	f := scaleFile()
	f.Runs[0].Loadgen = &loadgen.Result{Settings: loadgen.Settings{Producers: 16, Partitions: 16, Topics: 0, Compression: "none"}}
	if _, err := writeFile(root, dir, f); err != nil {
		t.Fatal(err)
	}
	if _, err := appendCSV(dir, f); err != nil {
		t.Fatal(err)
	}
	files, err := ReadFiles(root, dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("read %d files, %v", len(files), err)
	}
	got := files[0]
	if got.Name != "results/scale-20261130-210000.json" {
		t.Errorf("name %q", got.Name)
	}
	got.Name, f.Name = "", ""
	if !reflect.DeepEqual(got, f) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, f)
	}
	fh, err := os.Open(filepath.Join(dir, "scale.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rows, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(f.Runs) || !slices.Equal(rows[0], scaleCSVHeader) {
		t.Fatalf("csv: %d rows, header %v", len(rows), rows[0])
	}
	if r := rows[1]; !slices.Equal(r[len(r)-7:len(r)-2], []string{"partitions", "16", "16", "1", "none"}) {
		t.Errorf("first row's scale columns %v", r[len(r)-7:])
	}
}

func TestWriteScaleTables(t *testing.T) {
	var b strings.Builder
	writeScaleTables(&b, scaleFile())
	mustContain(t, "scale tables", b.String(), "Partitions in one topic", "Producer compression",
		"peak RSS 900 MiB > 512 MiB; 12 failed records", "1 (1 failed)", "0.55×")
}
