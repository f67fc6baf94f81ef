package consume

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"inlet/loadgen"
)

// TestE2EMicrosFromStamp: a stamped value reads back its latency; a value too short for a
// stamp, or stamped before the phase began or after it was received, is not a tail record.
func TestE2EMicrosFromStamp(t *testing.T) {
	v := make([]byte, 100)
	putStamp(v, 5_000_000_000, 7, 42)
	for _, tc := range []struct {
		name            string
		v               []byte
		notBefore, recv int64
		want            uint64
		ok              bool
	}{
		{"latency in microseconds, truncated", v, 1_000_000_000, 5_002_345_999, 2345, true},
		{"received at the send time", v, 0, 5_000_000_000, 0, true},
		{"exactly a stamp long", v[:StampSize], 0, 5_000_001_000, 1, true},
		{"shorter than a stamp", v[:StampSize-1], 0, 6_000_000_000, 0, false},
		{"sent before the phase", v, 5_000_000_001, 6_000_000_000, 0, false},
		{"received before it was sent", v, 0, 4_999_999_999, 0, false},
		{"a loadgen value is no stamp", loadgen.NewValue(100, 3, 9), 1_000_000_000, 6_000_000_000, 0, false},
	} {
		got, ok := e2eMicros(tc.v, tc.notBefore, tc.recv)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %d, %t; want %d, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if p, s := v[8:12], v[12:20]; !bytes.Equal(p, []byte{0, 0, 0, 7}) || !bytes.Equal(s, []byte{0, 0, 0, 0, 0, 0, 0, 42}) {
		t.Errorf("producer and sequence not in place: % x", v[:StampSize])
	}
}

// TestStampNanosIsBasePlusElapsed: a stamp is base's Unix time plus the time since base (on
// the monotonic clock when both readings have one).
func TestStampNanosIsBasePlusElapsed(t *testing.T) {
	base := time.Unix(100, 0)
	if got := StampNanos(base, base.Add(1500*time.Microsecond)); got != 100_001_500_000 {
		t.Fatalf("StampNanos = %d", got)
	}
}

func TestSplitPartitionsDealsEachOnce(t *testing.T) {
	for _, tc := range []struct{ n, consumers int }{{16, 4}, {16, 3}, {16, 1}, {2, 4}, {1, 1}} {
		split := splitPartitions(tc.n, tc.consumers)
		if len(split) != tc.consumers {
			t.Fatalf("%d over %d: %d groups", tc.n, tc.consumers, len(split))
		}
		var all []int32
		for _, g := range split {
			if len(g) > tc.n/tc.consumers+1 || tc.n >= tc.consumers && len(g) < tc.n/tc.consumers {
				t.Errorf("%d over %d: unbalanced %v", tc.n, tc.consumers, split)
			}
			all = append(all, g...)
		}
		slices.Sort(all)
		for i, p := range all {
			if p != int32(i) || len(all) != tc.n {
				t.Fatalf("%d over %d: partitions %v, want each of 0..%d once", tc.n, tc.consumers, all, tc.n-1)
			}
		}
	}
}

// TestCatchupCountsUpToHighWatermark: only records in [start, end) of the consumer's own
// partitions count, each once; an empty partition is done from the start.
func TestCatchupCountsUpToHighWatermark(t *testing.T) {
	starts, ends := []int64{0, 5, 3, 0}, []int64{3, 7, 3, 9}
	c := newCatchup([]int32{0, 1, 2}, starts, ends) // partition 2 is empty, 3 is someone else's
	if c.done() {
		t.Fatal("done before any record")
	}
	feed := []struct {
		p      int32
		offset int64
		counts bool
	}{
		{0, 0, true}, {0, 1, true}, {0, 1, false}, // a re-delivered record
		{1, 4, false}, // before the start offset
		{3, 0, false}, // not this consumer's partition
		{0, 2, true},
		{1, 5, true}, {1, 6, true},
		{1, 7, false}, // at the high watermark: a later record
	}
	for _, f := range feed {
		if got := c.observe(f.p, f.offset, 10); got != f.counts {
			t.Errorf("observe(%d, %d) = %t, want %t", f.p, f.offset, got, f.counts)
		}
		if f.p == 0 && f.offset == 2 && !slices.Equal(c.unfinished(), []string{"partition 1 at offset 5 of 7"}) {
			t.Errorf("unfinished = %q", c.unfinished())
		}
	}
	if !c.done() || c.records != 5 || c.bytes != 50 || len(c.unfinished()) != 0 {
		t.Fatalf("done %t, %d records, %d bytes, unfinished %q; want done, 5, 50, none", c.done(), c.records, c.bytes, c.unfinished())
	}
	if !newCatchup([]int32{2}, starts, ends).done() {
		t.Error("a consumer of only empty partitions is not done")
	}
}
