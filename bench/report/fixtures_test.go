package report

import (
	"time"

	"inlet/bench"
	"inlet/bench/proc"
	"inlet/loadgen"
)

func sampleFile(kind string) *bench.File {
	started := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	f := &bench.File{
		Kind: kind, Label: "idempotent, 16 producers, 100-byte records", Command: "bin/bench " + kind + " --repeat 2",
		Flags:   map[string]string{"repeat": "2", "producers": "16"},
		Machine: proc.Machine{CPUModel: "Test CPU", Cores: 2, GitCommit: "abc", GitDirty: true, Date: started},
		Started: started, Finished: started.Add(time.Minute),
	}
	settings := loadgen.Settings{Producers: 16, Idempotent: true, RecordSize: 100, Duration: 20 * time.Second}
	if kind == bench.KindChaos {
		f.Chaos = &bench.ChaosOutcome{KillEverySeconds: 3, Kills: 4, Verdict: "exactly once: ok", OK: true,
			Loadgen: &loadgen.Result{Settings: settings, Acked: 1000, Verify: &loadgen.VerifyResult{Acked: 1000}}}
		return f
	}
	f.Runs = []bench.Run{
		{Target: "inlet", Workers: 1, Repeat: 1, RecordsPerSec: 1000, Acked: 20000, P99Us: 5000,
			Server: proc.ProcStats{PeakRSSBytes: 1 << 20}, Loadgen: &loadgen.Result{Settings: settings}},
		{Target: "inlet", Workers: 2, Repeat: 1, Error: "loadgen: refused, \"quoted\"\nnewline"},
	}
	f.Summary = bench.Summarize(f.Runs, "")
	return f
}

// consumeRun is a successful consume phase with the given figures.
func consumeRun(catchupRate, perCPU, cores float64, p99 uint64) *bench.ConsumeRun {
	return &bench.ConsumeRun{
		Fill:    &bench.FillResult{Acked: 1000, RecordsPerSec: 5000},
		Catchup: &bench.CatchupResult{Expected: 1000, Records: 1000, RecordsPerSec: catchupRate, MBPerSec: catchupRate / 1e4, RecordsPerCPUSecond: perCPU},
		Tail: &bench.TailResult{OfferedRate: 100, Sent: 100, Acked: 100, Received: 100, RecordsPerSec: 100, ServerCPUCores: cores,
			E2E: loadgen.LatencySummary{Count: 100, P50Us: p99 / 2, P99Us: p99, P999Us: p99 + 1, MaxUs: p99 + 2}},
	}
}

// consumeFile is a compare file with a consume phase: inlet twice, inlet-discard skipped,
// kfake once measured and once failed, and a peer whose only phase failed.
func consumeFile() *bench.File {
	f := sampleFile(bench.KindCompare)
	f.Baseline = bench.TargetInlet
	f.Targets = []proc.Target{{Name: "inlet", Argv: []string{"bin/inlet"}}, {Name: "inlet-discard"}, {Name: "kfake"}, {Name: "klite"}}
	s, _ := bench.ConsumeSettings{FillRecords: 1000, TailRate: 100, TailDuration: time.Second}.Normalize(bench.Load{Producers: 16, Partitions: 16, RecordSize: 100})
	f.Consume = &s
	ok := func(target string, rep int, c *bench.ConsumeRun) bench.Run {
		return bench.Run{Target: target, Repeat: rep, RecordsPerSec: 1000, Acked: 1000, Consume: c}
	}
	f.Runs = []bench.Run{
		ok("inlet", 1, consumeRun(1_000_000, 2_000_000, 0.5, 10_000)),
		ok("inlet-discard", 1, &bench.ConsumeRun{Skipped: "stores nothing to read back"}),
		ok("kfake", 1, consumeRun(500_000, 8_000_000, 0.25, 4_000)),
		ok("klite", 1, &bench.ConsumeRun{Error: "catch-up: 10 of 1000 records read in 5m0s"}),
		ok("inlet", 2, consumeRun(3_000_000, 4_000_000, 1.5, 30_000)),
		ok("inlet-discard", 2, &bench.ConsumeRun{Skipped: "stores nothing to read back"}),
		ok("kfake", 2, &bench.ConsumeRun{Error: "tail: 1 of 100 acknowledged records never received", Tail: &bench.TailResult{Acked: 100, Received: 99}}),
		ok("klite", 2, &bench.ConsumeRun{Error: "fill: 1 records failed"}),
	}
	f.Summary = bench.Summarize(f.Runs, f.Baseline)
	return f
}

// scaleFile is a scale result: inlet and klite at two partition counts and one compression,
// klite failing records at 1000 partitions and outgrowing the RSS limit.
func scaleFile() *bench.File {
	started := time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC)
	f := &bench.File{Kind: bench.KindScale, Label: "idempotent, 16 producers, 100-byte records, 16 partitions, inlet on segments storage",
		Command: "bin/bench scale --dimension partitions,compression", Machine: proc.Machine{Cores: 2, GitCommit: "abc", Date: started},
		Started: started, Finished: started.Add(time.Minute), Baseline: bench.TargetInlet,
		Targets: []proc.Target{{Name: "inlet", Argv: []string{"bin/inlet", "--default-partitions", "{partitions}"}},
			{Name: "klite", Argv: []string{"/bin/sh", "-c", "klite --default-partitions {partitions}"}}},
		Scale: &bench.ScaleSettings{RSSLimitBytes: 512 << 20, Base: bench.ScaleBase{Producers: 16, Partitions: 16, RecordSize: 100,
			Compression: "none", Idempotent: true, DurationSeconds: 4},
			Dimensions: []bench.ScaleDimension{{Name: bench.DimPartitions, Points: []string{"16", "1000"}}, {Name: bench.DimCompression, Points: []string{"lz4"}}}},
	}
	run := func(dim, point, target string, rep int, rps, cpuPerM float64, rss int64) bench.Run {
		return bench.Run{Target: target, Dimension: dim, Point: point, Repeat: rep, RecordsPerSec: rps, MBPerSec: rps * 100 / 1e6,
			Acked: uint64(rps * 4), CPUSecondsPerMillion: cpuPerM, Server: proc.ProcStats{CPUSeconds: rps * 4 * cpuPerM / 1e6, PeakRSSBytes: rss}}
	}
	f.Runs = []bench.Run{
		run(bench.DimPartitions, "16", "inlet", 1, 1_000_000, 1.0, 100<<20),
		run(bench.DimPartitions, "16", "klite", 1, 500_000, 2.0, 300<<20),
		run(bench.DimPartitions, "16", "inlet", 2, 1_200_000, 1.2, 110<<20),
		run(bench.DimPartitions, "16", "klite", 2, 700_000, 2.2, 320<<20),
		run(bench.DimPartitions, "1000", "inlet", 1, 800_000, 1.5, 200<<20),
		run(bench.DimPartitions, "1000", "klite", 1, 200_000, 4.0, 900<<20),
		run(bench.DimCompression, "lz4", "inlet", 1, 600_000, 1.8, 150<<20),
		run(bench.DimCompression, "lz4", "klite", 1, 300_000, 3.0, 400<<20),
	}
	f.Runs[5].Failed, f.Runs[5].Error = 12, "12 records failed: map[timeout:12]"
	f.Summary = bench.SummarizeScale(f.Runs, f.Baseline)
	return f
}
