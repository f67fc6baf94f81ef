package server

import (
	"fmt"
	"strings"
	"testing"

	"inlet/batchlog"
	"inlet/metrics"
	"inlet/wire"
)

// TestProducePathAllocatesNothing pins what BenchmarkProducePath reports: in steady state a
// produce request allocates nothing on its whole path (decode, validation, the group commit on
// the committer and completer goroutines, the reply), with the Prometheus metrics off and on
// (their counters and histograms are resolved at start-up; metrics/metrics.go). The segments
// layout is the default; discard is the benchmark ceiling.
func TestProducePathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items at random: allocation counts mean nothing under it")
	}
	frame := produceFrame("allocs", 16, testBatch(150, 100, -1, 0))
	for _, mode := range []struct {
		name, layout string
		metrics      bool
	}{
		{"segments", batchlog.LayoutSegments, false},
		{"segments-metrics", batchlog.LayoutSegments, true},
		{"discard-metrics", "discard", true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			run, m := producePath(t, mode.layout, mode.metrics, nil, frame)
			for i := 0; i < 100; i++ { // warm pools and create the topic
				run()
			}
			if n := testing.AllocsPerRun(200, run); n != 0 {
				t.Errorf("%v allocations per produce request, want 0", n)
			}
			if m == nil {
				return
			}
			// The hooks ran: 100 + 201 requests (AllocsPerRun runs once more to warm up), each
			// of 16 batches of 150 records, counted once each.
			const requests, records = 301, 301 * 16 * 150
			got := gather(t, m)
			for _, c := range []struct {
				name string
				want float64
			}{
				{`inlet_requests_total{api="Produce"}`, requests},
				{`inlet_request_duration_seconds_count{api="Produce"}`, requests},
				{`inlet_network_received_bytes_total`, requests * float64(4+len(frame))},
				{`inlet_group_commit_records_total`, records},
			} {
				if got[c.name] != c.want {
					t.Errorf("%s = %v, want %v", c.name, got[c.name], c.want)
				}
			}
			if got[`inlet_network_sent_bytes_total`] <= 0 || got[`inlet_group_commits_total`] <= 0 {
				t.Errorf("bytes sent %v, group commits %v: want both above 0", got[`inlet_network_sent_bytes_total`], got[`inlet_group_commits_total`])
			}
		})
	}
}

// gather scrapes m's registry into a map from series (name{labels} as the text format writes
// them, labels in registry order) to value; histograms give their _count and _sum.
func gather(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			var labels []string
			for _, lp := range mm.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			name := mf.GetName()
			suffix := ""
			if len(labels) > 0 {
				suffix = "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case mm.Counter != nil:
				out[name+suffix] = mm.Counter.GetValue()
			case mm.Gauge != nil:
				out[name+suffix] = mm.Gauge.GetValue()
			case mm.Histogram != nil:
				out[name+"_count"+suffix] = float64(mm.Histogram.GetSampleCount())
				out[name+"_sum"+suffix] = mm.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

// TestProducePathCompressedAllocatesNothing: a compressed batch is decompressed on the produce
// path to check its records (validate.go), into a buffer of a decompression slot, so a steady
// stream of compressed produce requests allocates nothing either, for every codec.
func TestProducePathCompressedAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items at random: allocation counts mean nothing under it")
	}
	for _, codec := range []int16{1, 2, 3, 4} { // gzip, snappy, lz4, zstd
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			batch := compressedTestBatch(t, codec, 150, 100)
			if h, code, msg := wire.ValidateProduceBatch(batch, 1<<20); code != wire.ErrNone {
				t.Fatalf("test batch refused: %d %s", code, msg)
			} else if code, msg := wire.ValidateBatchRecords(batch, &h); code != wire.ErrNone {
				t.Fatalf("test batch's records refused: %d %s", code, msg)
			}
			frame := produceFrame("allocs-compressed", 16, batch)
			run, _ := producePath(t, "discard", false, nil, frame)
			for i := 0; i < 100; i++ {
				run()
			}
			if n := testing.AllocsPerRun(200, run); n != 0 {
				t.Errorf("codec %d: %v allocations per produce request, want 0", codec, n)
			}
		})
	}
}
