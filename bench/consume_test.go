package bench

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/bench/consume"
	"inlet/bench/proc"
	"inlet/loadgen"
)

func TestTailCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    TailResult
		want string // "" for no error
	}{
		{"every record once", TailResult{Sent: 10, Acked: 10, Received: 10}, ""},
		{"a failed record", TailResult{Sent: 10, Acked: 9, Failed: 1, Received: 9, Errors: map[string]uint64{"boom": 1}}, "1 records failed"},
		{"an unresolved record", TailResult{Sent: 10, Acked: 9, Unresolved: 1, Received: 9}, "neither acknowledged nor failed"},
		{"nothing sent", TailResult{}, "nothing acknowledged"},
		{"a record never received", TailResult{Sent: 10, Acked: 10, Received: 9}, "1 of 10 acknowledged records never received"},
		{"a duplicate", TailResult{Sent: 10, Acked: 10, Received: 11}, "11 records received, more than the 10"},
		{"a record without a stamp", TailResult{Sent: 10, Acked: 10, Received: 10, Malformed: 1}, "without a valid send time"},
	} {
		err := tc.t.check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestFillCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  loadgen.Result
		want string
	}{
		{"complete", loadgen.Result{Acked: 100}, ""},
		{"interrupted", loadgen.Result{Acked: 40, Interrupted: true}, "stopped with 40 of 100"},
		{"flush timed out", loadgen.Result{Acked: 40, FlushTimedOut: true}, "acks still outstanding"},
		{"failed records", loadgen.Result{Acked: 99, Failed: 1}, "1 records failed"},
		{"short", loadgen.Result{Acked: 99}, "99 of 100 records acknowledged"},
	} {
		err := fillCheck(&tc.res, 100)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestConsumeSettingsNormalize(t *testing.T) {
	load := Load{Producers: 16, Partitions: 4, RecordSize: 100, Topic: "t"}
	s, err := ConsumeSettings{Consumers: 8}.Normalize(load)
	if err != nil {
		t.Fatal(err)
	}
	want := ConsumeSettings{Topic: "t-consume", Partitions: 4, RecordSize: 100, Shape: ShapeDefault, FillRecords: DefaultFillRecords,
		// The produce run's producer settings: loadgen's partitioner and buffer, bench's linger.
		Partitioner: "uniform", Linger: 5 * time.Millisecond, BatchMaxBytes: 1_000_012, MaxBufferedRecords: 100_000,
		Consumers:     4, // no more consumers than partitions
		FetchMaxBytes: 50 << 20, FetchMaxPartitionBytes: 1 << 20, FetchMinBytes: 1, FetchMaxWait: 5 * time.Second,
		IsolationLevel: "read_uncommitted", TailRate: DefaultTailRate, TailDuration: DefaultTailDuration, TailProducers: 16,
		Timeout: DefaultConsumeTimeout, DrainTimeout: DefaultDrainTimeout}
	if s != want {
		t.Fatalf("normalized\n %+v\nwant\n %+v", s, want)
	}
	mustContain(t, "label", s.Label(), "shape default: fill 10,000,000 records",
		"(producers with the uniform partitioner, linger 5ms, batches up to 1,000,012 B, 100,000 buffered records each)",
		"fetch max 50 MiB, 1 MiB a partition, min 1 B, max wait 5s", "tail 200,000 records/s")
	for _, tc := range []struct {
		name string
		load Load
		s    ConsumeSettings
		want string
	}{
		{"transactional", Load{Transactional: true, Idempotent: true}, ConsumeSettings{}, "non-transactional"},
		{"avro", Load{ValueFormat: loadgen.FormatAvro}, ConsumeSettings{}, "raw values"},
		{"records too small for a stamp", Load{RecordSize: consume.StampSize - 1}, ConsumeSettings{}, "at least 20 bytes"},
		{"negative fill", load, ConsumeSettings{FillRecords: -1}, "fill records"},
		{"negative rate", load, ConsumeSettings{TailRate: -5}, "tail rate"},
		{"unknown shape", load, ConsumeSettings{Shape: "wide"}, `consume shape "wide" is not one of default, pinned`},
		{"unknown partitioner", load, ConsumeSettings{Partitioner: "hash"}, `producers: partitioner "hash"`},
		{"batch below kgo's minimum", load, ConsumeSettings{BatchMaxBytes: 511}, "producers: batch max bytes"},
		{"partition fetch above the fetch", load, ConsumeSettings{FetchMaxBytes: 1 << 20, FetchMaxPartitionBytes: 2 << 20}, "above fetch max bytes"},
		{"fetch above kgo's read limit", load, ConsumeSettings{FetchMaxBytes: 101 << 20}, "BrokerMaxReadBytes"},
		{"max wait below kgo's minimum", load, ConsumeSettings{FetchMaxWait: 9 * time.Millisecond}, "at least 10ms"},
		{"max wait not in milliseconds", load, ConsumeSettings{FetchMaxWait: 10*time.Millisecond + 1}, "whole milliseconds"},
		{"negative fetch size", load, ConsumeSettings{FetchMinBytes: -1}, "at least 1 byte"},
	} {
		if _, err := tc.s.Normalize(tc.load); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestConsumeShapes: the pinned preset sets the producer and fetch settings of the pinned
// shape; a setting given beside a preset overrides it and makes the shape custom; the
// shape is named from the settings, so the same settings given one by one are the preset; the
// default shape's buffer follows the produce run's --max-buffered-records.
func TestConsumeShapes(t *testing.T) {
	load := Load{Producers: 16, Partitions: 16, RecordSize: 100}
	s, err := ConsumeSettings{Shape: ShapePinned}.Normalize(load)
	if err != nil {
		t.Fatal(err)
	}
	if s.Shape != ShapePinned || s.Partitioner != loadgen.PerProducerPartitioner || s.Linger != 5*time.Millisecond ||
		s.BatchMaxBytes != 1<<20 || s.MaxBufferedRecords != 10_000 || s.FetchMaxBytes != 50<<20 ||
		s.FetchMaxPartitionBytes != 10<<20 || s.FetchMinBytes != 1 || s.FetchMaxWait != 500*time.Millisecond || s.Consumers != 4 {
		t.Fatalf("pinned: %+v", s)
	}
	mustContain(t, "pinned label", s.Label(), "shape pinned: fill 10,000,000 records of 100 bytes into 16 partitions (producers with the per-producer partitioner, linger 5ms, batches up to 1 MiB, 10,000 buffered records each); 4 consumers (assigned partitions, fetch max 50 MiB, 10 MiB a partition, min 1 B, max wait 500ms")

	byHand, err := ConsumeSettings{Partitioner: "Per-Producer", BatchMaxBytes: 1 << 20, MaxBufferedRecords: 10_000,
		FetchMaxPartitionBytes: 10 << 20, FetchMaxWait: 500 * time.Millisecond}.Normalize(load)
	if err != nil || byHand != s {
		t.Fatalf("pinned given setting by setting:\n %+v, %v\nwant\n %+v", byHand, err, s)
	}

	custom, err := ConsumeSettings{Shape: ShapePinned, FetchMaxWait: time.Second, Linger: loadgen.NoLinger}.Normalize(load)
	if err != nil || custom.Shape != ShapeCustom || custom.FetchMaxWait != time.Second || custom.Partitioner != loadgen.PerProducerPartitioner {
		t.Fatalf("pinned with a longer max wait: %+v, %v", custom, err)
	}
	mustContain(t, "custom label", custom.Label(), "shape custom: ", "linger none", "max wait 1s")

	buffered := load
	buffered.MaxBufferedRecords = 2000
	def, err := ConsumeSettings{Shape: ShapeDefault}.Normalize(buffered)
	if err != nil || def.Shape != ShapeDefault || def.MaxBufferedRecords != 2000 {
		t.Fatalf("default shape under --max-buffered-records 2000: %+v, %v", def, err)
	}
	if c, err := (ConsumeSettings{MaxBufferedRecords: 3000}).Normalize(buffered); err != nil || c.Shape != ShapeCustom {
		t.Fatalf("default shape with its own buffer: %+v, %v", c, err)
	}

	// A file written before the shape was recorded: the produce run's producers, no shape.
	old := def
	old.Shape, old.Partitioner, old.Linger, old.BatchMaxBytes, old.MaxBufferedRecords = "", "", 0, 0, 0
	if l := old.Label(); !strings.HasPrefix(l, "fill 10,000,000 records of 100 bytes into 16 partitions (the produce run's producers); ") {
		t.Errorf("label of an old file: %q", l)
	}
}

// TestConsumeProducersUseTheShape: the fill's and the tail's loadgen config carry the shape's
// producer settings, and producer i's kgo client (as loadgen builds it) sends to partition i
// mod the partition count. kgo.NewClient does not connect.
func TestConsumeProducersUseTheShape(t *testing.T) {
	load := Load{Producers: 16, Partitions: 16, RecordSize: 100, Idempotent: true, Duration: time.Minute, MaxBufferedRecords: 2000}
	s, err := ConsumeSettings{Shape: ShapePinned}.Normalize(load)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.producerConfig(load, "127.0.0.1:1", 500)
	if cfg.Topic != "bench-consume" || cfg.Partitions != 16 || cfg.Duration != 0 || cfg.Rate != 500 || !cfg.Idempotent ||
		cfg.Partitioner != loadgen.PerProducerPartitioner || cfg.Linger != 5*time.Millisecond || cfg.BatchMaxBytes != 1<<20 ||
		cfg.MaxBufferedRecords != 10_000 {
		t.Fatalf("producer config %+v", cfg)
	}
	for _, i := range []int{0, 5, 21} {
		opts, err := cfg.ProducerOpts(i)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		part := cl.OptValue(kgo.RecordPartitioner).(kgo.Partitioner)
		got := part.ForTopic(cfg.Topic).Partition(&kgo.Record{}, 16)
		if buffered := cl.OptValue(kgo.MaxBufferedRecords); got != i%16 || buffered != int64(10_000) {
			t.Errorf("producer %d: partition %d, %v buffered records; want %d, 10000", i, got, buffered, i%16)
		}
		cl.Close()
	}
}

// consumeRun is a successful consume phase with the given figures.
func consumeRun(catchupRate, perCPU, cores float64, p99 uint64) *ConsumeRun {
	return &ConsumeRun{
		Fill:    &FillResult{Acked: 1000, RecordsPerSec: 5000},
		Catchup: &CatchupResult{Expected: 1000, Records: 1000, RecordsPerSec: catchupRate, MBPerSec: catchupRate / 1e4, RecordsPerCPUSecond: perCPU},
		Tail: &TailResult{OfferedRate: 100, Sent: 100, Acked: 100, Received: 100, RecordsPerSec: 100, ServerCPUCores: cores,
			E2E: loadgen.LatencySummary{Count: 100, P50Us: p99 / 2, P99Us: p99, P999Us: p99 + 1, MaxUs: p99 + 2}},
	}
}

// consumeFile is a compare file with a consume phase: inlet twice, inlet-discard skipped,
// kfake once measured and once failed, and a peer whose only phase failed.
func consumeFile() *File {
	f := sampleFile(KindCompare)
	f.Baseline = TargetInlet
	f.Targets = []proc.Target{{Name: "inlet", Argv: []string{"bin/inlet"}}, {Name: "inlet-discard"}, {Name: "kfake"}, {Name: "klite"}}
	s, _ := ConsumeSettings{FillRecords: 1000, TailRate: 100, TailDuration: time.Second}.Normalize(Load{Producers: 16, Partitions: 16, RecordSize: 100})
	f.Consume = &s
	ok := func(target string, rep int, c *ConsumeRun) Run {
		return Run{Target: target, Repeat: rep, RecordsPerSec: 1000, Acked: 1000, Consume: c}
	}
	f.Runs = []Run{
		ok("inlet", 1, consumeRun(1_000_000, 2_000_000, 0.5, 10_000)),
		ok("inlet-discard", 1, &ConsumeRun{Skipped: "stores nothing to read back"}),
		ok("kfake", 1, consumeRun(500_000, 8_000_000, 0.25, 4_000)),
		ok("klite", 1, &ConsumeRun{Error: "catch-up: 10 of 1000 records read in 5m0s"}),
		ok("inlet", 2, consumeRun(3_000_000, 4_000_000, 1.5, 30_000)),
		ok("inlet-discard", 2, &ConsumeRun{Skipped: "stores nothing to read back"}),
		ok("kfake", 2, &ConsumeRun{Error: "tail: 1 of 100 acknowledged records never received", Tail: &TailResult{Acked: 100, Received: 99}}),
		ok("klite", 2, &ConsumeRun{Error: "fill: 1 records failed"}),
	}
	f.Summary = Summarize(f.Runs, f.Baseline)
	return f
}

func TestSummarizeConsumeMediansAndRatios(t *testing.T) {
	f := consumeFile()
	by := map[string]*ConsumeSummary{}
	for _, s := range f.Summary {
		by[s.Target] = s.Consume
	}
	in := by["inlet"]
	if in.Runs != 2 || in.Failed != 0 || in.CatchupRecordsPerSec != 2_000_000 || in.CatchupRecordsPerCPUSecond != 3_000_000 ||
		in.TailServerCPUCores != 1 || in.TailP99Us != 20_000 || *in.CatchupRecordsPerSecRatio != 1 {
		t.Errorf("inlet: %+v", in)
	}
	kf := by["kfake"]
	if kf.Runs != 2 || kf.Failed != 1 || kf.CatchupRecordsPerSec != 500_000 || *kf.CatchupRecordsPerSecRatio != 0.25 ||
		*kf.CatchupPerCPURatio != 8.0/3 || *kf.TailCPURatio != 0.25 {
		t.Errorf("kfake: %+v", kf)
	}
	if d := by["inlet-discard"]; d.Skipped != "stores nothing to read back" || d.Measured() || d.CatchupRecordsPerSecRatio != nil {
		t.Errorf("inlet-discard: %+v", d)
	}
	if k := by["klite"]; k.Runs != 2 || k.Failed != 2 || k.Measured() || k.TailCPURatio != nil {
		t.Errorf("klite: %+v", k)
	}
	if s := Summarize(sampleFile(KindCompare).Runs, "inlet"); s[0].Consume != nil {
		t.Errorf("runs without a consume phase got a consume summary: %+v", s[0].Consume)
	}
}

// TestConsumeFileRoundTrip: a compare file with a consume phase reads back equal, and a file
// written before the phase existed still reads, without one.
func TestConsumeFileRoundTrip(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "results")
	f := consumeFile()
	f.Runs[0].Consume.Tail.E2EHistogram = []loadgen.HistogramBucket{{LowUs: 9984, HighUs: 10015, Count: 100}}
	if _, err := writeFile(root, dir, f); err != nil {
		t.Fatal(err)
	}
	files, err := ReadFiles(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || !reflect.DeepEqual(files[0], f) {
		t.Fatalf("round trip changed the file:\n got %+v\nwant %+v", files[0], f)
	}
	for _, old := range fixtureFiles(t) {
		if old.Consume != nil {
			t.Errorf("%s: a consume phase out of nowhere", old.Name)
		}
		for _, r := range old.Runs {
			if r.Consume != nil {
				t.Errorf("%s: run with a consume phase out of nowhere", old.Name)
			}
		}
	}
}

func TestWriteConsumeTable(t *testing.T) {
	var b bytes.Buffer
	writeSummaryTable(&b, consumeFile())
	out := b.String()
	mustContain(t, "summary", out, "\nconsume: shape default: fill 1,000 records", "tail CPU ratio",
		"n/a: stores nothing to read back", "0.25 cores", "2 (2 failed)")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "kfake") && strings.Contains(line, "cores") &&
			!(strings.Contains(line, "500,000") && strings.Contains(line, "0.25×") && strings.Contains(line, "2.67×")) {
			t.Errorf("kfake consume line lacks its medians and ratios: %q", line)
		}
	}
	b.Reset()
	writeSummaryTable(&b, sampleFile(KindCompare))
	if strings.Contains(b.String(), "consume") {
		t.Errorf("a consume table without a consume phase:\n%s", b.String())
	}
}

// TestCompareConsumeShort is the end-to-end check of `bench compare --consume` against freshly
// built inlet and kfake-broker: a 1 s produce run, then a fill of 50,000 records in the pinned
// shape (4 producers each writing one of the 8 partitions, so 4 stay empty) read back by 3
// consumers, and a 1 s tail at 5,000 records/s. It checks counts only, never timings. About
// 15 s.
func TestCompareConsumeShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds inlet and kfake-broker and runs for about 15 s")
	}
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	for _, pkg := range []string{"inlet/cmd/inlet", "inlet/cmd/kfake-broker"} {
		build := exec.Command("go", "build", "-o", bins, pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := Compare(ctx, CompareOptions{
		Env: Env{Root: root, ResultsDir: t.TempDir(), TmpDir: t.TempDir(), InletBin: filepath.Join(bins, "inlet"),
			Command: "go test -run " + t.Name(), Stdout: &stdout, Stderr: &stderr},
		Load:     Load{Producers: 4, Partitions: 8, RecordSize: 100, Idempotent: true, Duration: time.Second, MaxBufferedRecords: 2000},
		Repeat:   1,
		Targets:  []string{TargetInlet, TargetInletDiscard, TargetKfake},
		KfakeBin: filepath.Join(bins, "kfake-broker"),
		Consume: &ConsumeSettings{Shape: ShapePinned, FillRecords: 50_000, Consumers: 3, TailRate: 5_000, TailDuration: time.Second,
			Timeout: time.Minute},
	})
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	if f.Consume == nil || f.Consume.Consumers != 3 || f.Consume.Topic != "bench-consume" || f.Consume.Shape != ShapePinned {
		t.Fatalf("consume settings %+v", f.Consume)
	}
	for _, r := range f.Runs {
		c := r.Consume
		switch {
		case c == nil:
			t.Errorf("%s: no consume phase", r.Target)
		case r.Target == TargetInletDiscard:
			if c.Skipped == "" {
				t.Errorf("inlet-discard was read: %+v", c)
			}
		case !c.OK():
			t.Errorf("%s: consume phase failed: %s", r.Target, c.Error)
		case c.Fill.Acked != 50_000 || c.Catchup.Records != 50_000 || c.Catchup.Expected != 50_000:
			t.Errorf("%s: fill %+v, catch-up %+v", r.Target, c.Fill, c.Catchup)
		case c.Tail.Acked == 0 || c.Tail.Received != c.Tail.Acked || c.Tail.E2E.Count != c.Tail.Received:
			t.Errorf("%s: tail %+v", r.Target, c.Tail)
		}
	}
}
