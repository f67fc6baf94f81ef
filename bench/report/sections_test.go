package report

import (
	"strings"
	"testing"
	"time"

	"inlet/bench"
)

func TestReportConsumeSection(t *testing.T) {
	f := consumeFile()
	f.Name = "results/compare-20250304-050607.json"
	// The same load read in the pinned shape, and in the shape of a file from before shapes
	// were recorded: three groups, each saying how it was read.
	pinned := consumeFile()
	pinned.Name, pinned.Started = "results/compare-20250304-060000.json", f.Started.Add(time.Hour)
	ps, err := bench.ConsumeSettings{Shape: bench.ShapePinned, FillRecords: 1000, TailRate: 100, TailDuration: time.Second}.Normalize(bench.Load{Producers: 16, Partitions: 16, RecordSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	pinned.Consume = &ps
	old := consumeFile()
	old.Name, old.Started = "results/compare-20250304-040000.json", f.Started.Add(-time.Hour)
	old.Consume.Shape, old.Consume.Partitioner, old.Consume.Linger, old.Consume.BatchMaxBytes, old.Consume.MaxBufferedRecords = "", "", 0, 0, 0
	sections, charts := renderReport(append(fixtureFiles(t), f, pinned, old), "results", func(s string) string { return s })
	body := sectionBody(t, sections, sectionConsume)
	mustContain(t, "consume section", body,
		"### idempotent, 16 producers, 100-byte records, consume shape default: inlet, inlet-discard, kfake, klite",
		"Consume phase: shape default: fill 1,000 records of 100 bytes into 16 partitions (producers with the uniform partitioner, linger 5ms, batches up to 1,000,012 B, 100,000 buffered records each); 4 consumers (assigned partitions, fetch max 50 MiB, 1 MiB a partition, min 1 B, max wait 5s",
		"### idempotent, 16 producers, 100-byte records, consume shape pinned: inlet, inlet-discard, kfake, klite",
		"Consume phase: shape pinned: fill 1,000 records of 100 bytes into 16 partitions (producers with the per-producer partitioner, linger 5ms, batches up to 1 MiB, 10,000 buffered records each); 4 consumers (assigned partitions, fetch max 50 MiB, 10 MiB a partition, min 1 B, max wait 500ms",
		"### idempotent, 16 producers, 100-byte records: inlet, inlet-discard, kfake, klite",
		"Consume phase: fill 1,000 records of 100 bytes into 16 partitions (the produce run's producers); 4 consumers (assigned partitions, fetch max 50 MiB, 1 MiB a partition",
		"| target | runs | catch-up records/s | vs baseline | catch-up MB/s | records / server CPU-s | vs baseline | tail records/s | tail server CPU | vs baseline | e2e p50 | e2e p99 | e2e p99.9 | e2e max |",
		"| inlet | 2 | 2,000,000 | 1.00× | 200.0 | 3,000,000 | 1.00× | 100 | 1.00 cores | 1.00× | 10.00 ms | 20.00 ms | 20.00 ms | 20.00 ms |",
		"| inlet-discard | n/a: stores nothing to read back | – |",
		"| kfake | 2 (1 failed) | 500,000 | 0.25× | 50.0 | 8,000,000 | 2.67× | 100 | 0.25 cores | 0.25× | 2.00 ms | 4.00 ms |",
		"| klite | 2 (2 failed) | – | – |",
		"- `klite`, repeat 1: catch-up: 10 of 1000 records read in 5m0s",
		"- `kfake`, repeat 2: tail: 1 of 100 acknowledged records never received",
		"![Catch-up read records/s by broker](results/consume-catchup.svg)",
	)
	for _, c := range []string{chartConsumeCatchup, chartConsumeCPU, chartConsumeTail} {
		b, ok := charts[c]
		if !ok {
			t.Errorf("no %s", c)
			continue
		}
		checkSVG(t, b)
		if strings.Contains(string(b), "inlet-discard") {
			t.Errorf("%s has a bar for inlet-discard, which is not read", c)
		}
	}
	// The compare section is unchanged by the consume phase.
	mustContain(t, "compare section", sectionBody(t, sections, bench.KindCompare), "| inlet | 2 | 1,000 | 1.00× |")

	sections, charts = renderReport(fixtureFiles(t), "results", func(s string) string { return s })
	mustContain(t, "empty consume section", sectionBody(t, sections, sectionConsume),
		"_No consume results yet: run `bin/bench compare --consume`._")
	if _, ok := charts[chartConsumeCatchup]; ok {
		t.Error("a consume chart without consume results")
	}
}

func TestReportScaleSection(t *testing.T) {
	older := scaleFile()
	older.Name = "results/scale-20261129-210000.json"
	older.Started = older.Started.Add(-24 * time.Hour)
	older.Scale.Dimensions = older.Scale.Dimensions[:1]
	f := scaleFile()
	f.Name = "results/scale-20261130-210000.json"
	sections, charts := renderReport([]*bench.File{older, f}, "results", func(s string) string { return s })
	body := sectionBody(t, sections, bench.KindScale)
	mustContain(t, "scale section", body,
		"### Partitions in one topic: inlet, klite",
		"| 16 | inlet | 2 | 1,100,000 | 1.00× | 110.0 | 1.10 | 1.00× |",
		"| 16 | klite | 2 | 600,000 | 0.55× |",
		"| 1000 | klite | 1 (1 failed) | – | – | – | – | – | – | 900 MiB | **peak RSS 900 MiB > 512 MiB; 12 failed records** |",
		"### Producer compression: inlet, klite",
		"| lz4 | klite | 1 | 300,000 | 0.50× |",
		"- partitions 1000, `klite`, repeat 1: 12 records failed",
		"`klite`: `/bin/sh -c 'klite --default-partitions {partitions}'`",
		"Earlier runs of this configuration: [scale-20261129-210000.json]",
		"(results/scale-partitions-throughput.svg)", "(results/scale-compression-cpu.svg)")
	if strings.Contains(body, "### Topics") {
		t.Error("a dimension without runs has a section")
	}
	if strings.Count(body, "Earlier runs") != 1 {
		t.Error("the compression curve lists the older file, which did not measure it")
	}
	for _, name := range []string{chartScaleThroughput(bench.DimPartitions), chartScaleCPU(bench.DimPartitions),
		chartScaleThroughput(bench.DimCompression), chartScaleCPU(bench.DimCompression)} {
		b, ok := charts[name]
		if !ok {
			t.Fatalf("no chart %s", name)
		}
		counts := checkSVG(t, b)
		if counts["polyline"] != 2 {
			t.Errorf("%s: %d lines, want one per target", name, counts["polyline"])
		}
	}
	// The compression axis is labelled with the names.
	if svg := string(charts[chartScaleThroughput(bench.DimCompression)]); !strings.Contains(svg, ">lz4</text>") {
		t.Errorf("compression chart lacks the lz4 tick:\n%s", svg)
	}

	empty, _ := renderReport(nil, "results", func(s string) string { return s })
	mustContain(t, "empty scale section", sectionBody(t, empty, bench.KindScale), "_No scale results yet")
}
