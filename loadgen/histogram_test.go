package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// nearestRank is the reference quantile: the ceil(q*n)-th smallest sample.
func nearestRank(sorted []uint64, q float64) uint64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestHistogramQuantilesMatchSortedReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, gen := range map[string]func() uint64{
		// Log-uniform over 1µs..100s covers every bucket shift a latency can reach.
		"log-uniform": func() uint64 { return uint64(math.Exp(rng.Float64() * math.Log(1e8))) },
		"small exact": func() uint64 { return rng.Uint64N(256) },
		"bimodal": func() uint64 {
			if rng.IntN(100) == 0 {
				return 50_000 + rng.Uint64N(10_000)
			}
			return 800 + rng.Uint64N(400)
		},
	} {
		var h Histogram
		samples := make([]uint64, 200_000)
		for i := range samples {
			samples[i] = gen()
			h.Record(samples[i])
		}
		slices.Sort(samples)
		var s HistogramSnapshot
		h.Snapshot(&s)
		if s.Total != uint64(len(samples)) {
			t.Fatalf("%s: total %d, want %d", name, s.Total, len(samples))
		}
		if s.Max != samples[len(samples)-1] {
			t.Fatalf("%s: max %d, want %d", name, s.Max, samples[len(samples)-1])
		}
		for _, q := range []float64{0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
			got, want := s.Quantile(q), nearestRank(samples, q)
			// A bucket is at most 1/128 of its values wide and the midpoint is reported.
			if diff := math.Abs(float64(got) - float64(want)); diff > float64(want)/256+0.5 {
				t.Errorf("%s: q%v = %d, reference %d", name, q, got, want)
			}
		}
	}
}

func TestHistogramBucketsAreContiguous(t *testing.T) {
	next := uint64(0)
	for i := range numBuckets {
		low, width := bucketRange(i)
		if low != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, low, next)
		}
		if bucketIndex(low) != i || bucketIndex(low+width-1) != i {
			t.Fatalf("bucket %d [%d, %d] does not map back to itself", i, low, low+width-1)
		}
		if low >= 256 && width*128 > low {
			t.Fatalf("bucket %d at %d is %d wide, more than 1/128", i, low, width)
		}
		next = low + width
	}
	if next != MaxHistogramValue+1 {
		t.Fatalf("buckets end at %d, want %d", next, uint64(MaxHistogramValue)+1)
	}
}

func TestHistogramClampsHugeValues(t *testing.T) {
	var h Histogram
	h.Record(math.MaxUint64)
	var s HistogramSnapshot
	h.Snapshot(&s)
	if s.Max != MaxHistogramValue || s.Quantile(1) != MaxHistogramValue {
		t.Fatalf("max %d, q1 %d, want both %d", s.Max, s.Quantile(1), uint64(MaxHistogramValue))
	}
}

func TestHistogramEmpty(t *testing.T) {
	var s HistogramSnapshot
	if s.Quantile(0.5) != 0 || s.Mean() != 0 || s.Buckets() != nil {
		t.Fatal("empty snapshot is not all zero")
	}
}

// The live line reports the last second as the difference of two cumulative snapshots.
func TestHistogramSinceIsolatesTheInterval(t *testing.T) {
	var h Histogram
	for range 1000 {
		h.Record(10)
	}
	var before HistogramSnapshot
	h.Snapshot(&before)
	for range 1000 {
		h.Record(5000)
	}
	var after HistogramSnapshot
	h.Snapshot(&after)
	after.Since(&before)
	if after.Total != 1000 {
		t.Fatalf("interval total %d, want 1000", after.Total)
	}
	if got := after.Quantile(0.01); got < 4961 || got > 5039 {
		t.Fatalf("interval p1 = %d, want about 5000", got)
	}
}

func TestHistogramMergeAndBuckets(t *testing.T) {
	var a, b Histogram
	a.Record(3)
	a.Record(1000)
	b.Record(3)
	b.Record(70_000)
	var sa, sb HistogramSnapshot
	a.Snapshot(&sa)
	b.Snapshot(&sb)
	sa.Merge(&sb)
	if sa.Total != 4 || sa.Max != 70_000 {
		t.Fatalf("merged total %d max %d", sa.Total, sa.Max)
	}
	buckets := sa.Buckets()
	if len(buckets) != 3 || buckets[0] != (HistogramBucket{LowUs: 3, HighUs: 3, Count: 2}) {
		t.Fatalf("buckets %+v", buckets)
	}
	var n uint64
	for _, bk := range buckets {
		n += bk.Count
		if bk.LowUs > bk.HighUs {
			t.Fatalf("bucket %+v inverted", bk)
		}
	}
	if n != 4 {
		t.Fatalf("bucket counts add to %d", n)
	}
}

// Record runs on kgo's promise goroutines while the live line snapshots; run with -race.
func TestHistogramConcurrentRecord(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10_000 {
				h.Record(uint64(g*10_000 + i))
			}
		})
	}
	var s HistogramSnapshot
	h.Snapshot(&s) // concurrently with the writers
	wg.Wait()
	h.Snapshot(&s)
	if s.Total != 80_000 || s.Max != 79_999 {
		t.Fatalf("total %d max %d", s.Total, s.Max)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	for i := range b.N {
		h.Record(uint64(i & 0xffff))
	}
}
