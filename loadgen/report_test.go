package loadgen

import (
	"strings"
	"testing"
	"time"
)

func TestThousands(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", 100000: "100,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatMicros(t *testing.T) {
	for us, want := range map[uint64]string{0: "0µs", 999: "999µs", 1000: "1.00ms", 12345: "12.35ms", 2_500_000: "2.50s"} {
		if got := formatMicros(us); got != want {
			t.Errorf("formatMicros(%d) = %q, want %q", us, got, want)
		}
	}
}

func TestLiveLine(t *testing.T) {
	var h Histogram
	for range 100 {
		h.Record(1500)
	}
	var s HistogramSnapshot
	h.Snapshot(&s)
	line := liveLine(3*time.Second, time.Second, 1_000_000, 100, &s, 7)
	for _, want := range []string{"3.0s", "1,000,000 rec/s", "100.0 MB/s", "p50   1.50ms", "errors 7"} {
		if !strings.Contains(line, want) {
			t.Errorf("live line %q lacks %q", line, want)
		}
	}
}

func TestWriteSummaryVerdicts(t *testing.T) {
	r := &Result{
		Sent: 10, Acked: 9, Failed: 1, Errors: map[string]uint64{"timeout": 1},
		Verify: &VerifyResult{Mode: "exactly once", OK: false, Lost: 1,
			Mismatches: []Mismatch{{Kind: Lost, Producer: 0, Seq: 4, Partition: -1, Offset: -1}}},
	}
	var b strings.Builder
	if err := r.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sent 10, acked 9, failed 1", "exactly once: FAILED", "lost: producer 0 seq 4", "1  timeout"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
